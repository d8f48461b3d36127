/**
 * Hosts whose wall clocks disagree. Lease timestamps and handoff request times are written with the writer's
 * clock; a host judges them only by when it first saw them on its own clock, so skew never gives a lease two
 * live owners, nor makes an owner drop a lease another host asks for.
 */
import { describe, expect, it } from 'vitest';
import type { OwnedLease } from '../../src/leases/LeaseCoordinator.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { FakePartitions, startHost } from './hosts.js';
import { VirtualScheduler } from './virtualScheduler.js';

const live = (o: OwnedLease) => !o.signal.aborted;

describe('clock skew between hosts', () => {
  it.each([
    ['behind', -30_000],
    ['ahead', 30_000],
  ])("a lease never has two live owners (the first host's clock 30 s %s)", async (_how, skewMs) => {
    const timings = { leaseAcquireIntervalMs: 13_000, leaseRenewIntervalMs: 40_000, leaseExpirationMs: 60_000 };
    const clock = new VirtualScheduler(1_700_000_000_000);
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(3);
    const a = startHost('a', store, clock, parts.listPartitions, { ...timings, now: () => clock.now() + skewMs });
    await clock.advance(1_000);
    expect(a.coordinator.owned()).toHaveLength(3);
    const b = startHost('b', store, clock, parts.listPartitions, timings);

    const overlaps: string[] = [];
    for (let t = 0; t < 300; t++) {
      await clock.advance(1_000);
      for (const held of b.acquired.filter(live)) {
        const alsoA = a.acquired.find((o) => o.leaseToken === held.leaseToken && live(o));
        if (alsoA) overlaps.push(`lease ${held.leaseToken}: b at epoch ${held.epoch}, a at epoch ${alsoA.epoch}`);
      }
    }
    expect(overlaps).toEqual([]);
    // And they still share: the skew costs no balancing.
    expect([a.coordinator.owned().length, b.coordinator.owned().length].sort()).toEqual([1, 2]);
    await a.coordinator.stop();
    await b.coordinator.stop();
  });

  it('a requester whose clock runs 8 s behind (twice the expiration) gets its share by handover: the owner never drops a lease at once', async () => {
    const timings = { leaseAcquireIntervalMs: 1_000, leaseRenewIntervalMs: 1_000, leaseExpirationMs: 4_000 };
    const clock = new VirtualScheduler(1_700_000_000_000);
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(2);
    const a = startHost('a', store, clock, parts.listPartitions, timings);
    await clock.advance(1_500);
    const b = startHost('b', store, clock, parts.listPartitions, { ...timings, now: () => clock.now() - 8_000 });
    for (let t = 0; t < 120; t++) await clock.advance(1_000);

    expect(a.events.filter((e) => e.type === 'leaseLost')).toEqual([]);
    expect(a.events.filter((e) => e.type === 'leaseReleased').map((e) => (e as { reason: string }).reason)).toEqual(['Rebalanced']);
    expect(a.coordinator.owned()).toHaveLength(1);
    expect(b.coordinator.owned()).toHaveLength(1);
    await a.coordinator.stop();
    await b.coordinator.stop();
  });
});
