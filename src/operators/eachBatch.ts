import { catchError, defer, EMPTY, endWith, from, ignoreElements, lastValueFrom, type ObservableInput, type OperatorFunction } from 'rxjs';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { type FailureOptions, type FailurePolicy, resolveOnFailure, runIsolating } from '../failures/failurePolicy.js';
import { concurrencyOption } from './internal/batchInternals.js';
import { DROPPED, mapPerPartition } from './internal/perPartitionInternals.js';
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
 * If `fn` fails for a batch (throws, rejects, errors), the batch is run again LSN group by LSN group: `fn`
 * gets the changes of each LSN alone as a batch of their own (usually one change; several when they share an
 * LSN, as a Cosmos DB transactional batch's changes or a merged partition's parents' do: they stay together,
 * like a transaction), in order, under the retry policy of `onFailure`; the batch run counts as the first
 * attempt, so changes that work alone are processed at least once more: make `fn` idempotent. A batch of
 * one LSN is simply retried, with backoff (so a database that is briefly down is waited out). An LSN group
 * that still fails after its last attempt is handled by `onFailure` (see {@link OnFailure}), every change of
 * it together: by default (`'halt'`) its partition stops before it and nothing past it is checkpointed;
 * `'skip'` reports it and leaves it out; `{ deadLetter }` dead-letters it; `'throw'` fails the stream.
 *
 * A batch whose lease this host no longer owns when its turn comes is not run, and a batch `fn` fails on
 * with a fencing error (`LeaseLostError`, `ViewFencedError`: another host owns the partition now) is not
 * retried: either goes back to its reader, and the lease's next owner reads it again.
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
 *   (default 4); `onFailure` (default `'halt'`).
 * @returns An operator that re-emits what it receives, each value after its work finished.
 */
export function eachBatch<B extends AnyBatches>(
  fn: (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) => ObservableInput<unknown> | void,
  options?: EachBatchOptions<DocumentOf<B>>,
): OperatorFunction<B, B> {
  return eachBatchUnder(fn, concurrencyOption(options), resolveOnFailure(options));
}

/** {@link eachBatch} with a resolved failure policy (the handler form brings its own scheduler). @internal */
export function eachBatchUnder<B extends AnyBatches>(
  fn: (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) => ObservableInput<unknown> | void,
  concurrency: number,
  policy: FailurePolicy<DocumentOf<B>>,
): OperatorFunction<B, B> {
  const run = (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) =>
    defer(() => fn(batch, signal) ?? EMPTY).pipe(ignoreElements(), endWith(batch));
  // A failure goes to the policy; nothing given up on: the batch itself goes on (no copy).
  const recover = async (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal, first: unknown) => {
    const result = await runIsolating(policy, 'eachBatch', batch, first, (b) => lastValueFrom(run(b, signal)));
    return result === undefined ? DROPPED : result.size === batch.size ? batch : result;
  };
  // The common paths build no Observable per batch: synchronous work gives the batch back at once, a
  // promise gives it when it settles; only work given as an Observable (or another input) goes through one.
  const project = (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) => {
    let produced: ObservableInput<unknown> | void;
    try {
      produced = fn(batch, signal);
    } catch (first) {
      return recover(batch, signal, first);
    }
    if (produced === undefined || produced === null) return batch;
    if (isPromiseLike(produced)) {
      return Promise.resolve(produced).then(
        () => batch,
        (first: unknown) => recover(batch, signal, first),
      );
    }
    return from(produced).pipe(
      ignoreElements(),
      endWith(batch),
      catchError((first: unknown) => defer(() => recover(batch, signal, first))),
    );
  };
  return mapPerPartition(project, concurrency) as unknown as OperatorFunction<B, B>;
}

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
