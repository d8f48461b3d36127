import type { Change } from '../../src/core/Change.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { PartitionTracker } from '../../src/core/PartitionTracker.js';

/** Test helpers: small changes and batches, and a tracker that records what operators report. */

export interface Doc {
  readonly n: number;
}

export function change(id: string, n: number, lsn = n, operation: Change<Doc>['operation'] = 'upsert'): Change<Doc> {
  return { id, operation, document: operation === 'delete' ? undefined : { n }, lsn, timestampMs: 1_000 + lsn };
}

/** A batch of `partition` holding one change per number in `ns`, positioned after its last LSN. */
export function batch(partition: string, ns: readonly number[], options: { position?: string; tracker?: RecordingTracker } = {}): ChangeBatch<Doc> {
  return new ChangeBatch<Doc>({
    partition,
    changes: ns.map((n) => change(`${partition}-${n}`, n)),
    position: options.position ?? `${partition}@${ns.length ? ns[ns.length - 1] : 0}`,
    origin: options.tracker && { tracker: options.tracker, sequence: 1, readCount: ns.length },
  });
}

export interface RecordingTracker extends PartitionTracker {
  readonly errors: Error[];
  /** Sequence numbers passed to `drop`, with the error if one was given. */
  readonly dropped: [number, Error | undefined][];
  /** Ends the ownership: aborts `signal`. */
  end(): void;
}

/**
 * A PartitionTracker that records reportError and drop calls (operators never acknowledge or checkpoint);
 * `end()` aborts its signal as an ended ownership would.
 */
export function recordingTracker(leaseToken: string): RecordingTracker {
  const errors: Error[] = [];
  const dropped: [number, Error | undefined][] = [];
  const ownership = new AbortController();
  return {
    leaseToken,
    errors,
    dropped,
    signal: ownership.signal,
    end: () => ownership.abort(),
    drop: (sequence, error) => {
      dropped.push([sequence, error]);
    },
    acknowledge: () => {
      throw new Error('operators must not acknowledge');
    },
    checkpoint: () => Promise.reject(new Error('operators must not checkpoint')),
    reportError: (error) => {
      errors.push(error);
    },
  };
}

/** The numbers inside a batch, to compare batches by content. */
export const ns = (b: ChangeBatch<Doc>): number[] => b.changes.map((c) => c.document?.n ?? -1);
