import { asyncScheduler, Observable, type MonoTypeOperatorFunction, type SchedulerLike } from 'rxjs';
import { asBatches, type BatchOrBatches } from '../core/ChangeBatch.js';
import { InvalidOptionsError } from '../errors/index.js';
import { type CheckpointPolicy, CheckpointWriter } from './internal/checkpointWriter.js';

/** Options of {@link checkpointEvery}. */
export interface CheckpointEveryOptions {
  /**
   * Persist a partition's position once this many of its changes (counted as read, before any filtering;
   * a batch counts at least 1) were acknowledged since its last checkpoint. Default: no count trigger.
   */
  readonly count?: number;
  /**
   * Persist every acknowledged position at most this long after it was acknowledged, in ms. Default: no
   * time trigger.
   */
  readonly ms?: number;
  /** Scheduler of the `ms` timer. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

function validate(config: number | CheckpointEveryOptions): CheckpointPolicy {
  const options = typeof config === 'number' ? { count: config } : config;
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError('checkpointEvery', 'pass a change count or { count, ms }');
  }
  const { count, ms } = options;
  if (count !== undefined && (!Number.isInteger(count) || count < 1)) {
    throw new InvalidOptionsError('count', `checkpointEvery needs a positive integer count, got ${String(count)}`);
  }
  if (ms !== undefined && (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)) {
    throw new InvalidOptionsError('ms', `checkpointEvery needs a non-negative number of milliseconds, got ${String(ms)}`);
  }
  if (count === undefined && ms === undefined) {
    throw new InvalidOptionsError('checkpointEvery', 'give count, ms or both, e.g. checkpointEvery({ count: 1000, ms: 5000 })');
  }
  return { count, ms, scheduler: options.scheduler ?? asyncScheduler };
}

/**
 * The ack point of a pipeline: everything upstream of it is done for the batches it receives. Returns their
 * read credit and persists each partition's position through its lease.
 *
 * In short: put it last; it checkpoints only work that has reached it, and re-emits what it got.
 *
 * A partition's position is written after `count` of its changes or `ms` milliseconds, whichever comes
 * first, and when the pipeline completes, fails or is unsubscribed. Writes for one lease never overlap; a
 * position acknowledged during a write is coalesced into the next one. A rejected write (such as
 * `LeaseLostError`: another host owns the lease now) is reported as an `error` event, not a pipeline error.
 * Accepts a batch or an array of batches (what `bufferTime`/`bufferCount` give).
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery, mapChanges } from 'rxfeed';
 * changeFeed(options).pipe(mapChanges(toRow), bufferTime(500), materializeToView(view), checkpointEvery({ count: 1000, ms: 5000 })).subscribe();
 * ```
 * @param config a change count, or `{ count, ms, scheduler }`.
 * @returns an operator that acknowledges and re-emits every value.
 * @see {@link changeFeed}
 */
export function checkpointEvery<V extends BatchOrBatches<unknown>>(
  config: number | CheckpointEveryOptions,
): MonoTypeOperatorFunction<V> {
  const policy = validate(config);
  return (source) =>
    new Observable<V>((subscriber) => {
      const writer = new CheckpointWriter(policy);
      const subscription = source.subscribe({
        next(value) {
          for (const batch of asBatches(value)) writer.acknowledge(batch);
          subscriber.next(value);
        },
        error(error: unknown) {
          writer.end(() => subscriber.error(error));
        },
        complete() {
          writer.end(() => subscriber.complete());
        },
      });
      return () => {
        subscription.unsubscribe();
        writer.dispose();
      };
    });
}
