/**
 * An opaque, serialisable position in one partition's change feed: "everything up to here is read".
 * Sources create positions; leases store them as `ContinuationToken`. Never parse one.
 */
export type Position = string;

/** A range of effective partition key values, `[minInclusive, maxExclusive)`, in upper-case hex. */
export interface FeedRange {
  /** The lowest effective partition key of the range (hex; `''` is the start of the key space). */
  readonly minInclusive: string;
  /** The effective partition key just past the range (hex; `'FF'` is the end of the key space). */
  readonly maxExclusive: string;
}

/**
 * One partition of a change feed (a Cosmos DB partition key range). Its `id` is the lease token of the
 * lease that owns it.
 */
export interface Partition {
  /** Stable id; used as the lease token. */
  readonly id: string;
  /** The key range this partition covers. */
  readonly range: FeedRange;
  /** Ids of the partitions this one was split or merged from, if the source knows them. */
  readonly parents?: readonly string[];
}

/** Which changes a feed delivers. */
export type FeedMode = 'latestVersion' | 'allVersionsAndDeletes';

/**
 * Where a partition starts reading when its lease has no checkpoint yet. A lease's stored position always
 * wins over this.
 *
 * - `'beginning'`: every change still in the log;
 * - `'now'`: only changes made after the processor started: pinned per partition when its lease is created
 *   (to the run's start time where the source can start from a time, else to the partition's position then,
 *   before any lease is read), never at a later first read;
 * - a `Date`: changes made at or after that instant (UTC);
 * - `{ position }`: an explicit position, such as one saved elsewhere.
 */
export type StartFrom = 'beginning' | 'now' | Date | { readonly position: Position };

/** @internal True when two ranges overlap. */
export function rangesOverlap(a: FeedRange, b: FeedRange): boolean {
  return a.minInclusive < b.maxExclusive && b.minInclusive < a.maxExclusive;
}
