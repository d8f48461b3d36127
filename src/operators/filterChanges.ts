import { map, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { BatchOrBatches, ChangeBatch } from '../core/ChangeBatch.js';
import { filterBatch, onErrorOption, perBatch } from './internal/batchInternals.js';
import type { AnyBatches, DocumentOf, ItemErrorOptions, Rebatched } from './types.js';

/**
 * Keeps the changes that pass `predicate` inside each batch; every batch travels on, even when empty.
 *
 * In short: the rxfeed way to filter. A plain RxJS `filter` on the stream would drop whole batches and hold
 * their partition's checkpoint back; this one filters inside the batch, so a batch whose changes are all
 * filtered out still carries its position to the checkpoint.
 *
 * Accepts a batch or an array of batches and emits the same shape; a batch that loses nothing is emitted
 * as is. A type-guard predicate narrows the document type. If `predicate` throws for a change, that is an
 * item failure: with `onError: 'report'` (the default) the change is left out and a `HandlerError`
 * carrying the partition and the change is reported to the processor's events stream; with
 * `onError: 'throw'` the stream errors with it.
 *
 * @example
 * ```ts
 * import { changeFeed, filterChanges, checkpointEvery } from 'rxfeed';
 * changeFeed<Order>(options)
 *   .pipe(filterChanges((c) => c.operation !== 'delete' && c.document!.total > 100), checkpointEvery(100))
 *   .subscribe();
 * ```
 *
 * @see {@link mapChanges}, {@link mapDocuments}, {@link eachChange}.
 *
 * @param predicate Decides whether a change stays; receives the change and its index in the batch.
 * @param options `onError` (default `'report'`).
 * @returns An operator that emits every batch it gets, holding only the changes that passed.
 */
export function filterChanges<B extends AnyBatches, S extends DocumentOf<B>>(
  predicate: (change: Change<DocumentOf<B>>, index: number) => change is Change<S>,
  options?: ItemErrorOptions,
): OperatorFunction<B, Rebatched<B, S>>;
export function filterChanges<B extends AnyBatches>(
  predicate: (change: Change<DocumentOf<B>>, index: number) => boolean,
  options?: ItemErrorOptions,
): OperatorFunction<B, B>;
export function filterChanges<B extends AnyBatches>(
  predicate: (change: Change<DocumentOf<B>>, index: number) => boolean,
  options?: ItemErrorOptions,
): OperatorFunction<B, B> {
  const onError = onErrorOption(options);
  const filterOne = (batch: ChangeBatch<DocumentOf<B>>) => filterBatch(batch, predicate, onError);
  return map((value: B) => perBatch(value as BatchOrBatches<DocumentOf<B>>, filterOne) as B);
}
