import type { OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import { resolveOnFailure } from '../failures/failurePolicy.js';
import { type ChangeFailureOptions, LEFT_OUT, perChange } from './internal/batchInternals.js';
import type { AnyBatches, DocumentOf, Rebatched } from './types.js';

/**
 * Keeps the changes that pass `predicate` inside each batch; every batch travels on, even when empty.
 *
 * In short: the rxfeed way to filter. A plain RxJS `filter` on the stream would drop whole batches and hold
 * their partition's checkpoint back; this one filters inside the batch, so a batch whose changes are all
 * filtered out still carries its position to the checkpoint.
 *
 * Accepts a batch or an array of batches and emits the same shape; a batch that loses nothing is emitted
 * as is. A type-guard predicate narrows the document type. If `predicate` throws for a change, that is an
 * item failure handled by `onFailure` (see {@link OnFailure}): retried, then by default the partition halts
 * before the change; `'skip'` leaves the change out and reports a `HandlerError` instead.
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
 * @param options `onFailure` (default `'halt'`).
 * @returns An operator that emits every batch it gets, holding only the changes that passed.
 */
export function filterChanges<B extends AnyBatches, S extends DocumentOf<B>>(
  predicate: (change: Change<DocumentOf<B>>, index: number) => change is Change<S>,
  options?: ChangeFailureOptions<DocumentOf<B>>,
): OperatorFunction<B, Rebatched<B, S>>;
/** Keeps the changes for which `predicate` returns true (the batches keep their type); see the overload above. */
export function filterChanges<B extends AnyBatches>(
  predicate: (change: Change<DocumentOf<B>>, index: number) => boolean,
  options?: ChangeFailureOptions<DocumentOf<B>>,
): OperatorFunction<B, B>;
export function filterChanges<B extends AnyBatches>(
  predicate: (change: Change<DocumentOf<B>>, index: number) => boolean,
  options?: ChangeFailureOptions<DocumentOf<B>>,
): OperatorFunction<B, B> {
  const policy = resolveOnFailure(options);
  const step = (change: Change<DocumentOf<B>>, index: number) => (predicate(change, index) ? change : LEFT_OUT);
  return perChange('filterChanges', policy, step, predicate) as unknown as OperatorFunction<B, B>;
}
