import { InvalidOptionsError } from '../../errors/index.js';

/**
 * Iterators kept for reuse at least (one per partition read recently); the bound grows with the number of
 * partitions the container was last listed with (see {@link IteratorCache.fitTo}).
 */
export const MIN_CACHED_ITERATORS = 1024;

/**
 * @internal The SDK iterators a `CosmosSource` keeps between reads, by partition id (an EPK-range partition's
 * id is `<min>-<max>`). Once there are more than its bound, the least recently used goes: that partition's
 * next read builds a new iterator from the position the read asks for, as after a failed read.
 */
export class IteratorCache<E extends { usedAt: number }> {
  readonly #entries = new Map<string, E>();
  /** Iterators remembered so far: the clock of `usedAt`. */
  #uses = 0;
  #bound = MIN_CACHED_ITERATORS;
  /** A bound set by {@link limitIteratorCache}: listings no longer change it. */
  #limit: number | undefined;
  #onEvict: ((partitionId: string) => void) | undefined;

  /** The kept iterator of a partition. */
  get(partitionId: string): E | undefined {
    return this.#entries.get(partitionId);
  }

  /** Forgets a partition's iterator if it is still `entry` (a failed or aborted read's iterator is in an unknown state). */
  drop(partitionId: string, entry: E): void {
    if (this.#entries.get(partitionId) === entry) this.#entries.delete(partitionId);
  }

  /**
   * Keeps `entry` as the partition's iterator, most recently used, and evicts the least recently used ones
   * while over the bound. Recency is a count on the entry, not the map's order: a read of a kept iterator
   * (every read of a busy partition) costs a lookup, not a delete and an insert.
   */
  remember(partitionId: string, entry: E): void {
    entry.usedAt = ++this.#uses;
    if (this.#entries.get(partitionId) === entry) return;
    this.#entries.set(partitionId, entry);
    while (this.#entries.size > (this.#limit ?? this.#bound)) {
      let oldest: string | undefined;
      let oldestAt = Infinity;
      for (const [k, e] of this.#entries) {
        if (e.usedAt < oldestAt) {
          oldest = k;
          oldestAt = e.usedAt;
        }
      }
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
      this.#onEvict?.(oldest);
    }
  }

  /**
   * Sizes the bound for a listing of `livePartitions` ranges: twice as many (one host may read every range, and
   * parts of merged ones), at least {@link MIN_CACHED_ITERATORS}, so a host reading every partition never
   * rebuilds them. Partitions whose leases moved to another host leave theirs behind until evicted.
   */
  fitTo(livePartitions: number): void {
    this.#bound = Math.max(MIN_CACHED_ITERATORS, 2 * livePartitions);
  }

  /** See {@link limitIteratorCache}. */
  limit(max: number, onEvict: ((partitionId: string) => void) | undefined): void {
    if (!Number.isInteger(max) || max < 1) throw new InvalidOptionsError('maxIterators', `expected an integer of at least 1, got ${String(max)}`);
    this.#limit = max;
    this.#onEvict = onEvict;
  }
}

const caches = new WeakMap<object, IteratorCache<{ usedAt: number }>>();

/** @internal Makes `cache` the one {@link limitIteratorCache} finds for `source` (called by its constructor). */
export function registerIteratorCache(source: object, cache: IteratorCache<{ usedAt: number }>): void {
  caches.set(source, cache);
}

/**
 * @internal For tests and the simulation, not a user option: makes a `CosmosSource` keep at most `max` SDK
 * iterators (a count, at least 1; listings no longer resize it), so that partitions evict each other's
 * iterators and rebuild them from their positions, as a host reading more than the bound's partitions would
 * (the default bound is twice the live partitions, at least {@link MIN_CACHED_ITERATORS}). `onEvict` is
 * called with the partition id of each iterator evicted. Throws an `InvalidOptionsError` for anything but a
 * `CosmosSource`, or a `max` that is not an integer of at least 1.
 *
 * @example
 * ```ts
 * const source = new CosmosSource(container);
 * limitIteratorCache(source, 1, (id) => evicted.push(id)); // every read of another partition evicts
 * ```
 */
export function limitIteratorCache(source: object, max: number, onEvict?: (partitionId: string) => void): void {
  const cache = caches.get(source);
  if (!cache) throw new InvalidOptionsError('source', 'expected a CosmosSource (no iterator cache to limit)');
  cache.limit(max, onEvict);
}
