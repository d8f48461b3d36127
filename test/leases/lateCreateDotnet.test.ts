import { describe, expect, it } from 'vitest';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { deleteLease, goneId, leaseIdsOf, markerDocument, namingOf } from '../../src/leases/protocol/index.js';
import { FakePartitions, startHost } from './hosts.js';
import { VirtualScheduler } from './virtualScheduler.js';

const timings = { leaseAcquireIntervalMs: 13_000, leaseRenewIntervalMs: 40_000, leaseExpirationMs: 60_000 };
const ids = leaseIdsOf('p', 'dotnet');

/** A store recording every write that leaves a lease owned, with its epoch. */
function recording(inner: MemoryLeaseStore): { store: LeaseStore; owned: { id: string; owner: string; epoch: number }[] } {
  const owned: { id: string; owner: string; epoch: number }[] = [];
  const note = (l: Lease | undefined): Lease | undefined => {
    if (l?.owner) owned.push({ id: l.id, owner: l.owner, epoch: l.epoch });
    return l;
  };
  return {
    owned,
    store: {
      list: (prefix) => inner.list(prefix),
      read: (id) => inner.read(id),
      createIfAbsent: async (lease) => note(await inner.createIfAbsent(lease)),
      replace: async (lease) => note(await inner.replace(lease))!,
      delete: (lease) => inner.delete(lease),
    },
  };
}

describe("leaseScheme 'dotnet': a lease create that lands after its id was deleted", () => {
  it('is never owned at or below an epoch the lease had: the acquirer deletes it instead of taking it', async () => {
    const clock = new VirtualScheduler(1_700_000_000_000);
    const memory = new MemoryLeaseStore();
    const { store, owned } = recording(memory);
    const parts = new FakePartitions(1);
    const parent = parts.list[0]!;
    const naming = namingOf('p', 'dotnet', 'a', 'latestVersion', () => clock.now());
    await memory.createIfAbsent(markerDocument(naming, 'p.info'));
    const lease = (epoch: number, token: string, range = parent.range): NewLease => ({
      id: `${ids.prefix}${token}`, leaseToken: token, feedRange: range, owner: null, continuation: 'pos-5', timestampMs: clock.now(), epoch, mode: 'latestVersion', properties: {},
    });
    // Partition 0, read up to epoch 5, split: its children were created (at 6) and it was deleted (plainly: .NET
    // reads every document under p.. as a lease), leaving its epoch in its record outside the .NET prefix.
    const [one, two] = parts.split('0');
    for (const child of parts.list) await memory.createIfAbsent(lease(6, child.id, child.range));
    const stale = (await memory.createIfAbsent({ ...lease(5, '0'), owner: 'a' }))!;
    await deleteLease(memory, ids, stale);
    expect(await memory.read(`${ids.prefix}0`)).toBeUndefined();
    expect((await memory.read(goneId(ids, '0')))?.epoch).toBe(5);
    expect((await memory.list(ids.prefix)).leases.map((l) => l.id).sort()).toEqual([`p..${one}`, `p..${two}`]);
    // The create a paused host sent before (a split child of partition 0's own parent, at 3) lands now.
    expect(await memory.createIfAbsent(lease(3, '0'))).toBeDefined();

    const host = startHost('b', store, clock, parts.listPartitions, { ...timings, prefix: 'p', leaseScheme: 'dotnet' });
    await clock.advance(60_000);
    // Partition 0's range is its children's: they are owned; the late lease is gone and was never owned at or
    // below 5 (an epoch its former owner held, or below it: two ownerships of one range sharing an epoch).
    expect(owned.filter((o) => o.id === `${ids.prefix}0`)).toEqual([]);
    expect(await memory.read(`${ids.prefix}0`)).toBeUndefined();
    expect(host.coordinator.owned().map((o) => o.lease.leaseToken).sort()).toEqual([one, two].sort());
    await host.coordinator.stop();
  });

  it("leaves the record outside the .NET processor's listing (STARTSWITH(c.id, '<prefix>..'))", async () => {
    const memory = new MemoryLeaseStore();
    const created = (await memory.createIfAbsent({ id: 'p..0', leaseToken: '0', feedRange: undefined, owner: null, continuation: null, timestampMs: 0, epoch: 4, mode: 'latestVersion', properties: {} }))!;
    await deleteLease(memory, ids, created);
    expect(memory.snapshot().map((l) => l.id)).toEqual(['p.gone.0']);
    expect(memory.snapshot().filter((l) => l.id.startsWith('p..'))).toEqual([]);
    // Raised, never lowered: a later delete of the same id at a lower epoch keeps the higher one.
    const again = (await memory.createIfAbsent({ ...created, epoch: 2 }))!;
    await deleteLease(memory, ids, again);
    expect((await memory.read('p.gone.0'))?.epoch).toBe(4);
  });
});
