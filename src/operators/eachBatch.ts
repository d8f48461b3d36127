import { catchError, defer, EMPTY, lastValueFrom, type ObservableInput, type OperatorFunction } from 'rxjs';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { type FailureOptions, resolveOnFailure, runIsolating } from '../deadletter/failurePolicy.js';
import { concurrencyOption, itemFailed, onErrorOption } from './internal/batchInternals.js';
import { DROPPED, mapPerPartition, perPartition } from './internal/perPartitionInternals.js';
import type { AnyBatches, ConcurrencyOptions, DocumentOf } from './types.js';

/** Options of {@link eachBatch}. */
export interface EachBatchOptions<T = unknown> extends ConcurrencyOptions, FailureOptions<T> {}

/**
 * Runs an asynchronous side effect for every batch and re-emits the batch once it has finished.
 *
 * In short: `concatMap` per partition and `mergeMap` across partitions, in one operator that never reorders
 * a partition's batches, so the checkpoint downstream only passes work that is done.
 *
 * Batches of one partition run one at a time, in order; batches of different partitions run concurrently,
 * up to `concurrency` partitions at once. An array of batches (from `bufferTime`) is re-emitted whole once
 * all its batches are done. `fn` gets an `AbortSignal` that aborts when the subscriber unsubscribes;
 * an Observable returned by `fn` is unsubscribed instead.
 *
 * If `fn` fails for a batch (throws, rejects, errors), with `onError: 'report'` (the default) a
 * `HandlerError` for the partition (with no `change`: the whole batch failed) goes to the processor's events
 * stream and the batch travels on, so the checkpoint moves past it. With `onError: 'throw'` the stream
 * errors instead and nothing after the batch is checkpointed.
 *
 * With `onFailure` (see {@link OnFailure}) a failing batch is run again change by change: `fn` gets each
 * change alone as a batch of one (in order, under the retry policy; the batch run counts as the first
 * attempt, so changes that work alone are processed at least once more: make `fn` idempotent). A change
 * that still fails after its last attempt is dead-lettered and left out of the batch passed on, or halts its
 * partition (changes after it are not run). A batch of one change is simply retried.
 *
 * A batch whose lease this host no longer owns when its turn comes is not run (with or without
 * `onFailure`): it goes back to its reader, and the lease's next owner reads it again.
 *
 * @example
 * ```ts
 * import { changeFeed, eachBatch, checkpointEvery } from 'rxfeed';
 * changeFeed<Order>(options)
 *   .pipe(eachBatch((batch, signal) => index.upsert(batch.changes, { signal }), { concurrency: 8 }), checkpointEvery(1000))
 *   .subscribe();
 * ```
 *
 * @see {@link eachChange} to run an RxJS operator chain on the changes of each batch.
 * @see {@link mapChanges}, {@link filterChanges}.
 *
 * @param fn The side effect for one batch: return a Promise or an Observable that settles when it is done
 *   (or nothing, for synchronous work).
 * @param options `concurrency`: partitions with work in flight at once, a positive integer or `Infinity`
 *   (default 4); `onError` (default `'report'`); `onFailure` (default none).
 * @returns An operator that re-emits what it receives, each value after its work finished.
 */
export function eachBatch<B extends AnyBatches>(
  fn: (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) => ObservableInput<unknown> | void,
  options?: EachBatchOptions<DocumentOf<B>>,
): OperatorFunction<B, B> {
  const onError = onErrorOption(options);
  const concurrency = concurrencyOption(options);
  const policy = resolveOnFailure(options?.onFailure);
  if (policy) {
    const project = (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) =>
      defer(async () => {
        const run = async (b: ChangeBatch<DocumentOf<B>>) => {
          await lastValueFrom(defer(() => fn(b, signal) ?? EMPTY), { defaultValue: undefined });
          return b;
        };
        const result = await runIsolating(policy, 'eachBatch', batch, run);
        // Nothing given up on: the batch itself goes on (no copy).
        return result === undefined ? DROPPED : result.size === batch.size ? batch : result;
      });
    return mapPerPartition(project, concurrency) as unknown as OperatorFunction<B, B>;
  }
  return perPartition<B>(
    (batch, signal) =>
      defer(() => fn(batch, signal) ?? EMPTY).pipe(
        catchError((error: unknown) => {
          // Reports and carries on, or throws the HandlerError for the stream to fail with.
          itemFailed('eachBatch', batch, undefined, error, onError);
          return EMPTY;
        }),
      ),
    concurrency,
  );
}
