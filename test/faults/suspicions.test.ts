/**
 * Suspicions from the review of the lease coordinator, each settled by a test: what happens when a
 * checkpoint keeps conflicting, a requester dies after asking for a lease, a foreign bootstrap lock never
 * goes away, or a drain outlasts the lease expiration.
 */
import { concatMap, timer } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import { createChangeFeed } from '../../src/feed/index.js';
import type { ChangeFeedOptions } from '../../src/feed/options.js';
import { HANDOFF_AT, HANDOFF_TO } from '../../src/leases/protocol/index.js';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import { CorruptLeaseError } from '../../src/errors/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { idsOf, lsnOfPosition } from '../support/memory.js';
import { withFakeTimers } from '../support/fakeTimers.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000 } as const;

function feedOf(source: MemorySource<Doc>, leases: MemoryLeaseStore, name: string, events: FeedEvent[], options: Partial<ChangeFeedOptions<Doc>> = {}) {
  return createChangeFeed<Doc>({ source, leases, instanceName: name, leasePrefix: 's.', ...FAST, events: (e) => events.push(e), ...options });
}

/**
 * A lease store in which another writer touches a lease (a property only, as a handoff request does)
 * just before each of the next `conflicts` checkpoint writes of `owner`, so they conflict on the etag.
 */
class ContendedLeaseStore extends MemoryLeaseStore {
  conflicts = 0;
  constructor(private readonly owner: string) {
    super();
  }
  override async replace(lease: Lease): Promise<Lease> {
    if (this.conflicts > 0 && lease.owner === this.owner && lease.continuation !== null) {
      this.conflicts--;
      const current = (await super.read(lease.id))!;
      await super.replace({ ...current, properties: { ...current.properties, touchedBy: `writer-${this.conflicts}` } });
    }
    return super.replace(lease);
  }
}

/** A lease store holding a bootstrap lock written by another processor (`{ id }` only: not a lease). */
class ForeignLockStore extends MemoryLeaseStore {
  constructor(private readonly lockId: string) {
    super();
  }
  override async read(id: string): Promise<Lease | undefined> {
    if (id === this.lockId) throw new CorruptLeaseError(id, 'no Owner, LeaseToken or timestamp (a foreign lock)');
    return super.read(id);
  }
  override async createIfAbsent(lease: NewLease): Promise<Lease | undefined> {
    if (lease.id === this.lockId) return undefined; // it exists
    return super.createIfAbsent(lease);
  }
}

const subscriptions = withFakeTimers();

describe('suspicions, settled', () => {
  it('a checkpoint that conflicts again and again while this host still owns the lease is retried until it lands', async () => {
    const leases = new ContendedLeaseStore('a');
    const source = new MemorySource<Doc>({ partitions: 1 });
    const events: FeedEvent[] = [];
    const feed = feedOf(source, leases, 'a', events);
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(300);
    leases.conflicts = 10;
    for (let i = 0; i < 5; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(leases.conflicts).toBe(0);
    const lease = (await leases.read('s.0'))!;
    expect(lease.owner).toBe('a');
    expect(lsnOfPosition(lease.continuation)).toBe(source.latestLsn('0'));
    expect(events.filter((e) => e.type === 'leaseLost')).toEqual([]);
  });

  it('a lease handed over to a requester that died is read again within one expiration of the handover', async () => {
    const inner = new MemoryLeaseStore();
    const source = new MemorySource<Doc>({ partitions: 2 });
    const eventsA: FeedEvent[] = [];
    const seen: ChangeBatch<Doc>[] = [];
    const a = feedOf(source, inner, 'a', eventsA);
    subscriptions.push(a.changes$.pipe(checkpointEvery(1)).subscribe((b) => seen.push(b)));
    await vi.advanceTimersByTimeAsync(300);
    // b asks for one of a's two leases (as its balancer would) and dies right after.
    const lease = (await inner.read('s.1'))!;
    await inner.replace({ ...lease, properties: { ...lease.properties, [HANDOFF_TO]: 'b', [HANDOFF_AT]: String(Date.now()) } });
    await vi.advanceTimersByTimeAsync(1_000);
    // a honoured the request: the lease names b (a host that is gone) if the request was still fresh when
    // a drained, else nobody; either way a no longer reads it.
    expect(eventsA.some((e) => e.type === 'leaseReleased' && e.lease === '1' && e.reason === 'Rebalanced')).toBe(true);
    const handedAt = Date.now();
    let id = 0;
    while (source.partitionFor(`late${id}`) !== '1') id++;
    source.write({ id: `late${id}`, n: 1 });
    await vi.advanceTimersByTimeAsync(FAST.leaseExpirationMs + 3 * FAST.leaseAcquireIntervalMs);
    expect(idsOf(seen)).toContain(`late${id}`);
    const retaken = eventsA.find((e) => e.type === 'leaseAcquired' && e.lease === '1' && e.epoch > lease.epoch);
    expect(retaken).toBeDefined();
    expect(Date.now() - handedAt).toBeLessThanOrEqual(FAST.leaseExpirationMs + 3 * FAST.leaseAcquireIntervalMs);
  });

  it("a bootstrap lock in another processor's format that never goes away delays the start by one expiration, with a stall event", async () => {
    const leases = new ForeignLockStore('s..lock');
    const source = new MemorySource<Doc>({ partitions: 2 });
    source.write({ id: 'd0', n: 0 });
    const events: FeedEvent[] = [];
    const seen: ChangeBatch<Doc>[] = [];
    subscriptions.push(feedOf(source, leases, 'a', events).changes$.pipe(checkpointEvery(1)).subscribe((b) => seen.push(b)));
    await vi.advanceTimersByTimeAsync(3_000);
    expect(idsOf(seen)).toEqual(['d0']);
    expect(events.some((e) => e.type === 'stall' && /bootstrap lock/.test(e.message))).toBe(true);
  });

  it('a drain longer than the lease expiration keeps the lease renewed: nobody takes it over while the sink finishes', async () => {
    const leases = new MemoryLeaseStore();
    const source = new MemorySource<Doc>({ partitions: 1 });
    for (let i = 0; i < 3; i++) source.write({ id: `d${i}`, n: i });
    const eventsB: FeedEvent[] = [];
    const done: string[] = [];
    const a = feedOf(source, leases, 'a', [], { drainTimeoutMs: 10_000 });
    subscriptions.push(
      a.changes$
        .pipe(
          concatMap((b) => timer(3_000).pipe(concatMap(() => [b]))), // a sink that takes 3 s per batch
          checkpointEvery(1),
        )
        .subscribe((b) => done.push(...idsOf([b]))),
    );
    await vi.advanceTimersByTimeAsync(100);
    const b = feedOf(source, leases, 'b', eventsB);
    const seenByB: ChangeBatch<Doc>[] = [];
    subscriptions.push(b.changes$.pipe(checkpointEvery(1)).subscribe((x) => seenByB.push(x)));
    const stopped = a.stop();
    await vi.advanceTimersByTimeAsync(2_500); // past the expiration: a is still draining, and renewing
    expect(eventsB.filter((e) => e.type === 'leaseAcquired')).toEqual([]);
    await vi.advanceTimersByTimeAsync(5_000);
    await stopped;
    expect(done.sort()).toEqual(['d0', 'd1', 'd2']);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(eventsB.some((e) => e.type === 'leaseAcquired')).toBe(true);
    expect(idsOf(seenByB)).toEqual([]); // nothing re-delivered: a's final checkpoint covered everything
  });
});
