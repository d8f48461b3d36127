import { describe, expect, it } from 'vitest';
import type { Position } from '../../src/core/Partition.js';
import type { LeaseNaming } from '../../src/leases/coordinator/leaseDocuments.js';
import { replaceGoneLease } from '../../src/leases/coordinator/replaceGoneLease.js';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { UNTAKEN_AT_EPOCH, withoutSignals } from '../../src/leases/balancing.js';
import { FakePartitions } from './hosts.js';

const naming = (owner: string): LeaseNaming => ({ prefix: 'p.', markerPrefix: 'p.', scheme: 'rxfeed', owner, mode: 'latestVersion', now: () => 1_000 });

/** Partition 0 split into 1 and 2; lease p.0 owned by `a` under epoch 3 at `checkpoint`. */
async function splitParent(checkpoint: Position) {
  const store = new MemoryLeaseStore();
  const parts = new FakePartitions(1);
  const parent = parts.list[0]!;
  parts.split('0');
  const lease = (await store.createIfAbsent({
    id: 'p.0',
    leaseToken: '0',
    feedRange: parent.range,
    owner: 'a',
    continuation: checkpoint,
    timestampMs: 0,
    epoch: 3,
    mode: 'latestVersion',
    properties: {},
  }))!;
  const ctx = (owner: string) => ({ store, naming: naming(owner), listPartitions: parts.listPartitions });
  const ownership = (current: Lease) => ({ current, epoch: current.epoch, leaseToken: '0', partition: parent, parentDeleteSent: false });
  return { store, lease, ctx, ownership };
}

describe('replaceGoneLease', () => {
  it('creates the children at the parent stored checkpoint and deletes the parent', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const owned = ownership(lease);
    expect(await replaceGoneLease(ctx('a'), owned, 'pos-4')).toEqual({ kind: 'replaced', children: ['1', '2'], from: 'pos-5' });
    expect(owned.parentDeleteSent).toBe(true);
    expect(await store.read('p.0')).toBeUndefined();
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation, l.owner])).toEqual([
      ['p.1', 'pos-5', null],
      ['p.2', 'pos-5', null],
    ]);
    // A retry after its own delete (whose reply was lost) finds the parent gone and the children in place.
    expect(await replaceGoneLease(ctx('a'), owned, 'pos-4')).toMatchObject({ kind: 'replaced', children: ['1', '2'] });
  });

  it("moves a child an earlier attempt left forward, but never one a host took since (released or not)", async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    // An attempt by the parent's owner at epoch 3 created the children at pos-5; the parent was taken (and
    // read on to pos-9, epoch 5) before that attempt's delete landed.
    for (const p of await ctx('a').listPartitions()) {
      await store.createIfAbsent({ id: `p.${p.id}`, leaseToken: p.id, feedRange: p.range, owner: null, continuation: 'pos-5', timestampMs: 0, epoch: 3, mode: 'latestVersion', properties: { [UNTAKEN_AT_EPOCH]: '3' } });
    }
    const parent = await store.replace({ ...lease, owner: 'b', epoch: 5, continuation: 'pos-9' });
    // Child 1 was taken (epoch 4), read on to pos-12, then released: no owner again, epoch below the parent's.
    const child = (await store.read('p.1'))!;
    const taken = await store.replace({ ...child, owner: 'c', epoch: 4, continuation: 'pos-12', properties: withoutSignals(child.properties) });
    await store.replace({ ...taken, owner: null });

    expect(await replaceGoneLease(ctx('b'), ownership(parent), 'pos-9')).toMatchObject({ kind: 'replaced', from: 'pos-9' });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation])).toEqual([
      ['p.1', 'pos-12'], // taken since: never moved back
      ['p.2', 'pos-9'], // never taken: starts where the parent stands now
    ]);
  });

  it('is fenced when another owner already replaced the lease: no children from the older view', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const deposed = ownership(lease); // `a`'s view, from before `b` took the lease
    const taken = await store.replace({ ...lease, owner: 'b', epoch: 4, continuation: 'pos-9' });
    expect(await replaceGoneLease(ctx('b'), ownership(taken), 'pos-9')).toMatchObject({ kind: 'replaced', from: 'pos-9' });
    const child = (await store.read('p.1'))!;
    await store.replace({ ...child, owner: 'c', epoch: child.epoch + 1, continuation: 'pos-12' }); // a child moves on

    expect(await replaceGoneLease(ctx('a'), deposed, 'pos-5')).toEqual({ kind: 'fenced', owner: undefined });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation])).toEqual([
      ['p.1', 'pos-12'],
      ['p.2', 'pos-9'],
    ]);
  });
});
