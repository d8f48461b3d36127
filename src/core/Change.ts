/**
 * What happened to a document. `upsert` means "created or replaced": the LatestVersion change feed
 * does not say which, so sources in that mode report `upsert`.
 */
export type Operation = 'create' | 'replace' | 'upsert' | 'delete';

/**
 * One change read from a change feed.
 *
 * @example
 * ```ts
 * import type { Change } from 'rxfeed';
 * const label = (c: Change<{ total: number }>) => `${c.operation} ${c.id} @${c.lsn}`;
 * ```
 */
export interface Change<T> {
  /** The document id. */
  readonly id: string;
  /** What happened. */
  readonly operation: Operation;
  /** The document after the change; `undefined` for deletes. */
  readonly document: T | undefined;
  /** The document before the change, when the feed mode gives it (AllVersionsAndDeletes deletes). */
  readonly previous?: T | undefined;
  /** Log sequence number of the change within its partition; increases with every write. */
  readonly lsn: number;
  /** When the change was committed, in milliseconds since the epoch. */
  readonly timestampMs: number;
  /** The document's partition key value, when the source knows it. */
  readonly partitionKey?: unknown;
  /** True when the delete was caused by time-to-live expiry. */
  readonly timeToLiveExpired?: boolean;
}
