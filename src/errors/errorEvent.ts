import type { Change } from '../core/Change.js';
import type { FeedEvent } from '../core/events.js';
import { errorKind } from './classify.js';
import { HandlerError } from './HandlerError.js';

/** @internal The `error` event for `error`, with its kind (and the change, for item failures). */
export function errorEvent(owner: string, error: unknown, extra: { lease?: string; attempts?: number } = {}): FeedEvent {
  const err = error instanceof Error ? error : new Error(String(error));
  const change: Change<unknown> | undefined = err instanceof HandlerError ? err.change : undefined;
  return {
    type: 'error',
    owner,
    ...(extra.lease !== undefined ? { lease: extra.lease } : {}),
    error: err,
    kind: errorKind(err),
    ...(extra.attempts !== undefined ? { attempts: extra.attempts } : {}),
    ...(change ? { change } : {}),
  };
}

/**
 * True when failure number `attempts` (1-based) of an operation that keeps failing should be reported:
 * 1, 3, 10, 30, 100, 300, … — a repeating failure stays visible without flooding the events stream.
 *
 * @internal
 */
export function worthReporting(attempts: number): boolean {
  if (attempts <= 1) return true;
  let mark = 3;
  while (mark < attempts) mark = mark % 3 === 0 ? (mark / 3) * 10 : mark * 3;
  return mark === attempts;
}
