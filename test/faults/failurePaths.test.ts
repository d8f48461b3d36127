/**
 * Regression tests for failure paths found by testing rxfeed as a user would (issue "correct under
 * faults"): each scenario makes a seam fail the way the real one can, and checks the promise that broke.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { filter, map, retry } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import type { Partition } from '../../src/core/Partition.js';
import { InvalidOptionsError, TransientError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import type { ChangeFeedOptions } from '../../src/feed/options.js';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import type { ReadRequest, Page } from '../../src/sources/Source.js';
import { idsOf } from '../support/memory.js';
import { withFakeTimers } from '../support/fakeTimers.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000 } as const;

/** A MemorySource whose `listPartitions` fails the next `failures` calls (a throttled partition-key-range read). */
class FlakyListSource extends MemorySource<Doc> {
  failures = 0;
  override async listPartitions(signal?: AbortSignal): Promise<readonly Partition[]> {
    if (this.failures > 0) {
      this.failures--;
      throw new TransientError('pkranges throttled (injected)', { statusCode: 429, retryAfterMs: 10 });
    }
    return super.listPartitions(signal);
  }
}

/** A source whose reads fail with a code-less error while `poisoned` (a client stuck on a cached rejection). */
class PoisonedSource extends MemorySource<Doc> {
  poisoned = false;
  override async read(request: ReadRequest): Promise<Page<Doc>> {
    if (this.poisoned) throw new Error('Cannot read properties of undefined (reading "getOverlappingRanges")');
    return super.read(request);
  }
}

/** A lease store whose `replace` hangs (never answers) for one owner once `hangFor` names it. */
class HangingLeaseStore extends MemoryLeaseStore {
  hangFor: string | undefined;
  override async replace(lease: Lease): Promise<Lease> {
    if (this.hangFor !== undefined && lease.owner === this.hangFor) return new Promise<Lease>(() => undefined);
    return super.replace(lease);
  }
}

function feedOf(source: MemorySource<Doc>, leases: MemoryLeaseStore, name: string, events: FeedEvent[], options: Partial<ChangeFeedOptions<Doc>> = {}) {
  return createChangeFeed<Doc>({ source, leases, instanceName: name, leasePrefix: 'f.', ...FAST, events: (e) => events.push(e), ...options });
}

const subscriptions = withFakeTimers();

describe('split handling under faults', () => {
  it('a listing that fails while a split is handled is retried: children are created and read, nothing is lost', async () => {
    const source = new FlakyListSource({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = feedOf(source, leases, 'a', events);
    for (let i = 0; i < 10; i++) source.write({ id: `d${i}`, n: i });
    const seen: ChangeBatch<Doc>[] = [];
    subscriptions.push(feed.changes$.pipe(checkpointEvery({ count: 1, ms: 10 })).subscribe((b) => seen.push(b)));
    await vi.advanceTimersByTimeAsync(1_000);
    source.failures = 1;
    source.split('0');
    for (let i = 10; i < 20; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(new Set(idsOf(seen)).size).toBe(20);
    const stored = (await leases.list('f.')).leases.filter((l) => !l.id.endsWith('.info') && !l.id.endsWith('.lock'));
    expect(stored.map((l) => l.leaseToken).sort()).toEqual(source.partitions().map((p) => p.id).sort());
    expect(events.some((e) => e.type === 'partitionSplit')).toBe(true);
  });

  it('a split that cannot be handled for a whole expiration gives the lease back instead of holding it unread', async () => {
    const source = new FlakyListSource({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = feedOf(source, leases, 'a', events);
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(500);
    source.failures = 1_000_000;
    source.split('0');
    await vi.advanceTimersByTimeAsync(3_000);
    // Released with a reason (and a stall event saying why), so another host, or this one later, retries.
    expect(events.some((e) => e.type === 'leaseReleased' && e.lease === '0' && e.reason === 'Error')).toBe(true);
    expect(events.some((e) => e.type === 'stall' && e.lease === '0' && /gone partition/.test(e.message))).toBe(true);
    source.failures = 0;
    source.write({ id: 'after', n: 1 });
    await vi.advanceTimersByTimeAsync(5_000);
    const children = (await leases.list('f.')).leases.filter((l) => l.leaseToken !== '0' && !l.id.endsWith('.info') && !l.id.endsWith('.lock'));
    expect(children).toHaveLength(2);
    expect(children.every((l) => l.owner === 'a')).toBe(true);
  });
});

describe('a processor is re-runnable', () => {
  it('retry() around a pipeline that fails once restarts it: leases are acquired again and everything is processed', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = feedOf(source, leases, 'a', events);
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}`, n: i });
    let failed = false;
    const done = new Set<string>();
    subscriptions.push(
      feed.changes$
        .pipe(
          map((batch) => {
            if (!failed && batch.changes.some((c) => c.id === 'd15')) {
              failed = true;
              throw new Error('sink down (injected)');
            }
            for (const c of batch.changes) done.add(c.id);
            return batch;
          }),
          checkpointEvery(1),
          retry({ count: 1 }),
        )
        .subscribe(),
    );
    await vi.advanceTimersByTimeAsync(3_000);
    for (let i = 20; i < 30; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(3_000);
    expect(failed).toBe(true);
    expect(done.size).toBe(30);
    expect(events.filter((e) => e.type === 'leaseAcquired').length).toBeGreaterThanOrEqual(4); // 2 leases, 2 runs
  });

  it('subscribing again after unsubscribing starts a fresh run from the checkpoints', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const feed = feedOf(source, leases, 'a', []);
    for (let i = 0; i < 10; i++) source.write({ id: `d${i}`, n: i });
    const first: ChangeBatch<Doc>[] = [];
    const sub = feed.changes$.pipe(checkpointEvery(1)).subscribe((b) => first.push(b));
    await vi.advanceTimersByTimeAsync(1_000);
    sub.unsubscribe();
    await feed.stop();
    for (let i = 10; i < 15; i++) source.write({ id: `d${i}`, n: i });
    const second: ChangeBatch<Doc>[] = [];
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe((b) => second.push(b)));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(new Set(idsOf(first)).size).toBe(10);
    expect(idsOf(second).sort()).toEqual(['d10', 'd11', 'd12', 'd13', 'd14']);
  });

  it('a second concurrent subscription shares the run: every lease is read by one reader', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = feedOf(source, leases, 'a', events);
    for (let i = 0; i < 10; i++) source.write({ id: `d${i}`, n: i });
    const a: ChangeBatch<Doc>[] = [];
    const b: ChangeBatch<Doc>[] = [];
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe((x) => a.push(x)));
    subscriptions.push(feed.changes$.subscribe((x) => b.push(x)));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(events.filter((e) => e.type === 'leaseAcquired')).toHaveLength(2);
    expect(idsOf(a).sort()).toEqual(idsOf(b).sort());
    expect(idsOf(a)).toHaveLength(10); // each change read once
  });
});

describe('silent failures are visible', () => {
  it("an empty leasePrefix throws at construction: it would match every other processor's leases", () => {
    const make = () => createChangeFeed({ source: new MemorySource(), leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: '' });
    expect(make).toThrow(InvalidOptionsError);
    expect(make).toThrow(/leasePrefix/);
  });

  it('a partition whose batches are all dropped (a plain filter) is reported as a stall, and so is the drain at stop()', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const events: FeedEvent[] = [];
    const feed = feedOf(source, new MemoryLeaseStore(), 'a', events, { stallTimeoutMs: 5_000, drainTimeoutMs: 2_000 });
    for (let i = 0; i < 3; i++) source.write({ id: `d${i}`, n: i });
    subscriptions.push(
      feed.changes$
        .pipe(
          filter(() => false),
          checkpointEvery(1),
        )
        .subscribe(),
    );
    await vi.advanceTimersByTimeAsync(4_000);
    expect(events.filter((e) => e.type === 'stall')).toEqual([]);
    await vi.advanceTimersByTimeAsync(2_000);
    const stalls = events.filter((e) => e.type === 'stall');
    expect(stalls).toHaveLength(1);
    expect(stalls[0]).toMatchObject({ lease: '0', message: expect.stringMatching(/filterChanges/) });
    const stopping = feed.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    await stopping;
    expect(events.filter((e) => e.type === 'stall')).toHaveLength(2);
    expect(feed.inFlightChanges).toBe(0);
  });

  it('a read error that repeats forever is reported with its count, then the lease is given up so another host reads it', async () => {
    const leases = new MemoryLeaseStore();
    const sick = new PoisonedSource({ partitions: 1 });
    const events: FeedEvent[] = [];
    const a = feedOf(sick, leases, 'a', events);
    subscriptions.push(a.changes$.pipe(checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(500);
    sick.poisoned = true;
    sick.write({ id: 'd0', n: 0 });
    // host b shares the lease store and reads the same data through a healthy client
    const healthy = new MemorySource<Doc>({ partitions: 1 });
    healthy.write({ id: 'd0', n: 0 });
    const seenByB: ChangeBatch<Doc>[] = [];
    const b = feedOf(healthy, leases, 'b', []);
    subscriptions.push(b.changes$.pipe(checkpointEvery(1)).subscribe((x) => seenByB.push(x)));
    await vi.advanceTimersByTimeAsync(5_000);
    const errors = events.filter((e) => e.type === 'error' && e.lease === '0');
    expect(errors.map((e) => e.type === 'error' && e.attempts).slice(0, 2)).toEqual([1, 3]);
    expect(events.some((e) => e.type === 'leaseReleased' && e.lease === '0' && e.reason === 'Error')).toBe(true);
    expect(idsOf(seenByB)).toContain('d0');
  });
});

describe('a host whose lease write hangs', () => {
  it('stops emitting for the lease before its expiry, so it never processes while another host owns it', async () => {
    const leases = new HangingLeaseStore();
    const source = new MemorySource<Doc>({ partitions: 1 });
    const emitted: { host: string; at: number }[] = [];
    const eventsA: FeedEvent[] = [];
    const eventsB: FeedEvent[] = [];
    const a = feedOf(source, leases, 'a', eventsA);
    subscriptions.push(a.changes$.pipe(checkpointEvery(1_000_000)).subscribe(() => emitted.push({ host: 'a', at: Date.now() })));
    await vi.advanceTimersByTimeAsync(500);
    const b = feedOf(source, leases, 'b', eventsB);
    subscriptions.push(b.changes$.pipe(checkpointEvery(1)).subscribe(() => emitted.push({ host: 'b', at: Date.now() })));
    leases.hangFor = 'a'; // every write of a's (renewals, checkpoints) hangs from now on
    const hungAt = Date.now();
    for (let t = 0; t < 60; t++) {
      source.write({ id: `d${t}`, n: t });
      await vi.advanceTimersByTimeAsync(50);
    }
    const acquiredByB = eventsB.find((e) => e.type === 'leaseAcquired');
    expect(acquiredByB).toBeDefined();
    const lostByA = eventsA.find((e) => e.type === 'leaseLost');
    expect(lostByA).toBeDefined();
    const takeover = Math.min(...emitted.filter((e) => e.host === 'b').map((e) => e.at));
    const lastOfA = Math.max(...emitted.filter((e) => e.host === 'a').map((e) => e.at));
    expect(lastOfA).toBeLessThan(takeover);
    expect(lastOfA - hungAt).toBeLessThan(FAST.leaseExpirationMs);
  });
});

describe('state of ended ownerships is freed', () => {
  it('checkpointEvery keeps no state for past ownerships: trackers are collected after many rebalances', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const source = new MemorySource<Doc>({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = feedOf(source, leases, 'a', events);
    const trackers: WeakRef<object>[] = [];
    const known = new WeakSet<object>();
    subscriptions.push(
      feed.changes$.pipe(checkpointEvery({ count: 1, ms: 10 })).subscribe((b) => {
        const t = b.origin!.tracker;
        if (!known.has(t)) {
          known.add(t);
          trackers.push(new WeakRef(t));
        }
      }),
    );
    const ROUNDS = 20;
    for (let round = 0; round < ROUNDS; round++) {
      source.write({ id: `d${round}`, n: round });
      await vi.advanceTimersByTimeAsync(300);
      const lease = (await leases.read('f.0'))!;
      const taken = await leases.replace({ ...lease, owner: 'other', epoch: lease.epoch + 1, timestampMs: Date.now() });
      await vi.advanceTimersByTimeAsync(300);
      await leases.replace({ ...taken, owner: null });
      await vi.advanceTimersByTimeAsync(600);
    }
    expect(events.filter((e) => e.type === 'leaseLost')).toHaveLength(ROUNDS);
    vi.useRealTimers();
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    expect(trackers.filter((r) => r.deref() !== undefined).length).toBeLessThanOrEqual(2);
  });
});
