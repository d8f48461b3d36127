/**
 * One processor's read budget: changes read but not yet acknowledged by `checkpointEvery`, at most
 * `total`, shared fairly among the partitions being read.
 *
 * A partition may hold at most its fair share (`total / active partitions`), so one busy partition cannot
 * starve the others, and the sum never exceeds `total`, so memory stays bounded however many partitions a
 * host owns. Credit taken by a partition that stopped reading still counts until it is acknowledged.
 *
 * @internal
 */
export class CreditPool {
  readonly total: number;
  #inFlight = 0;
  #active = 0;
  readonly #waiters = new Set<() => void>();

  constructor(total: number) {
    this.total = total;
  }

  /** Changes read and not yet acknowledged, over all partitions. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The most one partition may hold now. */
  get share(): number {
    return Math.max(1, Math.floor(this.total / Math.max(1, this.#active)));
  }

  /** Opens an account for one partition reader. */
  open(): CreditAccount {
    this.#active++;
    this.#notify();
    return new CreditAccount(this);
  }

  /** @internal */
  _close(): void {
    this.#active--;
    this.#notify();
  }

  /** @internal */
  _take(n: number): void {
    this.#inFlight += n;
  }

  /** @internal */
  _release(n: number): void {
    this.#inFlight -= n;
    if (n > 0) this.#notify();
  }

  /** @internal */
  _free(): number {
    return this.total - this.#inFlight;
  }

  /** Calls `fn` whenever credit may have become available, until the returned function is called. */
  onChange(fn: () => void): () => void {
    this.#waiters.add(fn);
    return () => this.#waiters.delete(fn);
  }

  #notify(): void {
    for (const fn of [...this.#waiters]) fn();
  }
}

/**
 * One partition's view of the {@link CreditPool}.
 *
 * @internal
 */
export class CreditAccount {
  readonly #pool: CreditPool;
  #held = 0;
  #open = true;

  constructor(pool: CreditPool) {
    this.#pool = pool;
  }

  /** Changes this partition holds (read, not acknowledged). */
  get held(): number {
    return this.#held;
  }

  /** How many changes this partition may read now. */
  get available(): number {
    return Math.max(0, Math.min(this.#pool.share - this.#held, this.#pool._free()));
  }

  /** The fair share of one partition now. */
  get share(): number {
    return this.#pool.share;
  }

  take(n: number): void {
    this.#held += n;
    this.#pool._take(n);
  }

  release(n: number): void {
    const freed = Math.min(n, this.#held);
    this.#held -= freed;
    this.#pool._release(freed);
  }

  /** Stops counting this partition in the fair share (credit it holds stays taken until released). */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#pool._close();
  }

  onChange(fn: () => void): () => void {
    return this.#pool.onChange(fn);
  }
}
