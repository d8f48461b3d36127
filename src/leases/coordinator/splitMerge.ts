// Role: which leases replace a gone partition's (one per partition inside its range, an EPK lease for a part
// of a merged one), and whether they cover its range. Pure.
import type { FeedRange, Partition } from '../../core/Partition.js';
import { rangesOverlap } from '../../core/Partition.js';

/** @internal One lease that replaces (part of) a gone partition's lease. */
export interface ChildLease {
  readonly token: string;
  readonly range: FeedRange;
}

/**
 * The leases that replace a lease over `parentRange` whose partition is gone, given the partitions the
 * source lists now: one per partition inside the range (a split), or, for a partition that reaches beyond
 * it (a merge), an EPK lease for just the parent's part of it (as .NET does). Pure.
 *
 * Returns `undefined` when the source still serves the whole range under this very token: the partition
 * is not gone after all (e.g. the source's listing has not caught up yet), so there is nothing to replace.
 *
 * @internal
 */
export function childLeases(parentToken: string, parentRange: FeedRange, live: readonly Partition[]): readonly ChildLease[] | undefined {
  const children = live.filter((p) => rangesOverlap(p.range, parentRange)).map((p) => childOf(p, parentRange));
  if (children.length === 0 || (children.length === 1 && children[0]!.token === parentToken)) return undefined;
  return children;
}

function childOf(p: Partition, parent: FeedRange): ChildLease {
  const contained = p.range.minInclusive >= parent.minInclusive && p.range.maxExclusive <= parent.maxExclusive;
  if (contained) return { token: p.id, range: p.range };
  // A merge: keep reading only the parent's part of the merged partition, as an EPK lease.
  const min = p.range.minInclusive > parent.minInclusive ? p.range.minInclusive : parent.minInclusive;
  const max = p.range.maxExclusive <= parent.maxExclusive ? p.range.maxExclusive : parent.maxExclusive;
  return { token: `${min}-${max}`, range: { minInclusive: min, maxExclusive: max } };
}

/**
 * Whether `children` cover `parentRange` without a gap: a listing that misses a child for a moment (it lags
 * the split) would otherwise replace the parent by leases for part of its range, and the rest would never be
 * read again.
 *
 * @internal
 */
export function coversRange(children: readonly ChildLease[], parentRange: FeedRange): boolean {
  const sorted = [...children].sort((a, b) => (a.range.minInclusive < b.range.minInclusive ? -1 : 1));
  let reached = parentRange.minInclusive;
  for (const c of sorted) {
    if (c.range.minInclusive > reached) return false;
    if (c.range.maxExclusive > reached) reached = c.range.maxExclusive;
  }
  return reached >= parentRange.maxExclusive;
}

/**
 * The parts of `range` that none of `covers` overlaps, in order (all of `range` when none does). Pure.
 *
 * @internal
 */
export function uncoveredParts(range: FeedRange, covers: readonly FeedRange[]): FeedRange[] {
  const sorted = covers.filter((c) => rangesOverlap(c, range)).sort((a, b) => (a.minInclusive < b.minInclusive ? -1 : a.minInclusive > b.minInclusive ? 1 : 0));
  const parts: FeedRange[] = [];
  let from = range.minInclusive;
  for (const c of sorted) {
    if (c.minInclusive > from) parts.push({ minInclusive: from, maxExclusive: c.minInclusive });
    if (c.maxExclusive > from) from = c.maxExclusive;
  }
  if (from < range.maxExclusive) parts.push({ minInclusive: from, maxExclusive: range.maxExclusive });
  return parts;
}
