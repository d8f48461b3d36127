import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';
import { compareLetters, type DeadLetterQuery, type DeadLetterStore, queryLimit } from './DeadLetterSink.js';
import { type FenceEntry, raiseFence } from './fence.js';

/**
 * A {@link DeadLetterStore} in memory, for tests and examples: fenced by epoch per key range like the durable
 * stores, and lost with the process.
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
  readonly description = 'memory dead letters';
  readonly #letters = new Map<string, DeadLetter<T>>();
  #fences: FenceEntry[] = [];

  async write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void> {
    this.#fences = raiseFence(this.#fences, writer);
    for (const letter of letters) if (!this.#letters.has(letter.id)) this.#letters.set(letter.id, letter);
  }

  async list(query?: DeadLetterQuery): Promise<DeadLetter<T>[]> {
    const limit = queryLimit(query);
    return [...this.#letters.values()]
      .filter((l) => query?.leaseToken === undefined || l.leaseToken === query.leaseToken)
      .sort(compareLetters)
      .slice(0, limit);
  }

  async remove(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.#letters.delete(id);
  }

  /** Number of letters held. */
  get size(): number {
    return this.#letters.size;
  }
}
