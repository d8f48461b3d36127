import type { Subscription } from 'rxjs';
import { afterEach, beforeEach, vi } from 'vitest';

/**
 * Runs each test of the enclosing suite on vitest's fake timers and returns a list for the test's
 * subscriptions: after each test they are unsubscribed (stopping the processors they hold), then real timers
 * come back.
 */
export function withFakeTimers(): Subscription[] {
  const subscriptions: Subscription[] = [];
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    for (const s of subscriptions.splice(0)) s.unsubscribe();
    vi.useRealTimers();
  });
  return subscriptions;
}
