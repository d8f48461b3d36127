import { abortError, onAbort } from '../../internal/abortWatch.js';

/** A read waiting for a slot: resolved with `true` once it holds one, `false` when its signal aborted first. */
interface Waiter {
  readonly resolve: (granted: boolean) => void;
  /** Cleared once the waiter is settled (granted or aborted), so a queue entry left behind is skipped. */
  pending: boolean;
  stopWatching: () => void;
}

/** A first-in first-out queue of waiters (a head index instead of `shift`, which copies the array). */
class WaiterQueue {
  #items: (Waiter | undefined)[] = [];
  #head = 0;

  push(waiter: Waiter): void {
    this.#items.push(waiter);
  }

  /** The oldest waiter still pending, taken out of the queue; `undefined` when none is left. */
  take(): Waiter | undefined {
    while (this.#head < this.#items.length) {
      const waiter = this.#items[this.#head];
      this.#items[this.#head++] = undefined;
      if (waiter?.pending) return waiter;
    }
    if (this.#head > 0) {
      this.#items = [];
      this.#head = 0;
    }
    return undefined;
  }
}

/**
 * How many change feed reads one processor has in flight at once, over all its partitions: at most `limit`.
 *
 * Why: a host owning thousands of quiet partitions polls them in bunches (leases are acquired in rounds, so
 * their readers start, and keep polling, together). Without a bound, a bunch opens as many connections as it
 * has polls, far more than the HTTP agent keeps alive between requests, so every round closes and reopens
 * most of them. Held to a bound below the agent's kept-alive sockets, the same polls reuse the same
 * connections; the polls that waited for a slot also start their next wait later, so bunches thin out.
 *
 * Priority: a read that continues a partition with changes to read (`urgent`) is granted the next free slot
 * before any waiting poll of a quiet partition, so a busy partition never queues behind idle polls (at
 * worst it waits for one read in flight to finish, while every slot is taken).
 *
 * A slot is held only while the read is in flight; `release()` must follow every grant, whatever the read's
 * outcome.
 *
 * @example
 * ```ts
 * const limiter = new ReadLimiter(64);
 * if (limiter.tryAcquire() || (await limiter.acquire(false, signal))) {
 *   try { await source.read(request); } finally { limiter.release(); }
 * }
 * ```
 * @internal
 */
export class ReadLimiter {
  /** The most reads in flight at once. */
  readonly limit: number;
  #inFlight = 0;
  readonly #urgent = new WaiterQueue();
  readonly #polls = new WaiterQueue();
  /** Waiters queued and still pending. */
  #waiting = 0;

  /** @param limit - the most reads in flight at once (an integer ≥ 1). */
  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`ReadLimiter: limit must be an integer ≥ 1, got ${limit}`);
    this.limit = limit;
  }

  /** Reads in flight now (slots held). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Reads waiting for a slot now. */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * Takes a slot at once if one is free and no read waits for one (those go first). Synchronous: a read that
   * finds a slot costs no promise and no tick.
   */
  tryAcquire(): boolean {
    if (this.#inFlight >= this.limit || this.#waiting > 0) return false;
    this.#inFlight++;
    return true;
  }

  /**
   * Waits for a slot: resolves `true` once this read holds one (call `release()` after it), `false` if
   * `signal` aborted first (then it holds none). `urgent`: the read continues a partition with changes left
   * to read, and goes before every waiting poll.
   */
  acquire(urgent: boolean, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.tryAcquire()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = { resolve, pending: true, stopWatching: () => undefined };
      waiter.stopWatching = onAbort(signal, () => {
        if (!waiter.pending) return;
        waiter.pending = false;
        this.#waiting--;
        resolve(false);
      });
      this.#waiting++;
      (urgent ? this.#urgent : this.#polls).push(waiter);
    });
  }

  /**
   * Runs `read` holding a slot (waited for as a poll, see {@link ReadLimiter.acquire}), and gives it back
   * when `read` settles. Rejects with the abort reason, without calling `read`, if `signal` aborts first.
   */
  async run<R>(signal: AbortSignal, read: () => Promise<R>): Promise<R> {
    if (!this.tryAcquire() && !(await this.acquire(false, signal))) throw abortError(signal);
    try {
      return await read();
    } finally {
      this.release();
    }
  }

  /** Gives a slot back: the next urgent read waiting takes it, else the next poll, else it is free. */
  release(): void {
    if (this.#inFlight <= 0) throw new Error('ReadLimiter: release() without a slot held');
    const next = this.#waiting > 0 ? (this.#urgent.take() ?? this.#polls.take()) : undefined;
    if (!next) {
      this.#inFlight--;
      return;
    }
    // The slot passes straight to the waiter: the count of reads in flight stays the same.
    next.pending = false;
    this.#waiting--;
    next.stopWatching();
    next.resolve(true);
  }
}
