import type { OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import { resolveOnFailure } from '../failures/failurePolicy.js';
import { type ChangeFailureOptions, perChange } from './internal/batchInternals.js';
import type { AnyBatches, DocumentOf, Rebatched } from './types.js';

/**
 * Maps the documents (current and previous images) of every change inside each batch.
 *
 * In short: turn stored documents into the shape your pipeline wants, keeping ids, operations, LSNs and the
 * batch's position; deletes keep an `undefined` document.
 *
 * Accepts a batch or an array of batches and emits the same shape. If `fn` throws for a change, that is an
 * item failure handled by `onFailure` (see {@link OnFailure}): retried, then by default the partition halts
 * before the change; `'skip'` leaves the change out and reports a `HandlerError` instead.
 *
 * @example
 * ```ts
 * import { changeFeed, mapDocuments, checkpointEvery } from 'rxfeed';
 * changeFeed<Order>(options)
 *   .pipe(mapDocuments((order) => ({ id: order.id, total: order.total })), checkpointEvery(100))
 *   .subscribe();
 * ```
 *
 * @see {@link mapChanges} to map whole changes.
 * @see {@link filterChanges}, {@link eachChange}.
 *
 * @param fn Maps one document; also receives the change it belongs to. Called for the previous image too,
 *   when the feed mode gives one.
 * @param options `onFailure` (default `'halt'`).
 * @returns An operator from batches (or arrays of batches) of `T` to the same shape of `R`.
 */
export function mapDocuments<B extends AnyBatches, R>(
  fn: (document: DocumentOf<B>, change: Change<DocumentOf<B>>) => R,
  options?: ChangeFailureOptions<DocumentOf<B>>,
): OperatorFunction<B, Rebatched<B, R>> {
  const policy = resolveOnFailure(options);
  const mapChange = (change: Change<DocumentOf<B>>): Change<R> => {
    const mapped = { ...change, document: change.document === undefined ? undefined : fn(change.document, change) };
    // Only changes that carry a previous image get one: no `previous: undefined` keys appear out of nowhere.
    if (change.previous !== undefined) return { ...mapped, previous: fn(change.previous, change) };
    return mapped as Change<R>;
  };
  return perChange('mapDocuments', policy, mapChange) as unknown as OperatorFunction<B, Rebatched<B, R>>;
}
