import type { FeedRange } from '../core/Partition.js';
import { inheritedLsn, type RangeMark } from '../sinks/internal/planWrite.js';

/**
 * @internal The LSN `marks` give a partition: its own, or, for a partition they hold no mark for (a split child, a
 * merged range), the one inherited from the marks of the partitions before it over its key range (the same rule a
 * view store's exactly-once marks follow: LSNs never go back along a lineage). `undefined` when neither applies.
 */
export function markOf(
  token: string,
  marks: ReadonlyMap<string, number>,
  ranges: ReadonlyMap<string, FeedRange>,
): number | undefined {
  const own = marks.get(token);
  if (own !== undefined) return own;
  const range = ranges.get(token);
  if (!range || marks.size === 0) return undefined;
  const known: RangeMark[] = [];
  for (const [other, lsn] of marks) {
    const r = ranges.get(other);
    if (r) known.push({ range: r, lsn });
  }
  return inheritedLsn(range, known);
}
