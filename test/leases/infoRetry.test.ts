/**
 * A bootstrap whose lease creates all landed but whose `<prefix>.info` create failed (a 503, a 429, a timeout)
 * used to leave `.info` unwritten for as long as its host ran: the start had gone on to the balance loop, the
 * failure was only counted, and no host wrote `.info` until another one started. Every start until then ran the
 * bootstrap again under the lock (the lock, a listing, every start position, a create per partition answered
 * 409, `.info`), and a host starting during the lock's hold waited an expiration on it. The host now tries
 * again itself, an acquire interval later, taking its own lock back (docs/lease-protocol.md, *Bootstrap*).
 */
import { describe, expect, it } from 'vitest';
import { TransientError } from '../../src/errors/index.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { NewLease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { FakePartitions, startHost } from './hosts.js';
import { VirtualScheduler } from './virtualScheduler.js';

const timings = { leaseAcquireIntervalMs: 13_000, leaseRenewIntervalMs: 40_000, leaseExpirationMs: 60_000 };
const INFO = 'p..info';
const LOCK = 'p..lock';

/**
 * A memory store whose `.info` creates fail `failures` times (a 503, nothing written; `lostReply`: written,
 * the reply lost); `creates` lists the documents each create landed, in order.
 */
function infoFailing(failures: number, kind: 'unavailable' | 'lostReply' = 'unavailable') {
  const inner = new MemoryLeaseStore();
  const creates: string[] = [];
  const infoAttempts: number[] = [];
  let left = failures;
  const store: LeaseStore = {
    list: (prefix) => inner.list(prefix),
    read: (id) => inner.read(id),
    replace: (lease) => inner.replace(lease),
    delete: (lease) => inner.delete(lease),
    createIfAbsent: async (lease: NewLease) => {
      if (lease.id === INFO) {
        infoAttempts.push(lease.timestampMs);
        if (left > 0) {
          left--;
          if (kind === 'lostReply') await inner.createIfAbsent(lease);
          throw new TransientError('lease store unavailable (injected)', { statusCode: 503 });
        }
      }
      const created = await inner.createIfAbsent(lease);
      if (created) creates.push(lease.id);
      return created;
    },
  };
  return { inner, store, creates, infoAttempts };
}

describe('a bootstrap whose .info create failed, every lease created', () => {
  it('writes .info at its host\'s next try, an acquire interval later, creating no lease again', async () => {
    const clock = new VirtualScheduler();
    const { inner, store, creates } = infoFailing(1);
    const parts = new FakePartitions(4);
    const host = startHost('a', store, clock, parts.listPartitions, timings);
    await clock.advance(100);
    expect(host.coordinator.owned()).toHaveLength(4);
    expect(await inner.read(INFO)).toBeUndefined();
    await clock.advance(timings.leaseAcquireIntervalMs);
    expect(await inner.read(INFO)).toBeDefined();
    // The leases were created once; the lock once (taken back, not created again).
    expect(creates.sort()).toEqual([INFO, LOCK, 'p.0', 'p.1', 'p.2', 'p.3']);
    expect(host.coordinator.owned()).toHaveLength(4);
    // Its lock is held an expiration after `.info` landed, then removed.
    expect(await inner.read(LOCK)).toBeDefined();
    await clock.advance(timings.leaseExpirationMs + 100);
    expect(await inner.read(LOCK)).toBeUndefined();
    await host.coordinator.stop();
  });

  it('tries again until .info lands, each an acquire interval after the last failed', async () => {
    const clock = new VirtualScheduler();
    const { inner, store, infoAttempts } = infoFailing(3);
    const host = startHost('a', store, clock, new FakePartitions(2).listPartitions, timings);
    await clock.advance(100 + 3 * timings.leaseAcquireIntervalMs);
    expect(await inner.read(INFO)).toBeDefined();
    expect(infoAttempts).toHaveLength(4);
    expect(host.coordinator.owned()).toHaveLength(2);
    await clock.advance(10 * timings.leaseAcquireIntervalMs);
    expect(infoAttempts).toHaveLength(4); // done: never again
    await host.coordinator.stop();
  });

  it('reads .info and stops trying when the failed create landed all the same (its reply was lost)', async () => {
    const clock = new VirtualScheduler();
    const { inner, store, infoAttempts } = infoFailing(1, 'lostReply');
    const host = startHost('a', store, clock, new FakePartitions(2).listPartitions, timings);
    await clock.advance(100 + 3 * timings.leaseAcquireIntervalMs);
    expect(await inner.read(INFO)).toBeDefined();
    expect(infoAttempts).toHaveLength(1);
    await host.coordinator.stop();
  });

  it('a host that starts after the retry finds .info: it starts on the listing beside it, with no bootstrap and no wait', async () => {
    const clock = new VirtualScheduler();
    const { inner, store, creates } = infoFailing(1);
    const parts = new FakePartitions(4);
    const a = startHost('a', store, clock, parts.listPartitions, { ...timings, maxLeases: 2 });
    await clock.advance(100 + timings.leaseAcquireIntervalMs);
    expect(await inner.read(INFO)).toBeDefined();
    const before = creates.length;
    const b = startHost('b', store, clock, parts.listPartitions, timings);
    await clock.advance(100);
    expect(b.coordinator.owned()).toHaveLength(2);
    expect(creates.length).toBe(before);
    await Promise.all([a.coordinator.stop(), b.coordinator.stop()]);
  });

  it('a stop before the next try hands the lock over, naming the leases: the next host takes it over and writes .info', async () => {
    const clock = new VirtualScheduler();
    const { inner, store, creates } = infoFailing(1);
    const parts = new FakePartitions(3);
    const a = startHost('a', store, clock, parts.listPartitions, timings);
    await clock.advance(100);
    await a.coordinator.stop();
    const lock = await inner.read(LOCK);
    expect(lock?.owner).toBeNull();
    expect(lock?.properties['rxfeed.bootstrapLeases']).toBeDefined();
    await clock.advance(timings.leaseAcquireIntervalMs); // a's retry, had it not stopped
    expect(await inner.read(INFO)).toBeUndefined();
    const b = startHost('b', store, clock, parts.listPartitions, timings);
    await clock.advance(100);
    expect(await inner.read(INFO)).toBeDefined();
    expect(b.coordinator.owned()).toHaveLength(3);
    expect(creates.filter((id) => id.startsWith('p.') && !id.startsWith('p..')).sort()).toEqual(['p.0', 'p.1', 'p.2']);
    await b.coordinator.stop();
  });
});

describe('a create that lands after a reset deleted the leases and .info', () => {
  it('leaves a lease, so no round bootstraps: the gap is repaired, and the repair is followed by .info', async () => {
    const clock = new VirtualScheduler();
    const inner = new MemoryLeaseStore();
    const parts = new FakePartitions(3);
    const host = startHost('a', inner, clock, parts.listPartitions, timings);
    await clock.advance(timings.leaseExpirationMs + 100);
    expect(await inner.read(INFO)).toBeDefined();
    // A reset: the leases, then the markers; then a create sent before it lands (free, at epoch 0).
    for (const l of inner.snapshot()) await inner.delete(l);
    await inner.createIfAbsent({ id: 'p.1', leaseToken: '1', feedRange: parts.list[1]!.range, owner: null, continuation: null, timestampMs: clock.now(), epoch: 0, mode: 'latestVersion', properties: {} });
    await clock.advance(3 * timings.leaseExpirationMs);
    expect(inner.snapshot().map((l) => l.id).filter((id) => !id.startsWith('p..')).sort()).toEqual(['p.0', 'p.1', 'p.2']);
    expect(await inner.read(INFO)).toBeDefined();
    await host.coordinator.stop();
  });
});
