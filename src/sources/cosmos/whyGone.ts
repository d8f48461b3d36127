import type { FeedRange, Partition } from '../../core/Partition.js';
import type { RangeContinuation } from './continuation.js';

/**
 * True when a partition stands for a range of effective partition keys rather than for one physical
 * partition key range: the lease token of such a lease is `<minInclusive>-<maxExclusive>` (what the lease
 * coordinator, and the .NET processor for its `FeedRangeEpk` leases, give the part of a merged range that an
 * older lease covered). Physical range ids are plain numbers, so the two never collide.
 *
 * @internal
 */
export function isEpkPartition(partition: Partition): boolean {
  return partition.id === `${partition.range.minInclusive}-${partition.range.maxExclusive}`;
}

/** True when a range (ours or one of the SDK's) has exactly these bounds. @internal */
export function sameRange(a: FeedRange, b: { minInclusive: string; maxExclusive: string }): boolean {
  return a.minInclusive === b.minInclusive && a.maxExclusive === b.maxExclusive;
}

/**
 * Why a page answered for `partition` shows that the partition is gone (split or merged), or `undefined` when
 * the page belongs to it and reading can go on.
 *
 * - The SDK's continuation must still hold exactly one entry for exactly the partition's range: more entries,
 *   or another range, mean the SDK followed a split of the range and now reads its children.
 * - A partition that is one physical range (`"3"`) must be answered by that range: another range id means it
 *   was merged (the SDK reads it as a sub-range of the merged range) or split.
 * - A partition that is an EPK range ({@link isEpkPartition}) is a sub-range of whatever physical range holds
 *   it now; which one answers does not matter, as long as one range still covers it whole.
 *
 * @param entries - the continuation entries of the SDK's response token.
 * @param answeredBy - the range id at the front of the response's session token, when known.
 * @internal
 */
export function whyGone(
  partition: Partition,
  entries: readonly RangeContinuation[],
  answeredBy: string | undefined,
): string | undefined {
  if (entries.length !== 1) return `the continuation now covers ${entries.length} ranges`;
  const only = entries[0]!;
  if (!sameRange(partition.range, only)) return `the continuation now covers [${only.minInclusive}, ${only.maxExclusive})`;
  if (answeredBy !== undefined && answeredBy !== partition.id && !isEpkPartition(partition)) {
    return `range ${answeredBy} answered for it`;
  }
  return undefined;
}
