import { mergeMap, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import { asBatches, type BatchOrBatches } from '../core/ChangeBatch.js';
import type { AnyBatches, DocumentOf } from './types.js';

/**
 * Turns batches (or arrays of batches) into the single changes they hold, in order. For the end of a
 * pipeline only: place it after `checkpointEvery`.
 *
 * In short: when you want a plain stream of changes — to log, to forward to a UI — take it from behind the
 * checkpoint, where dropping or reordering can no longer hold a partition back.
 *
 * Changes emitted here are already acknowledged: work you do with them is not covered by the checkpoint
 * (at-most-once). Work that must finish before the checkpoint belongs upstream of `checkpointEvery`, in
 * {@link eachBatch} or {@link eachChange}.
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery, flattenChanges } from 'rxfeed';
 * changeFeed<Order>(options).pipe(checkpointEvery(100), flattenChanges()).subscribe((c) => console.log(c.id));
 * ```
 *
 * @see {@link eachChange} to work on single changes before the checkpoint.
 * @see {@link eachBatch}, {@link filterChanges}.
 *
 * @returns An operator from batches (or arrays of batches) to their changes.
 */
export function flattenChanges<B extends AnyBatches>(): OperatorFunction<B, Change<DocumentOf<B>>> {
  return mergeMap((value: B) => changesOf(value as BatchOrBatches<DocumentOf<B>>));
}

function changesOf<T>(value: BatchOrBatches<T>): readonly Change<T>[] {
  const batches = asBatches(value);
  if (batches.length === 1) return (batches[0] as (typeof batches)[0]).changes;
  return batches.flatMap((batch) => batch.changes);
}
