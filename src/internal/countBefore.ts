/**
 * @internal How many of `items` lie before a point: `before` holds for a first run of them and for none after
 * (items sorted by what it compares), so this is the index of the first it does not hold for. A binary search.
 *
 * @example
 * ```ts
 * countBefore([1, 3, 3, 7], (n) => n <= 3); // 3: the index of the first entry after 3
 * ```
 */
export function countBefore<E>(items: readonly E[], before: (item: E) => boolean): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(items[mid]!)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
