import { vi } from 'vitest';
import type { PartitionTracker } from '../../src/core/PartitionTracker.js';

/** A {@link PartitionTracker} of a test: its reports and drops are mocks, and `end()` ends the ownership. */
export type FakeTracker = PartitionTracker & { reportError: ReturnType<typeof vi.fn>; drop: ReturnType<typeof vi.fn>; end(): void };

/**
 * A tracker of lease `leaseToken` for tests of sinks: records acknowledgements, reports and drops; `end()` ends
 * the ownership (aborts `signal`). Sinks never checkpoint (`checkpointEvery` does): `checkpoint` rejects.
 */
export function fakeTracker(leaseToken: string): FakeTracker {
  const ownership = new AbortController();
  return {
    leaseToken,
    acknowledge: vi.fn(),
    checkpoint: vi.fn(() => Promise.reject(new Error('sinks never checkpoint: checkpointEvery does'))),
    reportError: vi.fn(),
    drop: vi.fn(),
    signal: ownership.signal,
    end: () => ownership.abort(new DOMException(`ownership of lease ${leaseToken} ended`, 'AbortError')),
  };
}
