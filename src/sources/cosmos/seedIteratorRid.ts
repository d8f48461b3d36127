import type { ChangeFeedPullModelIterator } from '@azure/cosmos';

/** The parts of `@azure/cosmos` 4.x's change feed iterator (the builder and the range iterator it builds) used here. */
interface BuilderShape {
  iterator?: RangeIteratorShape;
  initializeIterator?: () => Promise<void>;
}

interface RangeIteratorShape {
  isInstantiated?: unknown;
  rId?: unknown;
  setIteratorRid?: unknown;
}

/**
 * Gives a new SDK change feed iterator the container's resource id, so its first `readNext` does not read the
 * container first (one round trip before every new iterator's first page: at start-up, on the critical path
 * of every partition's first read).
 *
 * The SDK reads the container to check that the continuation token it was given belongs to the container as
 * it is now (not to one deleted and created again under the same name). `rid` must come from a container
 * read of this source recent enough to stand for that check (the caller bounds its age); the check itself is
 * left to the SDK, against that rid. In 4.x the iterator is built lazily by the object `getChangeFeedIterator`
 * returns (`initializeIterator`, no request for a continuation start) and reads the rid in `setIteratorRid`;
 * when that shape is not found (another SDK version) nothing is changed and the SDK reads the container
 * itself, as before.
 *
 * @internal
 */
export async function seedIteratorRid(iterator: ChangeFeedPullModelIterator<unknown>, rid: string): Promise<boolean> {
  const builder = iterator as unknown as BuilderShape;
  if (typeof builder.initializeIterator !== 'function') return false;
  await builder.initializeIterator();
  const inner = builder.iterator;
  if (!inner || typeof inner.setIteratorRid !== 'function' || inner.isInstantiated !== false) return false;
  // An own property in place of the prototype's method: this iterator only, once (its first readNext).
  inner.setIteratorRid = () => {
    inner.rId = rid;
    return Promise.resolve();
  };
  return true;
}
