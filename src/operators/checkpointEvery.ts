import { asyncScheduler, Observable, type MonoTypeOperatorFunction, type SchedulerLike, type Subscription } from 'rxjs';
import { asBatches, type BatchOrBatches } from '../core/ChangeBatch.js';
import type { Position } from '../core/Partition.js';
import type { PartitionTracker } from '../core/PartitionTracker.js';
import { InvalidOptionsError, LeaseLostError } from '../errors/index.js';

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

interface PartitionState {
  /** Highest sequence acknowledged here. */
  sequence: number;
  position: Position;
  /** Changes acknowledged since the last write began. */
  pending: number;
  /** An acknowledged position is not yet written. */
  dirty: boolean;
  writing: boolean;
  /** Forgets the partition once its ownership ended and nothing is left to write. */
  forget: () => void;
}

function validate(config: number | CheckpointEveryOptions): { count?: number; ms?: number; scheduler: SchedulerLike } {
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
  const { count, ms, scheduler } = validate(config);
  return (source) =>
    new Observable<V>((subscriber) => {
      const partitions = new Map<PartitionTracker, PartitionState>();
      let timer: Subscription | undefined;
      let writes = 0;
      let ending: (() => void) | undefined;
      let ended = false;

      const settle = () => {
        if (ending && writes === 0) {
          ended = true;
          ending();
        }
      };

      const write = (tracker: PartitionTracker, state: PartitionState) => {
        if (state.writing) return; // coalesced: written when the current write finishes
        state.dirty = false;
        state.pending = 0;
        state.writing = true;
        writes++;
        const finish = () => {
          state.writing = false;
          writes--;
          if (state.dirty && (ending || (count !== undefined && state.pending >= count))) write(tracker, state);
          else if (state.dirty) armTimer();
          settle();
        };
        tracker.checkpoint(state.position).then(
          () => {
            finish();
            if (tracker.signal.aborted) state.forget();
          },
          (error: unknown) => {
            tracker.reportError(error instanceof Error ? error : new Error(String(error)));
            // The lease is gone: nothing more can be written for this ownership.
            if (error instanceof LeaseLostError) state.dirty = false;
            finish();
            if (error instanceof LeaseLostError || tracker.signal.aborted) state.forget();
          },
        );
      };

      /**
       * State for a partition seen for the first time. Once its ownership ends the state is dropped (after
       * a write in flight): the reader's drain wrote the final position, and later positions of an ended
       * ownership cannot be written anyway, so nothing grows with each rebalance.
       */
      const track = (tracker: PartitionTracker, position: Position): PartitionState => {
        const onEnd = () => {
          if (!state.writing) state.forget();
        };
        const state: PartitionState = {
          sequence: 0,
          position,
          pending: 0,
          dirty: false,
          writing: false,
          forget: () => {
            tracker.signal.removeEventListener('abort', onEnd);
            if (partitions.get(tracker) === state) partitions.delete(tracker);
          },
        };
        partitions.set(tracker, state);
        if (tracker.signal.aborted) queueMicrotask(onEnd);
        else tracker.signal.addEventListener('abort', onEnd, { once: true });
        return state;
      };

      const flush = () => {
        timer?.unsubscribe();
        timer = undefined;
        // Counted as a write while it starts the others, so a write that settles at once cannot end the
        // stream (and forget partitions) halfway through.
        writes++;
        for (const [tracker, state] of [...partitions]) if (state.dirty) write(tracker, state);
        writes--;
      };

      const armTimer = () => {
        if (ms !== undefined && timer === undefined && !ending) timer = scheduler.schedule(flush, ms);
      };

      const subscription = source.subscribe({
        next(value) {
          for (const batch of asBatches(value)) {
            const origin = batch.origin;
            if (!origin) continue;
            const tracker = origin.tracker;
            tracker.acknowledge(origin.sequence, batch.position);
            let state = partitions.get(tracker);
            if (!state) state = track(tracker, batch.position);
            if (origin.sequence <= state.sequence) continue;
            state.sequence = origin.sequence;
            state.position = batch.position;
            state.dirty = true;
            state.pending += Math.max(1, origin.readCount);
            if (count !== undefined && state.pending >= count) write(tracker, state);
            else armTimer();
          }
          subscriber.next(value);
        },
        error(error: unknown) {
          ending = () => subscriber.error(error);
          flush();
          settle();
        },
        complete() {
          ending = () => subscriber.complete();
          flush();
          settle();
        },
      });

      return () => {
        subscription.unsubscribe();
        // Unsubscribed before the end: still persist what was acknowledged (work that is done); the writes
        // are tracked by the processor, whose stop() awaits them.
        if (!ended && !ending) {
          ending = () => undefined;
          flush();
        }
        timer?.unsubscribe();
        for (const state of [...partitions.values()]) if (!state.writing) state.forget();
      };
    });
}
