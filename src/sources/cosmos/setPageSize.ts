import type { ChangeFeedPullModelIterator } from '@azure/cosmos';

/**
 * Changes the page size of a live SDK iterator. The feed engine asks for as many changes as its read credit
 * allows, which varies from read to read, and `@azure/cosmos` fixes the page size when the iterator is built;
 * rebuilding costs an extra container read per poll. In 4.x the options object the iterator reads on every
 * request sits at `iterator.iterator.changeFeedOptions`; when that shape is not found (another SDK version)
 * this returns false and the caller rebuilds instead, which is slower but equally correct.
 *
 * @internal
 */
export function setPageSize(iterator: ChangeFeedPullModelIterator<unknown>, maxItemCount: number): boolean {
  const inner = (iterator as unknown as { iterator?: { changeFeedOptions?: { maxItemCount?: unknown } } }).iterator;
  const options = inner?.changeFeedOptions;
  if (!options || typeof options !== 'object' || typeof options.maxItemCount !== 'number') return false;
  options.maxItemCount = maxItemCount;
  return true;
}
