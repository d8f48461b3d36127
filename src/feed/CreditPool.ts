/**
 * One processor's read budget: changes read but not yet acknowledged by `checkpointEvery`, at most
 * `total`, shared fairly among the partitions being read.
 *
 * The sum never exceeds `total`, so memory stays bounded however many partitions a host owns. Sharing is
 * work-conserving: while no other partition waits for credit, one partition may go beyond its fair share
 * (`total / active partitions`), so a single busy partition can fill a buffer larger than its share; but it
 * always leaves every other partition room for one minimal read ({@link CreditPool.minRead}), so a hog whose
 * sink is slow cannot starve the rest. Once another partition waits, each may hold at most its fair share.
 * Credit taken by a partition that stopped reading still counts until it is acknowledged.
 *
 * @internal
 */
export class CreditPool {
  readonly total: number;
  /** When any partition last acknowledged a batch (scheduler time); stall detection reads it. */
  lastAckAt = Number.NEGATIVE_INFINITY;
  #inFlight = 0;
  #active = 0;
  #waiting = 0;
  readonly #waiters = new Set<() => void>();

  /** Largest read a partition makes (`maxItemCount`). */
  readonly pageSize: number;

  constructor(total: number, pageSize = total) {
    this.total = total;
    this.pageSize = pageSize;
  }

  /**
   * The smallest read worth making: half a page or half a share. Waiting for that much credit avoids
   * trickles of tiny reads while a slow sink returns credit one change at a time.
   */
  get minRead(): number {
    return Math.max(1, Math.floor(Math.min(this.pageSize, this.share) / 2));
  }

  /** Partitions being read. */
  get active(): number {
    return this.#active;
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

  /** An account closed: one partition fewer shares the budget. */
  accountClosed(): void {
    this.#active--;
    this.#notify();
  }

  /** `n` changes were taken by an account. */
  taken(n: number): void {
    this.#inFlight += n;
  }

  /** `n` changes were returned by an account. */
  returned(n: number): void {
    this.#inFlight -= n;
    if (n > 0) this.#notify();
  }

  /** Changes the number of accounts waiting for credit by `delta`; returns the new number. */
  waitingAccounts(delta: number): number {
    this.#waiting += delta;
    return this.#waiting;
  }

  /** Credit not taken by any account. */
  get free(): number {
    return this.total - this.#inFlight;
  }

  /** Calls `fn` whenever credit may have become available, until the returned function is called. */
  onChange(fn: () => void): () => void {
    this.#waiters.add(fn);
    return () => this.#waiters.delete(fn);
  }

  #notify(): void {
    if (this.#waiters.size > 0) for (const fn of [...this.#waiters]) fn();
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
  #waiting = false;

  constructor(pool: CreditPool) {
    this.#pool = pool;
  }

  /** Changes this partition holds (read, not acknowledged). */
  get held(): number {
    return this.#held;
  }

  /** How many changes this partition may read now. */
  get available(): number {
    const pool = this.#pool;
    const free = pool.free;
    const othersWaiting = pool.waitingAccounts(0) - (this.#waiting ? 1 : 0);
    if (othersWaiting > 0) return Math.max(0, Math.min(pool.share - this.#held, free));
    const others = pool.active - (this.#open ? 1 : 0);
    const cap = Math.max(pool.share, pool.total - others * pool.minRead);
    return Math.max(0, Math.min(cap - this.#held, free));
  }

  /** Marks this partition as waiting for credit (others are then held to their fair share). */
  setWaiting(waiting: boolean): void {
    if (waiting === this.#waiting) return;
    this.#waiting = waiting;
    this.#pool.waitingAccounts(waiting ? 1 : -1);
  }

  /** The fair share of one partition now. */
  get share(): number {
    return this.#pool.share;
  }

  take(n: number): void {
    this.#held += n;
    this.#pool.taken(n);
  }

  release(n: number): void {
    const freed = Math.min(n, this.#held);
    this.#held -= freed;
    this.#pool.returned(freed);
  }

  /** Stops counting this partition in the fair share (credit it holds stays taken until released). */
  close(): void {
    this.setWaiting(false);
    if (!this.#open) return;
    this.#open = false;
    this.#pool.accountClosed();
  }

  onChange(fn: () => void): () => void {
    return this.#pool.onChange(fn);
  }
}
