import { map, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { BatchOrBatches, ChangeBatch } from '../core/ChangeBatch.js';
import { perBatch } from './internal/batchInternals.js';
import type { AnyBatches, DocumentOf } from './types.js';

/**
 * Keeps only the last change of each document inside each batch (by id and partition key), in feed order.
 *
 * In short: when a document changed five times in one page, a view or an index only needs the fifth
 * change; this saves the four writes before it. The batch and its position travel on unchanged.
 *
 * Within an array of batches each batch is compacted on its own (batches of different partitions never
 * share documents). Do not use it when every version matters (an audit trail in `allVersionsAndDeletes`
 * mode): it drops the intermediate versions by design.
 *
 * @example
 * ```ts
 * import { changeFeed, latestPerDocument, materializeToView, checkpointEvery } from 'rxfeed';
 * changeFeed<Order>(options).pipe(latestPerDocument(), materializeToView(view), checkpointEvery(1000)).subscribe();
 * ```
 *
 * @see {@link filterChanges}, {@link mapChanges}, {@link eachBatch}.
 *
 * @returns An operator that emits every batch it gets, each holding the last change per document.
 */
export function latestPerDocument<B extends AnyBatches>(): OperatorFunction<B, B> {
  return map((value: B) => perBatch(value as BatchOrBatches<DocumentOf<B>>, compact) as B);
}

function compact<T>(batch: ChangeBatch<T>): ChangeBatch<T> {
  const changes = batch.changes;
  const last = new Map<string, number>(); // document key → index of its last change
  for (let i = 0; i < changes.length; i++) last.set(keyOf(changes[i] as Change<T>), i);
  if (last.size === changes.length) return batch; // every document changed once: nothing to drop
  return batch.withChanges(changes.filter((change, i) => last.get(keyOf(change)) === i));
}

function keyOf(change: Change<unknown>): string {
  // Ids are unique per logical partition only; the key value tells same-id documents apart.
  const pk = change.partitionKey;
  if (pk === undefined) return change.id;
  return `${change.id}\u0000${JSON.stringify(pk)}`;
}
