import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';

/**
 * Where changes go that user code failed on after every retry. A write that rejects holds the partition's
 * checkpoint (the change is not passed) and is retried until it succeeds, so nothing is lost while the sink
 * is down.
 *
 * @example
 * ```ts
 * const sink: DeadLetterSink = { description: 'log', write: async (letters) => console.error(letters) };
 * ```
 */
export interface DeadLetterSink<T = unknown> {
  /** What the sink writes to, for logs and events. Never a secret. */
  readonly description: string;
  /**
   * Stores `letters` (idempotent by `id`: writing a letter again keeps one). Stores that keep epochs refuse a
   * writer whose epoch is below one seen for an overlapping range with a `DeadLetterFencedError`.
   */
  write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void>;
}

/** Which dead letters to list. */
export interface DeadLetterQuery {
  /** Only letters of this lease token. Default: all. */
  readonly leaseToken?: string;
  /** At most this many, oldest first. Default `100`. */
  readonly limit?: number;
}

/**
 * A {@link DeadLetterSink} that can also list and remove its letters, so they can be looked at and re-driven
 * ({@link redriveDeadLetters}).
 *
 * @example
 * ```ts
 * const oldest = await store.list({ limit: 10 });
 * await store.remove(oldest.map((l) => l.id));
 * ```
 */
export interface DeadLetterStore<T = unknown> extends DeadLetterSink<T> {
  /** Letters in the order they were dead-lettered (then by lease token and LSN). */
  list(query?: DeadLetterQuery): Promise<DeadLetter<T>[]>;
  /** Removes letters by id; unknown ids are ignored. */
  remove(ids: readonly string[]): Promise<void>;
}

/** Orders letters oldest first, then by lease token and LSN. @internal */
export function compareLetters(a: DeadLetter<unknown>, b: DeadLetter<unknown>): number {
  return a.deadLetteredAtMs - b.deadLetteredAtMs || (a.leaseToken < b.leaseToken ? -1 : a.leaseToken > b.leaseToken ? 1 : 0) || a.lsn - b.lsn;
}

/** Validates a query and fills in its defaults. @internal */
export function queryLimit(query: DeadLetterQuery | undefined): number {
  const limit = query?.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${String(limit)}`);
  return limit;
}

/**
 * The letters a list asks for, out of all a store holds (in any order): those of `leaseToken` (all when
 * `undefined`), oldest first (see {@link compareLetters}), at most `limit` (from {@link queryLimit}). @internal
 */
export function selectLetters<T>(letters: readonly DeadLetter<T>[], leaseToken: string | undefined, limit: number): DeadLetter<T>[] {
  return letters
    .filter((l) => leaseToken === undefined || l.leaseToken === leaseToken)
    .sort(compareLetters)
    .slice(0, limit);
}
