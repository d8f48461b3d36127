import type { DeadLetter } from './DeadLetter.js';
import type { DeadLetterStore } from './DeadLetterSink.js';

/** Options of {@link redriveDeadLetters}. */
export interface RedriveOptions<T> {
  /** Where the letters are. */
  readonly store: DeadLetterStore<T>;
  /** Processes one letter again (after the cause was fixed). Resolves: the letter is removed; rejects: it stays. */
  readonly handler: (letter: DeadLetter<T>) => Promise<void> | void;
  /** Only letters of this lease token. Default: all. */
  readonly leaseToken?: string;
  /** At most this many letters. Default `100`. */
  readonly limit?: number;
}

/** What {@link redriveDeadLetters} did. */
export interface RedriveResult {
  /** Ids of the letters processed and removed. */
  readonly redriven: readonly string[];
  /** Letters whose handler failed again; they stay in the store. */
  readonly failed: readonly { readonly id: string; readonly error: unknown }[];
}

/**
 * Processes dead letters again, oldest first, one at a time, and removes each one its handler succeeds on.
 *
 * @example
 * ```ts
 * import { redriveDeadLetters } from 'rxfeed';
 * const { redriven, failed } = await redriveDeadLetters({ store: deadLetters, handler: (l) => upsertOrder(l.document) });
 * ```
 */
export async function redriveDeadLetters<T>(options: RedriveOptions<T>): Promise<RedriveResult> {
  const letters = await options.store.list({
    ...(options.leaseToken !== undefined ? { leaseToken: options.leaseToken } : {}),
    ...(options.limit !== undefined ? { limit: options.limit } : {}),
  });
  const redriven: string[] = [];
  const failed: { id: string; error: unknown }[] = [];
  for (const letter of letters) {
    try {
      await options.handler(letter);
      await options.store.remove([letter.id]);
      redriven.push(letter.id);
    } catch (error) {
      failed.push({ id: letter.id, error });
    }
  }
  return { redriven, failed };
}
