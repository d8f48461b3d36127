import type { OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import { InvalidOptionsError } from '../errors/index.js';
import type { AnyBatches, DocumentOf } from '../operators/types.js';
import { type FailureOptions, resolveOnFailure } from '../failures/failurePolicy.js';
import type { ViewMode, ViewStore } from './ViewStore.js';
import type { SearchDocument } from './SearchIndex.js';
import { materializeToView } from './materializeToView.js';

/** Options of {@link syncToIndex}. */
export interface SyncToIndexOptions<T> extends FailureOptions<T> {
  /**
   * What to index for a change. Return `undefined` to take the document out of the index. Not called for
   * deletes.
   */
  readonly document: (change: Change<T>) => SearchDocument | null | undefined;
  /** The indexed id. Default: the document id (`change.id`). */
  readonly id?: (change: Change<T>) => string;
  /** Soft delete: true removes the document from the index. Deletes and TTL expiries always do. Default none. */
  readonly isDeleted?: (change: Change<T>) => boolean;
  /** How many writes (partitions) may be in flight at once. A positive integer or `Infinity`. Default `4`. */
  readonly concurrency?: number;
  /** Guard policy, as for views; see {@link ViewMode}. Default `'guarded'`. */
  readonly mode?: ViewMode;
}

/**
 * Keeps a full-text index in step with the feed: each batch (or array of batches) becomes one bulk
 * upsert/delete transaction, several changes of one id in it collapse to the last, and the batch is
 * re-emitted only after the index committed, so `checkpointEvery` after it checkpoints what is searchable.
 * Same ordering, concurrency, version guard, `onFailure` policy (default `'halt'`) and handling of an index
 * that is down (retried inside the sink, leases kept; a {@link SinkError} only when waiting cannot help) as
 * {@link materializeToView}.
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery, syncToIndex } from 'rxfeed';
 * import { PostgresSearchIndex } from 'rxfeed/postgres';
 * const index = new PostgresSearchIndex({ connection: pglite, table: 'products' });
 * changeFeed<Product>(options).pipe(
 *   syncToIndex(index, { document: (c) => ({ title: c.document!.name, text: c.document!.description, data: { price: c.document!.price } }) }),
 *   checkpointEvery(500),
 * ).subscribe();
 * const hits = await index.search('waterproof jacket');
 * ```
 */
export function syncToIndex<B extends AnyBatches>(
  index: ViewStore<SearchDocument>,
  options: SyncToIndexOptions<DocumentOf<B>>,
): OperatorFunction<B, B> {
  if (typeof options?.document !== 'function') {
    throw new InvalidOptionsError('document', 'give a function from a change to the SearchDocument to index ({ title?, text, data? })');
  }
  if (options.id !== undefined && typeof options.id !== 'function') throw new InvalidOptionsError('id', 'give a function from a change to its index id');
  // Refuses the removed onError with what to write instead (materializeToView never sees it).
  resolveOnFailure(options);
  return materializeToView<B, SearchDocument>(index, {
    project: options.document,
    key: options.id,
    isDeleted: options.isDeleted,
    concurrency: options.concurrency,
    mode: options.mode,
    onFailure: options.onFailure,
  });
}
