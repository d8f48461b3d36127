import type { OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import { resolveOnFailure } from '../failures/failurePolicy.js';
import { type ChangeFailureOptions, perChange } from './internal/batchInternals.js';
import type { AnyBatches, DocumentOf, Rebatched } from './types.js';

/**
 * Maps every change inside each batch; the batch, its partition and its position stay as they are.
 *
 * In short: `Array.prototype.map` on the changes of every batch, never on the stream of batches, so no
 * batch is lost on its way to the checkpoint.
 *
 * Accepts a batch or an array of batches (what `bufferTime` gives) and emits the same shape. If `fn` throws
 * for a change, that is an item failure handled by `onFailure` (see {@link OnFailure}): retried, then by
 * default the partition halts before the change (nothing past it is checkpointed); `'skip'` leaves the change
 * out and reports a `HandlerError` to the processor's events stream instead.
 *
 * @example
 * ```ts
 * import { changeFeed, mapChanges, checkpointEvery } from 'rxfeed';
 * const summary = (c: Change<Order>) => ({ ...c, document: c.document && { total: c.document.total } });
 * changeFeed<Order>(options).pipe(mapChanges(summary), checkpointEvery(100)).subscribe();
 * ```
 *
 * @see {@link mapDocuments} to map only the documents.
 * @see {@link filterChanges}, {@link eachChange}, {@link eachBatch}.
 *
 * @param fn Maps one change; receives the change and its index in the batch.
 * @param options `onFailure` (default `'halt'`).
 * @returns An operator from batches (or arrays of batches) of `T` to the same shape of `R`.
 */
export function mapChanges<B extends AnyBatches, R>(
  fn: (change: Change<DocumentOf<B>>, index: number) => Change<R>,
  options?: ChangeFailureOptions<DocumentOf<B>>,
): OperatorFunction<B, Rebatched<B, R>> {
  const policy = resolveOnFailure(options);
  return perChange('mapChanges', policy, fn) as unknown as OperatorFunction<B, Rebatched<B, R>>;
}
