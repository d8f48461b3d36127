import { map, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { BatchOrBatches, ChangeBatch } from '../core/ChangeBatch.js';
import { mapBatch, onErrorOption, perBatch } from './internal/batchInternals.js';
import type { AnyBatches, DocumentOf, ItemErrorOptions, Rebatched } from './types.js';

/**
 * Maps every change inside each batch; the batch, its partition and its position stay as they are.
 *
 * In short: `Array.prototype.map` on the changes of every batch, never on the stream of batches, so no
 * batch is lost on its way to the checkpoint.
 *
 * Accepts a batch or an array of batches (what `bufferTime` gives) and emits the same shape. If `fn` throws
 * for a change, that is an item failure: with `onError: 'report'` (the default) the change is left out of
 * its batch and a `HandlerError` carrying the partition and the change is reported to the processor's
 * events stream; with `onError: 'throw'` the stream errors with it.
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
 * @param options `onError` (default `'report'`).
 * @returns An operator from batches (or arrays of batches) of `T` to the same shape of `R`.
 */
export function mapChanges<B extends AnyBatches, R>(
  fn: (change: Change<DocumentOf<B>>, index: number) => Change<R>,
  options?: ItemErrorOptions,
): OperatorFunction<B, Rebatched<B, R>> {
  const onError = onErrorOption(options);
  const mapOne = (batch: ChangeBatch<DocumentOf<B>>) => mapBatch('mapChanges', batch, fn, onError);
  return map((value: B) => perBatch(value as BatchOrBatches<DocumentOf<B>>, mapOne) as Rebatched<B, R>);
}
