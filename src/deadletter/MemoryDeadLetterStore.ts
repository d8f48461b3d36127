import type { FeedRange } from '../core/Partition.js';
import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';
import { type DeadLetterQuery, type DeadLetterStore, queryLimit, selectLetters } from './DeadLetterSink.js';
import { type FenceEntry, raiseFence, sameChange, writerRange } from './fence.js';

/**
 * A {@link DeadLetterStore} in memory, for tests and examples: fenced by epoch per key range like the durable
 * stores (the fence and the letters in one step), one letter per change along a lineage, and lost with the
 * process.
 *
 * @example
 * ```ts
 * import { MemoryDeadLetterStore } from 'rxfeed';
 * const deadLetters = new MemoryDeadLetterStore();
 * // ... eachChange(work, { retry: { attempts: 3 }, deadLetter: deadLetters })
 * console.log(await deadLetters.list());
 * ```
 */
export class MemoryDeadLetterStore<T = unknown> implements DeadLetterStore<T> {
  /** {@inheritDoc DeadLetterSink.description} */
  readonly description = 'memory dead letters';
  /** Each letter with the range of the writer that stored it. */
  readonly #letters = new Map<string, { readonly letter: DeadLetter<T>; readonly range: FeedRange }>();
  #fences: FenceEntry[] = [];

  /** {@inheritDoc DeadLetterSink.write} */
  async write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void> {
    // Synchronous from here: the fence is raised and the letters stored in one step, or neither.
    this.#fences = raiseFence(this.#fences, writer);
    const range = writerRange(writer);
    for (const letter of letters) {
      if (this.#letters.has(letter.id)) continue;
      if ([...this.#letters.values()].some((stored) => sameChange(stored.letter, stored.range, letter, range))) continue;
      this.#letters.set(letter.id, { letter, range });
    }
  }

  /** {@inheritDoc DeadLetterStore.list} */
  async list(query?: DeadLetterQuery): Promise<DeadLetter<T>[]> {
    const limit = queryLimit(query);
    return selectLetters([...this.#letters.values()].map((stored) => stored.letter), query?.leaseToken, limit);
  }

  /** {@inheritDoc DeadLetterStore.remove} */
  async remove(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.#letters.delete(id);
  }

  /** Number of letters held. */
  get size(): number {
    return this.#letters.size;
  }
}
