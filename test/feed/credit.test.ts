import { bufferCount, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { CreditPool } from '../../src/feed/CreditPool.js';
import { createChangeFeed } from '../../src/feed/index.js';
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
    let notified = 0;
    const off = accounts[0]!.onChange(() => notified++);
    accounts[1]!.release(5);
    off();
    accounts[1]!.release(5);
    expect(notified).toBe(1);
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
      instanceName: 'a',
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
