import type { FeedRange, Position } from '../core/Partition.js';

/**
 * How a view store protects itself against changes that arrive twice or late.
 *
 * - `'guarded'` (default): every row keeps the LSN of the change that wrote it, and an older or replayed
 *   change never overwrites a newer row; deletes leave a tombstone so an older change cannot bring a row
 *   back. Works with any checkpointing (the feed may replay after a crash, the view does not move
 *   backwards). Use it when each row is keyed by one document (the row key identifies the document).
 * - `'exactlyOnce'`: the store keeps each partition's position and highest LSN in the same transaction as
 *   the rows, skips changes at or below that LSN, and writes rows without a per-row guard. Use it when
 *   several documents feed one row (LSNs of different partitions cannot be compared), or when the view's
 *   positions should be the source of truth for resuming (see {@link ViewStore.positions} and
 *   `alignLeasesWithView`).
 *
 * What "older" means: LSNs are numbered per partition, so guarded mode compares the LSNs of changes to the
 * same key, and assumes that one document's LSNs never decrease along its partition lineage. That holds
 * for Cosmos DB and `MemorySource`: a document stays in the partition that owns its partition key, split
 * children continue their parent's numbering, and a merged partition continues above its parents. It does
 * not hold for a key that gathers documents of different partition keys; use `'exactlyOnce'` for those.
 *
 * Exactly-once mode keeps its LSN mark per partition, together with the partition's key range. A partition
 * the view holds no mark for yet (a split child, the per-parent lease of a merge) inherits the marks of the
 * partitions before it in its range: for each part of its range the highest mark of a stored range covering
 * that part, and the lowest of those over its whole range (a merged range takes the lowest of its parents'
 * marks). That is right because LSNs never decrease along a range's lineage, and it needs the range on each
 * commit ({@link ViewCommit.range}, which `materializeToView` takes from the batch). Without a stored range
 * covering all of it, a partition starts without a mark.
 *
 * Fencing holds in both modes, by key range along the lineage: every write raises the partition's stored
 * epoch to the write's, also when it changes nothing (a replay, an empty batch), and is refused with
 * `ViewFencedError` when its epoch is below its partition's stored epoch or at or below the epoch any other
 * partition wrote over part of its key range (a split child, a merged range: their epochs lie above their
 * parents', so the late write of a deposed parent's owner is refused once a child wrote).
 *
 * @example
 * ```ts
 * materializeToView(view, { project, mode: 'guarded' });                            // one row per document
 * materializeToView(totals, { project, key: (c) => c.document!.customer, mode: 'exactlyOnce' }); // latest order per customer
 * ```
 */
export type ViewMode = 'guarded' | 'exactlyOnce';

/** One change as a view store sees it: a row to write (or `undefined` to delete) under a key. */
export interface ViewChange<R> {
  /** Row key (usually the document id). */
  readonly key: string;
  /** The row to write, or `undefined` to remove the key from the view. */
  readonly row: R | undefined;
  /** LSN of the change, within its partition. */
  readonly lsn: number;
  /** Commit time of the change, in milliseconds since the epoch. */
  readonly timestampMs: number;
  /** Lease token of the partition the change came from. */
  readonly partition: string;
}

/** Where one partition stands after a write: its resume position and the lease epoch it was read under. */
export interface ViewCommit {
  /** Lease token of the partition. */
  readonly partition: string;
  /** Lease epoch the batches were read under (fencing token). */
  readonly epoch: number;
  /** Position to resume the partition after this write. */
  readonly position: Position;
  /**
   * LSN of the last change read for this partition (before any filtering: a batch's `readLsn`), if any was.
   * A commit at or below the stored LSN is a replay: it raises the epoch but keeps the stored position.
   */
  readonly lsn: number | undefined;
  /**
   * Key range of the partition's lease: the write is fenced by it (refused when another partition wrote a
   * higher epoch over part of it) and stored with the partition, and a split or merge child inherits the
   * exactly-once marks over it. A commit without a range is fenced by the range stored with its partition,
   * or by its partition id alone when none is.
   */
  readonly range?: FeedRange;
}

/** What one transaction writes: changes in partition order and the partitions they came from. */
export interface ViewWrite<R> {
  /** Guard policy; see {@link ViewMode}. */
  readonly mode: ViewMode;
  /** The changes, each partition's in feed order. */
  readonly changes: readonly ViewChange<R>[];
  /** One entry per partition present in the write (also for partitions whose batches were empty). */
  readonly partitions: readonly ViewCommit[];
}

/** What a write did. `skipped` counts changes that changed nothing (older, replayed or superseded). */
export interface ViewWriteResult {
  /** Rows inserted or updated. */
  readonly written: number;
  /** Rows removed. */
  readonly deleted: number;
  /** Changes that did not change the view. */
  readonly skipped: number;
}

/**
 * Options of one {@link ViewStore.write}.
 *
 * @example
 * ```ts
 * const deposed = new AbortController();
 * await view.write(write, { signal: deposed.signal }); // a store that can cancel stops when it aborts
 * ```
 */
export interface ViewWriteOptions {
  /**
   * Aborted when nobody waits for the write any more: every lease whose batches it carries was lost, released
   * or handed over while it was in flight (`materializeToView` stops waiting then, and its write slot goes to
   * live partitions). A store that can cancel a write in flight may stop it and reject (with the signal's
   * reason); one that cannot lets it run: the epoch fence refuses it once the new owner wrote, and what it
   * writes before that is harmless (its batches are never checkpointed, the new owner reads them again).
   * Default: none.
   */
  readonly signal?: AbortSignal;
}

/** A row as stored in a view, with the version of the change that wrote it. */
export interface ViewRow<R> {
  /** The row's key (from `materializeToView`'s `key`, the document id by default). */
  readonly key: string;
  /** The row as `project` made it. */
  readonly row: R;
  /** LSN of the change that wrote the row. */
  readonly lsn: number;
  /** When that change was written to the source, in ms since the epoch. */
  readonly timestampMs: number;
  /** Lease token of the partition whose change wrote the row. */
  readonly partition: string;
}

/** What a view store remembers about one partition. */
export interface ViewPartitionState {
  /** Position to resume the partition from (everything before it is in the view). */
  readonly position: Position;
  /** Highest lease epoch seen for the partition; writes over its range under a lower epoch are rejected. */
  readonly epoch: number;
  /** Highest LSN applied from the partition (or inherited from its parents), if any. */
  readonly lsn: number | undefined;
  /** Key range of the partition, when its writes gave one. */
  readonly range?: FeedRange;
}

/**
 * A materialized view: a keyed set of rows written in transactions, with per-row versions, tombstones,
 * per-partition positions and lease-epoch fencing. Implementations: {@link MemoryViewStore},
 * `PostgresViewStore` (pg), `PGliteViewStore` (embedded PostgreSQL).
 *
 * @example
 * ```ts
 * import { MemoryViewStore } from 'rxfeed';
 * const view = new MemoryViewStore<{ total: number }>();
 * await view.write({ mode: 'guarded', changes: [{ key: 'o1', row: { total: 5 }, lsn: 7, timestampMs: Date.now(), partition: '0' }],
 *   partitions: [{ partition: '0', epoch: 1, position: 'p7', lsn: 7 }] });
 * console.log(await view.get('o1'));
 * ```
 */
export interface ViewStore<R> {
  /** Human-readable name for logs (never contains credentials). */
  readonly description: string;
  /**
   * Applies a write atomically: all of it or nothing. What a store must do, in one atomic step per write:
   *
   * 1. Fence by key range. For each commit, let its range be `commit.range` (or the range stored with its
   *    partition). Reject the whole write with `ViewFencedError(commit.partition, commit.epoch, highest)` (a
   *    `LeaseLostError`), writing nothing, when `commit.epoch` is below `highest`: the greater of the epoch
   *    stored for its partition and the epochs stored for every other partition whose range overlaps its
   *    range. The partition's own epoch passes when equal; another partition's epoch over part of the range
   *    does not (a gone parent's lease is never taken again once its children are created, one epoch above
   *    it, so a tie is a lineage gone wrong, e.g. leases written without that rule). Every write is checked, in
   *    both modes, whether it has changes or not.
   * 2. Apply the changes by {@link ViewMode}: guarded rows by LSN per key (with tombstones); exactly-once
   *    rows skipping changes at or below the partition's LSN mark. A partition without a mark of its own
   *    takes the one it inherits over `commit.range` from the other partitions' ranges and marks.
   * 3. Store each commit: epoch raised to `max(stored, commit.epoch)` (also for a write that changes
   *    nothing), range set when given, LSN mark raised, position moved unless the commit is a replay (its
   *    `lsn` at or below the mark).
   *
   * Checking and storing must be one step against concurrent writers of any overlapping range, on any
   * host: a check must not pass on a state that another write changed before this one applies. Two writes
   * of one partition may be in flight at once, also from one host: a write whose leases all ended is not
   * waited for (see {@link ViewWriteOptions.signal}), and the partition's next owner writes meanwhile.
   */
  write(write: ViewWrite<R>, options?: ViewWriteOptions): Promise<ViewWriteResult>;
  /** The row under `key`, or `undefined`. */
  get(key: string): Promise<ViewRow<R> | undefined>;
  /** Every row, ordered by key. Meant for tests, checks and small views. */
  rows(): Promise<ViewRow<R>[]>;
  /** Each partition's resume position, epoch, LSN and range, as committed with the rows. */
  positions(): Promise<ReadonlyMap<string, ViewPartitionState>>;
  /**
   * Removes tombstones of deletes committed before `beforeTimestampMs` (ms since the epoch). Only safe for
   * times no replay can reach back to (older than your oldest checkpoint). Resolves to how many were removed.
   */
  pruneTombstones(beforeTimestampMs: number): Promise<number>;
  /**
   * Forgets every partition's position, epoch, range and LSN mark (rows and tombstones stay): the range
   * fence starts over. Needed after the lease container was recreated: new leases start again at low
   * epochs, which the view would otherwise reject as deposed owners (of the partition, or of any range
   * overlapping theirs).
   */
  clearPositions(): Promise<void>;
  /** Releases what the store opened itself (never a pool, client or database you passed in). */
  close(): Promise<void>;
}
