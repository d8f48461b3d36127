import { onAbort } from '../internal/abortWatch.js';

/** An account waiting for credit, in the order it began to wait. */
interface Waiter {
  readonly account: CreditAccount;
  readonly max: number;
  readonly grant: (n: number) => void;
}

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
 * Every partition that holds nothing is guaranteed one minimal read: credit is reserved for each of them
 * (`minRead` apiece), and reads by the others (taken up front, when they start) may only use what is free
 * beyond that reserve. So a poll of an idle partition never waits behind other partitions' reads in flight,
 * even when hundreds of idle polls, each asking for a full page and giving it all back at once, run together.
 * The reserve is kept when credit is taken, not when it comes back: a partition that returns its last few
 * changes counts as holding nothing again before the free credit covers its minimal read, and then waits
 * for that much to come back, like any other.
 *
 * Waiting partitions are served in the order they began to wait: when credit comes back, it is handed to
 * the first waiters that may read now (each gets what {@link CreditAccount.tryTake} would give it), and no
 * others are woken.
 *
 * A source never ends a page inside a transaction (changes of one LSN), so a page may hold more changes than
 * the read asked for. When the free credit cannot cover the excess, the reader drops the page and reads it
 * again once its account may take the whole page ({@link CreditAccount.need}): an empty account's guaranteed
 * read (and the room the others leave it) grows to that size. Only a transaction larger than the whole
 * budget is read beyond it.
 *
 * @internal
 */
export class CreditPool {
  readonly total: number;
  /** When any partition last acknowledged a batch (scheduler time); a stall report says whether others moved. */
  lastAckAt = Number.NEGATIVE_INFINITY;
  #inFlight = 0;
  #active = 0;
  /** Open accounts that hold nothing (each is guaranteed one minimal read). */
  #empty = 0;
  /** Open accounts whose next read must be larger than a minimal read (see {@link CreditAccount.need}). */
  readonly #needy = new Set<CreditAccount>();
  #waiting = 0;
  readonly #waiters = new Set<Waiter>();

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

  /** Open accounts holding nothing. */
  get empty(): number {
    return this.#empty;
  }

  /**
   * Credit kept free for the guaranteed read of every open account that holds nothing but `except`: a
   * minimal read each, or more for an account that needs more ({@link CreditAccount.need}).
   */
  reserveFor(except: CreditAccount | undefined): number {
    let reserve = this.minRead * (this.#empty - (except?.isEmpty ? 1 : 0));
    for (const account of this.#needy) if (account !== except && account.isEmpty) reserve += account.guaranteed - this.minRead;
    return reserve;
  }

  /** Records that `account` needs more (or, with `false`, no more) than a minimal read. */
  needing(account: CreditAccount, needs: boolean): void {
    if (needs) this.#needy.add(account);
    else this.#needy.delete(account);
  }

  /** Accounts waiting for credit. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Opens an account for one partition reader. */
  open(): CreditAccount {
    this.#active++;
    this.#empty++;
    this.#changed();
    return new CreditAccount(this);
  }

  /** An account closed: one partition fewer shares the budget. */
  accountClosed(heldNothing: boolean): void {
    this.#active--;
    if (heldNothing) this.#empty--;
    this.#changed();
  }

  /** An open account went from holding nothing to holding something (`+1`: the other way). */
  emptyAccounts(delta: number): void {
    this.#empty += delta;
  }

  /** `n` changes were taken by an account. */
  taken(n: number): void {
    this.#inFlight += n;
  }

  /** `n` changes were returned by an account. */
  returned(n: number): void {
    this.#inFlight -= n;
    if (n > 0) this.#changed();
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

  /** Queues `waiter` (served in order by {@link CreditPool.serve}); returns the function that unqueues it. */
  enqueue(waiter: Waiter): () => void {
    this.#waiters.add(waiter);
    return () => this.#waiters.delete(waiter);
  }

  /**
   * Hands credit to the waiters that may read now, first come first served. Stops early once the free
   * credit cannot cover a minimal read (no waiter could proceed).
   */
  serve(): void {
    for (const waiter of this.#waiters) {
      if (this.free < 1) break;
      const n = waiter.account.tryTake(waiter.max);
      if (n === 0) continue;
      this.#waiters.delete(waiter);
      waiter.grant(n);
    }
  }

  /** Credit came back or the shares changed: serve the waiters. */
  #changed(): void {
    if (this.#waiters.size > 0) this.serve();
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
  /** The least the next read must take (a page that came back larger than its credit), or 0. */
  #need = 0;

  constructor(pool: CreditPool) {
    this.#pool = pool;
  }

  /** Changes this partition holds (read, not acknowledged), including credit taken for a read in flight. */
  get held(): number {
    return this.#held;
  }

  /** Open and holding nothing. */
  get isEmpty(): boolean {
    return this.#open && this.#held === 0;
  }

  /** What this account may always read while it holds nothing and that much is free. */
  get guaranteed(): number {
    return Math.max(this.#pool.minRead, Math.min(this.#need, this.#pool.total));
  }

  /**
   * The next read must take at least `n` changes: a page of `n` came back that the credit could not cover
   * (a transaction is never split across pages). Until it has read, this account's guaranteed read (and the
   * room the others leave for it while it holds nothing) is that large, up to the whole budget.
   */
  need(n: number): void {
    this.#need = n;
    this.#pool.needing(this, n > this.#pool.minRead);
  }

  /** How many changes this partition may read now. */
  get available(): number {
    const pool = this.#pool;
    const free = pool.free;
    const empty = this.isEmpty;
    // Room kept for the guaranteed read of every other partition that holds nothing.
    const spare = free - pool.reserveFor(this);
    const othersWaiting = pool.waitingAccounts(0) - (this.#waiting ? 1 : 0);
    let limit: number;
    if (othersWaiting > 0) {
      limit = Math.min(pool.share - this.#held, spare);
    } else {
      const others = pool.active - (this.#open ? 1 : 0);
      const cap = Math.max(pool.share, pool.total - others * pool.minRead);
      limit = Math.min(cap - this.#held, spare);
    }
    // A partition that holds nothing may always make its guaranteed read while that much is free.
    if (empty) limit = Math.max(limit, Math.min(this.guaranteed, free));
    return Math.max(0, limit);
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

  /**
   * Takes credit for a read of at most `max` changes if at least a minimal read is available now, and
   * returns how much it took (0: none, wait with {@link CreditAccount.acquire}).
   */
  tryTake(max: number): number {
    const available = this.available;
    const least = Math.max(Math.min(this.#pool.minRead, max), Math.min(this.#need, this.#pool.total));
    if (available < least) return 0;
    const n = Math.min(available, Math.max(max, least));
    this.setWaiting(false);
    if (this.#need > 0) this.need(0);
    this.take(n);
    return n;
  }

  /**
   * Waits until a minimal read is available, then takes credit as {@link CreditAccount.tryTake}; resolves
   * with the amount taken, or 0 once `signal` aborts. While it waits, other partitions are held to their
   * fair share, and waiters are served in the order they began to wait.
   */
  acquire(max: number, signal: AbortSignal): Promise<number> {
    if (signal.aborted) return Promise.resolve(0);
    const now = this.tryTake(max);
    if (now > 0) return Promise.resolve(now);
    this.setWaiting(true);
    return new Promise<number>((resolve) => {
      let stopWatching = (): void => undefined;
      const unqueue = this.#pool.enqueue({
        account: this,
        max,
        grant: (n) => {
          stopWatching();
          resolve(n);
        },
      });
      stopWatching = onAbort(signal, () => {
        unqueue();
        this.setWaiting(false);
        resolve(0);
      });
    });
  }

  take(n: number): void {
    if (n <= 0) return;
    if (this.#held === 0 && this.#open) this.#pool.emptyAccounts(-1);
    this.#held += n;
    this.#pool.taken(n);
  }

  release(n: number): void {
    const freed = Math.min(n, this.#held);
    if (freed <= 0) return;
    this.#held -= freed;
    if (this.#held === 0 && this.#open) this.#pool.emptyAccounts(1);
    this.#pool.returned(freed);
  }

  /** Stops counting this partition in the fair share (credit it holds stays taken until released). */
  close(): void {
    this.setWaiting(false);
    if (this.#need > 0) this.need(0);
    if (!this.#open) return;
    this.#open = false;
    this.#pool.accountClosed(this.#held === 0);
  }
}
