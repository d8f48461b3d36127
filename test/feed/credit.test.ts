import { bufferCount, concatMap, map, type Subscription, timer } from 'rxjs';
import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { CreditPool } from '../../src/feed/CreditPool.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { abortWatchers } from '../../src/internal/abortWatch.js';
import { seededRandom } from '../../src/internal/random.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { advanceUntil } from '../support/memory.js';

describe('CreditPool', () => {
  it('lets one partition use all free credit while nobody else waits, and holds everyone to a fair share once someone does', () => {
    const pool = new CreditPool(1_000, 100);
    const a = pool.open();
    const b = pool.open();
    expect(pool.share).toBe(500);
    expect(pool.minRead).toBe(50);
    expect(a.available).toBe(950); // all but one minimal read for b
    a.take(900);
    expect(b.available).toBe(100);
    b.setWaiting(true); // b needs more than 100: a is now held to its share
    expect(a.available).toBe(0);
    expect(b.available).toBe(100);
    a.release(600);
    expect(b.available).toBe(700); // b is the only one waiting: it may use what is free
    expect(a.available).toBe(200); // a is held to its share while b waits
    b.setWaiting(false);
    expect(a.available).toBe(650); // 950 - 300 held
    expect(pool.inFlight).toBe(300);
  });

  it('never hands out more than the total, and recomputes shares as partitions come and go', () => {
    const pool = new CreditPool(100, 10);
    const accounts = [pool.open(), pool.open(), pool.open(), pool.open()];
    for (const acc of accounts) acc.setWaiting(true);
    expect(pool.share).toBe(25);
    for (const acc of accounts) acc.take(acc.available);
    expect(pool.inFlight).toBe(100);
    expect(accounts.map((acc) => acc.available)).toEqual([0, 0, 0, 0]);
    accounts[3]!.release(25);
    accounts[3]!.close();
    expect(pool.share).toBe(33);
    expect(accounts[0]!.available).toBe(8);
    accounts[1]!.release(5);
    expect(accounts[1]!.held).toBe(20);
    expect(pool.inFlight).toBe(70);
  });

  it.each([
    // total, page size, partitions: how many reads start at once, each asking for a page and holding it
    { total: 10_000, pageSize: 100, partitions: 1_024 },
    { total: 1_000, pageSize: 100, partitions: 64 },
    { total: 100, pageSize: 10, partitions: 10 },
    { total: 100, pageSize: 100, partitions: 3 },
  ])('keeps a minimal read for every partition holding nothing ($partitions partitions, budget $total, pages of $pageSize)', ({ total, pageSize, partitions }) => {
    const pool = new CreditPool(total, pageSize);
    const accounts = Array.from({ length: partitions }, () => pool.open());
    // Every partition starts a read while all the others' reads are still in flight.
    const taken = accounts.map((account) => account.tryTake(pageSize));
    expect(Math.min(...taken)).toBeGreaterThanOrEqual(pool.minRead);
    expect(pool.inFlight).toBeLessThanOrEqual(total);
    expect(taken[0]).toBe(Math.min(pageSize, total - (partitions - 1) * pool.minRead));
    // Idle polls: each gives everything back.
    accounts.forEach((account, i) => account.release(taken[i]!));
    expect(pool.inFlight).toBe(0);
    expect(pool.empty).toBe(partitions);
  });

  it('counts the partitions that hold nothing as credit is taken, returned, and accounts close', () => {
    const pool = new CreditPool(100, 10);
    const [a, b] = [pool.open(), pool.open()];
    expect(pool.empty).toBe(2);
    a.take(10);
    expect(pool.empty).toBe(1);
    a.release(4);
    expect(pool.empty).toBe(1);
    a.release(6);
    expect(pool.empty).toBe(2);
    b.take(3);
    b.close(); // still holds 3: no longer counted anywhere
    expect(pool.empty).toBe(1);
    b.release(3);
    expect(pool.empty).toBe(1);
    a.close();
    expect(pool.empty).toBe(0);
  });

  it('an account that needs more than a minimal read (a page larger than its credit) gets it, and others leave room for it', () => {
    const pool = new CreditPool(10, 4);
    const a = pool.open();
    const b = pool.open();
    expect(pool.minRead).toBe(2);
    a.take(6);
    b.need(6); // b's page of 6 did not fit its credit: its next read must take 6 at once
    expect(b.tryTake(4)).toBe(0); // only 4 are free
    expect(a.available).toBe(0); // b holds nothing: the 6 it needs are kept for it, not just a minimal read
    a.release(2);
    expect(a.available).toBe(0);
    expect(b.tryTake(4)).toBe(6); // the whole page at once, above the 4 it asks for
    expect(pool.inFlight).toBe(10);
    b.release(6);
    expect(a.available).toBe(4); // served: back to a minimal read kept for b
    expect(b.tryTake(4)).toBe(4);
  });

  it('a need larger than the whole budget is capped at it', () => {
    const pool = new CreditPool(10, 4);
    const a = pool.open();
    a.need(25);
    expect(a.tryTake(4)).toBe(10);
    expect(pool.inFlight).toBe(10);
  });

  it('serves waiters in the order they began to wait, waking only those that may read', async () => {
    const pool = new CreditPool(100, 10);
    const hog = pool.open();
    const [first, second] = [pool.open(), pool.open()];
    expect(pool.minRead).toBe(5);
    hog.take(96); // a slow sink holds nearly everything
    first.take(2); // neither holds nothing any more, so neither has a minimal read kept for it
    second.take(2);
    const stop = new AbortController();
    const grants: string[] = [];
    const firstGets = first.acquire(10, stop.signal).then((n) => grants.push(`first ${n}`));
    const secondGets = second.acquire(10, stop.signal).then((n) => grants.push(`second ${n}`));
    expect(pool.waiting).toBe(2);
    hog.release(4); // 0 free before: not enough for a minimal read
    await Promise.resolve();
    expect(grants).toEqual([]);
    hog.release(3); // 7 free: one minimal read, for the first waiter only
    await firstGets;
    expect(grants).toEqual(['first 7']);
    expect(pool.waiting).toBe(1);
    hog.release(20);
    await secondGets;
    expect(grants).toEqual(['first 7', 'second 10']); // a page at most
    expect(pool.waiting).toBe(0);
    expect(pool.inFlight).toBe(100 - 4 - 3 + 7 - 20 + 10);
  });

  it('ends a wait for credit when its signal aborts, leaving nothing queued or watched', async () => {
    const pool = new CreditPool(10, 10);
    const hog = pool.open();
    const waiter = pool.open();
    hog.take(9);
    waiter.take(1); // holds something, and nothing is free: it must wait
    const stop = new AbortController();
    const got = waiter.acquire(10, stop.signal);
    expect(pool.waiting).toBe(1);
    expect(abortWatchers(stop.signal)).toBe(1);
    stop.abort();
    await expect(got).resolves.toBe(0);
    expect(pool.waiting).toBe(0);
    expect(abortWatchers(stop.signal)).toBe(0);
    hog.release(9); // nobody is served after the abort
    expect(waiter.held).toBe(1);
    expect(pool.inFlight).toBe(1);
  });

  it('removes the abort watch of a wait that was served', async () => {
    const pool = new CreditPool(10, 10);
    const hog = pool.open();
    const waiter = pool.open();
    hog.take(10);
    const stop = new AbortController();
    const got = waiter.acquire(10, stop.signal);
    expect(abortWatchers(stop.signal)).toBe(1);
    hog.release(10);
    await expect(got).resolves.toBe(8); // all but the minimal read kept for the hog, which holds nothing now
    expect(abortWatchers(stop.signal)).toBe(0);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  });

  it('never hands out more than the total and serves every waiter, over random reads, acknowledgements and closes', async () => {
    for (let seed = 1; seed <= 20; seed++) {
      const random = seededRandom(seed);
      const pool = new CreditPool(200, 20);
      const stop = new AbortController();
      const accounts = Array.from({ length: 12 }, () => ({ account: pool.open(), waiting: false, open: true }));
      for (let step = 0; step < 2_000; step++) {
        const entry = accounts[Math.floor(random() * accounts.length)]!;
        const { account } = entry;
        const roll = random();
        if (roll < 0.45 && entry.open && !entry.waiting) {
          entry.waiting = true;
          void account.acquire(20, stop.signal).then(() => (entry.waiting = false));
        } else if (roll < 0.97) {
          account.release(Math.ceil(random() * account.held));
        } else if (entry.open && !entry.waiting) {
          account.close();
          entry.open = false;
          account.release(account.held);
          accounts.push({ account: pool.open(), waiting: false, open: true });
        }
        await Promise.resolve();
        expect(pool.inFlight).toBeLessThanOrEqual(pool.total);
      }
      // Once every partition acknowledges what it holds, every waiter gets its read.
      for (let round = 0; round < 50 && accounts.some((e) => e.waiting); round++) {
        for (const { account } of accounts) account.release(account.held);
        await Promise.resolve();
      }
      expect(accounts.filter((e) => e.waiting)).toEqual([]);
      stop.abort();
    }
  });
});

describe('credit flow control in a feed', () => {
  let subscription: Subscription | undefined;
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    subscription?.unsubscribe();
    vi.useRealTimers();
  });

  it('a page larger than its credit (equal LSNs of a merge) never takes the host above its budget, and is read again once it fits', async () => {
    const source = new MemorySource<{ id: string }>({ partitions: 2 });
    const [left, right] = source.partitions().map((p) => p.id);
    const ids = (partition: string) => Array.from({ length: 400 }, (_, i) => `d${i}`).filter((id) => source.partitionFor(id) === partition).slice(0, 12);
    // Both parents written in step: the merged log holds pairs of equal LSNs, which a page never splits.
    const [l, r] = [ids(left!), ids(right!)];
    for (let i = 0; i < 12; i++) {
      source.write({ id: l[i]! });
      source.write({ id: r[i]! });
    }
    source.merge(left!, right!);
    const feed = createChangeFeed<{ id: string }>({
      source,
      leases: new MemoryLeaseStore(),
      leasePrefix: 'test.', instanceName: 'a',
      maxInFlightChanges: 7,
      maxItemCount: 3, // 3 ends inside an LSN pair: every page comes back with 4
      pollIntervalMs: 100,
    });
    const seen = new Set<string>();
    let most = 0;
    subscription = feed.changes$
      .pipe(
        concatMap((batch) => timer(200).pipe(map(() => batch))), // a slow sink: reads run into the budget
        checkpointEvery(1),
      )
      .subscribe((batch) => {
        for (const c of batch.changes) seen.add(`${c.id}@${c.lsn}`);
      });
    await advanceUntil(() => {
      most = Math.max(most, feed.inFlightChanges);
      return seen.size === 24;
    }, { limitMs: 60_000 });
    expect(most).toBeLessThanOrEqual(7);
    expect(most).toBeGreaterThanOrEqual(4);
  });

  it('a bufferCount close to the budget fills from a single busy partition (no stall while it flows)', async () => {
    const source = new MemorySource<{ id: string }>({ partitions: 4 });
    const busy = source.partitions()[2]!.id;
    let written = 0;
    for (let i = 0; written < 2_000; i++) {
      const id = `d${i}`;
      if (source.partitionFor(id) === busy) {
        source.write({ id });
        written++;
      }
    }
    const events: FeedEvent[] = [];
    const feed = createChangeFeed<{ id: string }>({
      source,
      leases: new MemoryLeaseStore(),
      leasePrefix: 'test.', instanceName: 'a',
      maxInFlightChanges: 1_000,
      maxItemCount: 100,
      pollIntervalMs: 100,
      stallTimeoutMs: 5_000,
      events: (e) => events.push(e),
    });
    let delivered = 0;
    let largest = 0;
    // up to 800 changes per emission: more than any fair share (250), less than the budget minus one
    // minimal read (50) for each of the three other partitions
    subscription = feed.changes$
      .pipe(bufferCount(8), checkpointEvery(100))
      .subscribe((bs) => {
        const size = bs.reduce((n, b) => n + b.size, 0);
        largest = Math.max(largest, size);
        delivered += size;
      });
    await advanceUntil(() => delivered >= 1_300, { limitMs: 60_000 });
    expect(events.filter((e) => e.type === 'stall')).toEqual([]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(largest).toBeGreaterThanOrEqual(750); // three times a fair share, held at once
    expect(feed.inFlightChanges).toBe(2_000 - delivered); // the rest waits in the last, unfilled buffer
    // ...which never reaches the checkpoint: once nothing moved for stallTimeoutMs, that is reported.
    expect(events.filter((e) => e.type === 'stall').map((e) => e.lease)).toEqual([busy]);
  });
});
