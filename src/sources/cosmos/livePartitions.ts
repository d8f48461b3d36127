import type { Partition } from '../../core/Partition.js';

/** One range of a container's partition key range listing: the parts of the SDK's `PartitionKeyRange` used here. @internal */
export interface ListedRange {
  readonly id: string;
  readonly minInclusive: string;
  readonly maxExclusive: string;
  /** The ranges this one was split or merged from. */
  readonly parents?: readonly string[];
}

/** The range ids a listing names as parents: the ranges that split or merged into listed ones, gone now. @internal */
export function parentsOf(ranges: readonly ListedRange[]): Set<string> {
  return new Set(ranges.flatMap((r) => r.parents ?? []));
}

/**
 * The partitions of a listing, in key order (`id` = range id), each with the parents it names. A gone parent
 * listed next to its children would overlap them: only the live ranges are kept.
 *
 * @param parents - the listing's {@link parentsOf}, when the caller has it already.
 * @internal
 */
export function livePartitions(ranges: readonly ListedRange[], parents: ReadonlySet<string> = parentsOf(ranges)): Partition[] {
  return ranges
    .filter((r) => !parents.has(r.id))
    .sort((a, b) => (a.minInclusive < b.minInclusive ? -1 : a.minInclusive > b.minInclusive ? 1 : 0))
    .map((r) => ({
      id: r.id,
      range: { minInclusive: r.minInclusive, maxExclusive: r.maxExclusive },
      ...(r.parents && r.parents.length > 0 ? { parents: [...r.parents] } : {}),
    }));
}
