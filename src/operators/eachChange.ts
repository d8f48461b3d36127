import { catchError, defer, from, lastValueFrom, map, toArray, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { type FailureOptions, resolveOnFailure, runIsolating } from '../failures/failurePolicy.js';
import { concurrencyOption } from './internal/batchInternals.js';
import { DROPPED, mapPerPartition } from './internal/perPartitionInternals.js';
import type { AnyBatches, ConcurrencyOptions, DocumentOf, Rebatched } from './types.js';

/** Options of {@link eachChange}. */
export interface EachChangeOptions<T = unknown> extends ConcurrencyOptions, FailureOptions<T> {}

/**
 * Runs an RxJS operator chain on the changes of each batch and rebuilds the batch from what it emits.
 *
 * In short: use any RxJS operator (`mergeMap` to an HTTP call, `filter`, `concatMap`, `bufferCount`...) on
 * single changes, while the batch — and with it the checkpoint position — travels on intact.
 *
 * For each batch, `from(batch.changes).pipe(chain, toArray())` runs to completion and the batch is emitted
 * holding the changes the chain emitted, in the order it emitted them (a `mergeMap` may reorder changes
 * inside a batch; use `concatMap` to keep them in order). Batches of one partition run one at a time, in
 * order; different partitions run concurrently, up to `concurrency` at once. Arrays of batches are
 * re-emitted as arrays once all their batches are done.
 *
 * If the chain errors for a batch, the batch is run again LSN group by LSN group, in order: the changes of
 * each LSN (usually one; several share an LSN in a Cosmos DB transactional batch or a merged partition) alone
 * through the chain under the retry policy of `onFailure` (the batch run counts as the first attempt, so a
 * change that works when run again is processed at least once more; make the work idempotent). An LSN group
 * that still fails after its last attempt is handled by `onFailure` (see {@link OnFailure}), all its changes
 * together: by default (`'halt'`) its partition stops before it; `'skip'` reports it and leaves it out of
 * the batch; `{ deadLetter }` dead-letters it; `'throw'` fails the stream. A batch whose lease this host no longer
 * owns when its turn comes is not run, and a fencing error is never retried: the next owner reads it again.
 *
 * @example
 * ```ts
 * import { changeFeed, eachChange, checkpointEvery } from 'rxfeed';
 * import { mergeMap } from 'rxjs';
 * changeFeed<Order>(options).pipe(eachChange(mergeMap((c) => enrich(c), 8)), checkpointEvery(500)).subscribe();
 * ```
 *
 * @see {@link eachBatch} for a side effect per batch.
 * @see {@link mapChanges}, {@link filterChanges}.
 *
 * @param chain An operator (or `(changes$) => changes$.pipe(...)`) from the changes of one batch to the
 *   changes to keep. It is subscribed once per batch.
 * @param options `concurrency`: partitions processed at once, a positive integer or `Infinity` (default 4);
 *   `onFailure` (default `'halt'`).
 * @returns An operator from batches (or arrays of batches) of `T` to the same shape of `R`.
 */
export function eachChange<B extends AnyBatches, R = DocumentOf<B>>(
  chain: OperatorFunction<Change<DocumentOf<B>>, Change<R>>,
  options?: EachChangeOptions<DocumentOf<B>>,
): OperatorFunction<B, Rebatched<B, R>> {
  const concurrency = concurrencyOption(options);
  const policy = resolveOnFailure(options);
  const run = (batch: ChangeBatch<DocumentOf<B>>) => from(batch.changes).pipe(chain, toArray(), map((changes) => batch.withChanges(changes)));
  // The common path stays an Observable; a failure goes to the policy.
  const project = (batch: ChangeBatch<DocumentOf<B>>) =>
    run(batch).pipe(
      catchError((first: unknown) => defer(async () => (await runIsolating(policy, 'eachChange', batch, first, (b) => lastValueFrom(run(b)))) ?? DROPPED)),
    );
  return mapPerPartition(project, concurrency) as unknown as OperatorFunction<B, Rebatched<B, R>>;
}
