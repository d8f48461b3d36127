import { describe, expect, it } from 'vitest';
import type { Position } from '../../src/core/Partition.js';
import type { LeaseNaming } from '../../src/leases/protocol/index.js';
import { finishReplacement, replaceGoneLease } from '../../src/leases/coordinator/replaceGoneLease.js';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { HANDOFF_AT, HANDOFF_TO, isReplaced, PARENT_LEASE, RELEASED_AT, RELEASED_BY, recordedChildren, REPLACED_AT_EPOCH, REPLACED_BY, REPLACEMENT_CHILDREN, UNTAKEN_AT_EPOCH, withoutSignals } from '../../src/leases/protocol/index.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { raiseFence } from '../../src/deadletter/fence.js';
import { DeadLetterFencedError } from '../../src/errors/DeadLetterFencedError.js';
import { uncoveredParts } from '../../src/leases/coordinator/splitMerge.js';
import { FaultEnv, faultyLeaseStore, VirtualClock } from '../support/faults/index.js';
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

/** Partition 0 split into 1 and 2; a's replacement of lease 0 (epoch 3, pos-5) creates 1 and 2, its delete fails. */
async function staleParent() {
  const store = new MemoryLeaseStore();
  const parts = new FakePartitions(1);
  const grandparent = parts.list[0]!;
  const lease = (await store.createIfAbsent({
    id: 'p.0', leaseToken: '0', feedRange: grandparent.range, owner: 'a', continuation: 'pos-5', timestampMs: 0, epoch: 3, mode: 'latestVersion', properties: {},
  }))!;
  parts.split('0'); // into 1 and 2
  const owned = { current: lease, epoch: 3, leaseToken: '0', partition: grandparent, parentDeleteSent: false };
  await expect(replaceGoneLease({ store: failingDeleteOnce(store), naming: naming('a'), listPartitions: parts.listPartitions }, owned, 'pos-5')).rejects.toThrow(/injected/);
  expect((await store.read('p.1'))!.properties[PARENT_LEASE]).toBe('0');
  return { store, parts, owned };
}

/** `store` whose first delete fails with an injected transient error. */
function failingDeleteOnce(store: LeaseStore): LeaseStore {
  const env = new FaultEnv({ seed: 1, scheduler: new VirtualClock() });
  return faultyLeaseStore(store, { delete: [{ kind: 'transient', count: 1 }] }, env);
}

/**
 * Partition 0 split into two children beside partition 1; lease p.0 (over the children's range) owned by `a`
 * under epoch 1 at pos-5. `two`, `three` and `one` are the children and partition 1.
 */
async function splitBesideNeighbour() {
  const store = new MemoryLeaseStore();
  const parts = new FakePartitions(2);
  const [left, right] = parts.split('0');
  const [two, three, one] = [parts.list.find((p) => p.id === left)!, parts.list.find((p) => p.id === right)!, parts.list.find((p) => p.id === '1')!];
  const lease = (await store.createIfAbsent({ id: 'p.0', leaseToken: '0', feedRange: { minInclusive: two.range.minInclusive, maxExclusive: three.range.maxExclusive }, owner: 'a', continuation: 'pos-5', timestampMs: 0, epoch: 1, mode: 'latestVersion', properties: {} }))!;
  const owned = { current: lease, epoch: 1, leaseToken: '0', partition: { id: '0', range: lease.feedRange! }, parentDeleteSent: false };
  return { store, parts, left, right, two, three, one, lease, owned };
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

  it('a signal left in the parent before its delete (a release notice) is retried; a host that took the parent meanwhile keeps it (suspicion 1)', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    let touch: ((l: Lease) => Promise<void>) | undefined = async (l) => {
      await store.replace({ ...l, properties: { ...l.properties, [RELEASED_BY]: 'c', [RELEASED_AT]: '1' } });
    };
    const touchOnce = async (l: Lease) => {
      const t = touch;
      touch = undefined;
      await t?.(l);
    };
    const racing = { ...ctx('a'), store: withDelete(store, touchOnce) };
    expect(await replaceGoneLease(racing, ownership(lease), 'pos-5')).toMatchObject({ kind: 'replaced' });
    expect(await store.read('p.0')).toBeUndefined();

    const second = await splitParent('pos-5');
    touch = async (l) => {
      await second.store.replace({ ...l, owner: 'b', epoch: l.epoch + 1 }); // b takes the parent over
    };
    const raced = { ...second.ctx('a'), store: withDelete(second.store, touchOnce) };
    expect(await replaceGoneLease(raced, second.ownership(second.lease), 'pos-5')).toEqual({ kind: 'fenced', owner: 'b' });
    expect(await second.store.read('p.0')).toMatchObject({ owner: 'b', epoch: 4 }); // not deleted under b
  });

  it('does not replace the parent while the partitions listed cover only part of its range (suspicion 2)', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const listed = await ctx('a').listPartitions();
    const lagging = { ...ctx('a'), listPartitions: async () => listed.slice(0, 1) }; // the second child is not listed yet
    await expect(replaceGoneLease(lagging, ownership(lease), 'pos-5')).rejects.toThrow(/cover only part of its range/);
    expect(await store.read('p.0')).toMatchObject({ owner: 'a' });
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.0']);
    expect(await replaceGoneLease(ctx('a'), ownership(lease), 'pos-5')).toMatchObject({ kind: 'replaced', children: ['1', '2'] });
  });
});

describe('a retry after its children split again (the simulation, seed 44 of --faults all)', () => {
  it("leaves a child's own children to it: none is created from the grandparent's older checkpoint", async () => {
    // a's first attempt creates 1 and 2 at pos-5; its delete of the parent fails.
    const { store, parts, owned } = await staleParent();
    // b takes child 1 and reads it on to pos-9; then partition 1 splits too (into 3 and 4).
    const child = (await store.read('p.1'))!;
    await store.replace({ ...child, owner: 'b', epoch: 4, continuation: 'pos-9', properties: withoutSignals(child.properties) });
    parts.split('1');

    // a's retry: the partitions listed now are 2, 3 and 4. 3 and 4 are child 1's to replace, from pos-9.
    expect(await replaceGoneLease({ store, naming: naming('a'), listPartitions: parts.listPartitions }, owned, 'pos-5')).toMatchObject({ kind: 'replaced', from: 'pos-5' });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation])).toEqual([
      ['p.1', 'pos-9'],
      ['p.2', 'pos-5'],
    ]);
    const replacedChild = { current: (await store.read('p.1'))!, epoch: 4, leaseToken: '1', partition: { id: '1', range: child.feedRange! }, parentDeleteSent: false };
    expect(await replaceGoneLease({ store, naming: naming('b'), listPartitions: parts.listPartitions }, replacedChild, 'pos-9')).toMatchObject({ kind: 'replaced', children: ['3', '4'], from: 'pos-9' });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation])).toEqual([
      ['p.2', 'pos-5'],
      ['p.3', 'pos-9'],
      ['p.4', 'pos-9'],
    ]);
  });

  it('the parts of a listed partition no such child covers get a lease of their own (a merge), and only those', () => {
    const range = { minInclusive: '', maxExclusive: 'FF' };
    expect(uncoveredParts(range, [])).toEqual([range]);
    expect(uncoveredParts(range, [{ minInclusive: '', maxExclusive: '8000' }])).toEqual([{ minInclusive: '8000', maxExclusive: 'FF' }]);
    expect(uncoveredParts(range, [{ minInclusive: '4000', maxExclusive: '8000' }, { minInclusive: '', maxExclusive: '2000' }])).toEqual([
      { minInclusive: '2000', maxExclusive: '4000' },
      { minInclusive: '8000', maxExclusive: 'FF' },
    ]);
    expect(uncoveredParts(range, [{ minInclusive: '', maxExclusive: '8000' }, { minInclusive: '8000', maxExclusive: 'FF' }])).toEqual([]);
  });
});

describe("a parent whose delete never landed, beside its child (the simulation, seeds 9 and 226 of issue 25's fault sets)", () => {
  it("the parent's replacement leaves a grandchild its child created untaken where the child stood (seed 226)", async () => {
    const { store, parts } = await staleParent();
    // b takes child 1 (created at epoch 4, taken at 5) and reads it on to pos-9; partition 1 splits (into 3
    // and 4), and b replaces lease 1 by 3 and 4 at pos-9 (at epoch 6, untaken), then deletes it.
    const child = (await store.read('p.1'))!;
    const taken = await store.replace({ ...child, owner: 'b', epoch: 5, continuation: 'pos-9', properties: withoutSignals(child.properties) });
    parts.split('1');
    const ownedChild = { current: taken, epoch: 5, leaseToken: '1', partition: { id: '1', range: child.feedRange! }, parentDeleteSent: false };
    expect(await replaceGoneLease({ store, naming: naming('b'), listPartitions: parts.listPartitions }, ownedChild, 'pos-9')).toMatchObject({ kind: 'replaced', children: ['3', '4'] });
    expect((await store.read('p.3'))!.properties).toEqual({ [UNTAKEN_AT_EPOCH]: '6', [PARENT_LEASE]: '1' }); // its own creator, no mark of 1's
    // The parent (marked at 3, its delete never landed) was released twice by an admin meanwhile: free at
    // epoch 5, still marked. c finishes its replacement, creating children at 6: the grandchildren's epoch.
    // It must not move them back to the parent's pos-5: they are lease 1's children, not its own. It reports
    // the children the mark recorded (1 and 2); lease 1's range is lease 1's children's already.
    const parent = await store.replace({ ...(await store.read('p.0'))!, owner: null, epoch: 5 });
    expect(await finishReplacement({ store, naming: naming('c'), listPartitions: parts.listPartitions }, parent)).toEqual(['1', '2']);
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation])).toEqual([
      ['p.2', 'pos-5'],
      ['p.3', 'pos-9'],
      ['p.4', 'pos-9'],
    ]);
  });

  it("a child's replacement does not take its parent of the same range (an EPK lease) for a descendant of its own (seed 9)", async () => {
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(1);
    parts.split('0'); // into 1 ('' to 8000) and 2
    const one = parts.list.find((p) => p.id === '1')!;
    // An EPK lease over exactly partition 1's range (the part of a merged partition an older lease covered,
    // which a later split made a partition of its own): it is gone, replaced by lease 1; its delete fails.
    const epk = (await store.createIfAbsent({
      id: 'p.-8000', leaseToken: '-8000', feedRange: one.range, owner: 'a', continuation: 'pos-5', timestampMs: 0, epoch: 3, mode: 'latestVersion', properties: {},
    }))!;
    const ownedEpk = { current: epk, epoch: 3, leaseToken: '-8000', partition: { id: '-8000', range: one.range }, parentDeleteSent: false };
    await expect(replaceGoneLease({ store: failingDeleteOnce(store), naming: naming('a'), listPartitions: parts.listPartitions }, ownedEpk, 'pos-5')).rejects.toThrow(/injected/);
    // b takes lease 1, reads on to pos-9; partition 1 splits into 3 and 4.
    const child = (await store.read('p.1'))!;
    const taken = await store.replace({ ...child, owner: 'b', epoch: 5, continuation: 'pos-9', properties: withoutSignals(child.properties) });
    parts.split('1');
    const ownedChild = { current: taken, epoch: 5, leaseToken: '1', partition: one, parentDeleteSent: false };
    expect(await replaceGoneLease({ store, naming: naming('b'), listPartitions: parts.listPartitions }, ownedChild, 'pos-9')).toMatchObject({ kind: 'replaced', children: ['3', '4'] });
    // 3 and 4 start at lease 1's pos-9; the EPK lease (left at pos-5) is no descendant of lease 1 covering them.
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation])).toEqual([
      ['p.-8000', 'pos-5'],
      ['p.3', 'pos-9'],
      ['p.4', 'pos-9'],
    ]);
  });

  it('the same with a parent replaced before replacement marks existed: unmarked, it is told by the child\'s PARENT_LEASE alone (seed 9)', async () => {
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(1);
    parts.split('0'); // into 1 ('' to 8000) and 2
    const one = parts.list.find((p) => p.id === '1')!;
    // Left by an earlier version: the EPK parent, never marked, its delete never landed; child 1 (created at the
    // parent's epoch, recording it) taken by b at epoch 4 and read on to pos-9.
    await store.createIfAbsent({ id: 'p.-8000', leaseToken: '-8000', feedRange: one.range, owner: null, continuation: 'pos-5', timestampMs: 0, epoch: 3, mode: 'latestVersion', properties: {} });
    const taken = (await store.createIfAbsent({
      id: 'p.1', leaseToken: '1', feedRange: one.range, owner: 'b', continuation: 'pos-9', timestampMs: 0, epoch: 4, mode: 'latestVersion', properties: { [PARENT_LEASE]: '-8000' },
    }))!;
    parts.split('1');
    const ownedChild = { current: taken, epoch: 4, leaseToken: '1', partition: one, parentDeleteSent: false };
    expect(await replaceGoneLease({ store, naming: naming('b'), listPartitions: parts.listPartitions }, ownedChild, 'pos-9')).toMatchObject({ kind: 'replaced', children: ['3', '4'] });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.continuation, l.properties[PARENT_LEASE]])).toEqual([
      ['p.-8000', 'pos-5', undefined],
      ['p.3', 'pos-9', '1'],
      ['p.4', 'pos-9', '1'],
    ]);
  });
});

describe('the replacement mark (issue 25: a gone parent taken again after its children were created)', () => {
  it('marks the parent at its epoch before any child exists, dropping a handoff request; a mark whose reply was lost is found on the retry', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const asked = await store.replace({ ...lease, properties: { [HANDOFF_TO]: 'b', [HANDOFF_AT]: '1' } });
    const creates: string[] = [];
    const watching: LeaseStore = {
      ...methodsOf(store),
      createIfAbsent: async (l) => {
        const parent = (await store.read('p.0'))!;
        creates.push(`${l.id} after parent marked ${String(isReplaced(parent))}`);
        throw new Error('create failed'); // the first attempt stops after its first create
      },
    };
    const owned = ownership(asked);
    await expect(replaceGoneLease({ ...ctx('a'), store: watching }, owned, 'pos-5')).rejects.toThrow('create failed');
    expect(creates).toEqual(['p.1 after parent marked true']);
    const marked = (await store.read('p.0'))!;
    // The request is void (nobody takes a marked lease); the children are decided with the mark.
    expect(marked.properties).toEqual({ [REPLACED_AT_EPOCH]: '3', [REPLACEMENT_CHILDREN]: '[["1","","8000"],["2","8000","FF"]]' });
    expect(owned.current.etag).toBe(marked.etag); // this ownership's renewals write the marked version on
    // The retry finds the mark in place (as after a lost reply), creates the children one above, deletes the parent.
    expect(await replaceGoneLease(ctx('a'), ownership(marked), 'pos-5')).toMatchObject({ kind: 'replaced', children: ['1', '2'] });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.epoch, l.properties])).toEqual([
      ['p.1', 4, { [UNTAKEN_AT_EPOCH]: '4', [PARENT_LEASE]: '0' }],
      ['p.2', 4, { [UNTAKEN_AT_EPOCH]: '4', [PARENT_LEASE]: '0' }],
    ]);
  });

  it('a host that took the parent before the mark fences the mark: no child is created from the older ownership', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const deposed = ownership(lease);
    await store.replace({ ...lease, owner: 'b', epoch: 4 });
    expect(await replaceGoneLease(ctx('a'), deposed, 'pos-5')).toEqual({ kind: 'fenced', owner: 'b' });
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.0']);
    expect(isReplaced((await store.read('p.0'))!)).toBe(false);
  });

  it("a child over its parent's whole range replaces itself while the marked parent is still listed (seed 209 of --faults all)", async () => {
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(1);
    const range = parts.list[0]!.range;
    // Parent p.0 marked at epoch 17, its delete still pending; its one child p.11, over the same range, taken
    // (epoch 19) and gone in turn: the source lists 11's halves now.
    await store.createIfAbsent({ id: 'p.0', leaseToken: '0', feedRange: range, owner: 'a', continuation: 'pos-5', timestampMs: 0, epoch: 17, mode: 'latestVersion', properties: { [REPLACED_AT_EPOCH]: '17' } });
    const child = (await store.createIfAbsent({ id: 'p.11', leaseToken: '11', feedRange: range, owner: 'b', continuation: 'pos-9', timestampMs: 0, epoch: 19, mode: 'latestVersion', properties: {} }))!;
    parts.list = [{ id: '11', range }];
    const [left, right] = parts.split('11');
    const owned = { current: child, epoch: 19, leaseToken: '11', partition: { id: '11', range }, parentDeleteSent: false };
    // The parent is an ancestor, not a descendant that would have replaced 11's range already: both halves are created.
    expect(await replaceGoneLease({ store, naming: naming('b'), listPartitions: parts.listPartitions }, owned, 'pos-9')).toMatchObject({ kind: 'replaced', children: [left, right] });
    expect((await store.list('p.')).leases.map((l) => [l.id, l.epoch, l.continuation])).toEqual([
      ['p.0', 17, 'pos-5'],
      [`p.${left}`, 20, 'pos-9'],
      [`p.${right}`, 20, 'pos-9'],
    ]);
  });

  it('notes the children on the parent once all exist: a retry or a finisher never creates again a child replaced since (seed 209 of --faults all)', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const owned = ownership(lease);
    await expect(replaceGoneLease({ ...ctx('a'), store: failingDeletes(store, 'delete failed') }, owned, 'pos-5')).rejects.toThrow('delete failed');
    const noted = (await store.read('p.0'))!;
    expect(noted.properties).toEqual({ [REPLACED_AT_EPOCH]: '3', [REPLACEMENT_CHILDREN]: '[["1","","8000"],["2","8000","FF"]]', [REPLACED_BY]: '1,2' });
    // Child 1 is taken, read, gone in turn and replaced by its own children (deleted); its listing lags.
    await store.delete((await store.read('p.1'))!);
    expect(await replaceGoneLease(ctx('a'), owned, 'pos-5')).toMatchObject({ kind: 'replaced' }); // the retry
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.2']);
    // The same for a host finishing it after the owner crashed (a fresh ownership object knows nothing).
    const second = await splitParent('pos-5');
    await expect(replaceGoneLease({ ...second.ctx('a'), store: failingDeletes(second.store, 'crashed') }, second.ownership(second.lease), 'pos-5')).rejects.toThrow('crashed');
    await second.store.delete((await second.store.read('p.1'))!);
    const released = await second.store.replace({ ...(await second.store.read('p.0'))!, owner: null, epoch: 4 });
    expect(await finishReplacement(second.ctx('b'), released)).toEqual(['1', '2']);
    expect((await second.store.list('p.')).leases.map((l) => l.id)).toEqual(['p.2']);
  });

  it('a finisher never creates again a child its listing showed, replaced and deleted before its create would land (sim seed 916)', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    // a marks p.0 replaced and creates children 1 and 2, then crashes before it notes them on the parent (REPLACED_BY).
    const noNote: LeaseStore = { ...methodsOf(store), replace: async (l) => (l.properties[REPLACED_BY] === undefined ? store.replace(l) : Promise.reject(new Error('crashed'))) };
    await expect(replaceGoneLease({ ...ctx('a'), store: noNote }, ownership(lease), 'pos-5')).rejects.toThrow('crashed');
    const released = await store.replace({ ...(await store.read('p.0'))!, owner: null, epoch: 4 });
    expect(released.properties[REPLACED_BY]).toBeUndefined();
    // b finishes p.0 in the round that also takes child 1; right after b's listing, child 1 (b's own) is
    // gone in turn: replaced by its children 3 and 4, then deleted.
    let race: (() => Promise<void>) | undefined = async () => {
      for (const token of ['3', '4']) {
        await store.createIfAbsent({ id: `p.${token}`, leaseToken: token, feedRange: undefined, owner: 'b', continuation: 'pos-9', timestampMs: 0, epoch: 6, mode: 'latestVersion', properties: {} });
      }
      await store.delete((await store.read('p.1'))!);
    };
    const racing: LeaseStore = {
      ...methodsOf(store),
      list: async (prefix) => {
        const listing = await store.list(prefix);
        const r = race;
        race = undefined;
        await r?.();
        return listing;
      },
    };
    expect(await finishReplacement({ ...ctx('b'), store: racing }, released)).toEqual(['1', '2']);
    // Child 1 is not created again from the parent's pos-5 beside its own children.
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.2', 'p.3', 'p.4']);
  });

  it('removes the children it created when a reset deleted the parent meanwhile (raising the epoch floor): hosts then bootstrap again', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    let reset: (() => Promise<void>) | undefined = async () => {
      await store.delete((await store.read('p.0'))!);
      await store.createIfAbsent({ id: 'p..floor', leaseToken: '.floor', feedRange: undefined, owner: null, continuation: null, timestampMs: 0, epoch: 3, mode: undefined, properties: {} });
    };
    const resetting: LeaseStore = {
      ...methodsOf(store),
      createIfAbsent: async (l) => {
        const created = await store.createIfAbsent(l);
        const r = reset;
        reset = undefined;
        await r?.(); // the reset lands right after the first child
        return created;
      },
    };
    expect(await replaceGoneLease({ ...ctx('a'), store: resetting }, ownership(lease), 'pos-5')).toEqual({ kind: 'fenced', owner: undefined });
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p..floor']);
  });

  it("a retry after a child's create whose reply was lost, with a reset since, read through a lagging read, creates no child below the epoch it had (seed 45 of issue 25's fault sets)", async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    let lose = true;
    const losing: LeaseStore = {
      ...methodsOf(store),
      createIfAbsent: async (l) => {
        const created = await store.createIfAbsent(l);
        if (lose) {
          lose = false;
          throw new Error('reply lost'); // the first child landed; its creator does not know
        }
        return created;
      },
    };
    const owned = ownership(lease);
    await expect(replaceGoneLease({ ...ctx('a'), store: losing }, owned, 'pos-5')).rejects.toThrow('reply lost');
    const marked = owned.current;
    expect(isReplaced(marked)).toBe(true);
    // Child 1 is taken (epoch 5), then a reset raises the floor to 5 and deletes every lease.
    const child = (await store.read('p.1'))!;
    await store.replace({ ...child, owner: 'b', epoch: 5, properties: withoutSignals(child.properties) });
    await store.createIfAbsent({ id: 'p..floor', leaseToken: '.floor', feedRange: undefined, owner: null, continuation: null, timestampMs: 0, epoch: 5, mode: undefined, properties: {} });
    for (const l of (await store.list('p.')).leases) if (l.id !== 'p..floor') await store.delete(l);
    // a's reads lag the reset (another writer's deletes show later): it still reads its marked parent.
    const created: string[] = [];
    const lagging = laggingParentRead(store, marked, created);
    const retry = await replaceGoneLease({ ...ctx('a'), store: lagging }, owned, 'pos-5');
    expect(created).toEqual([]); // p.1 again at epoch 4, below the 5 it had, would have its writes refused
    expect(retry).toMatchObject({ kind: 'fenced' });
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p..floor']);
  });

  it('finishing a lease another host finished already, read through a lagging read, reports nothing: the caller does not balance again at once (lease-request-spin, seed 142 of --faults all)', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    await expect(replaceGoneLease({ ...ctx('a'), store: failingDeletes(store, 'crashed') }, ownership(lease), 'pos-5')).rejects.toThrow('crashed');
    const released = await store.replace({ ...(await store.read('p.0'))!, owner: null, epoch: 4 });
    expect(await finishReplacement(ctx('c'), released)).toEqual(['1', '2']); // c finished it: the parent is deleted
    // b's reads lag c's delete (session consistency: another host's writes show later): it still reads the parent.
    const lagging: LeaseStore = { ...methodsOf(store), read: async (id) => (id === 'p.0' ? released : store.read(id)) };
    const deletes: string[] = [];
    const counted: LeaseStore = { ...lagging, delete: async (l) => (deletes.push(l.id), store.delete(l)), tombstone: async (l) => (deletes.push(l.id), store.tombstone(l)) };
    expect(await finishReplacement({ ...ctx('b'), store: counted }, released)).toBeUndefined();
    expect(deletes).toEqual(['p.0']); // its delete found the parent gone
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.1', 'p.2']);
  });

  it("finishing through a lagging read a lease another host finished, whose child was taken and replaced since, creates no child below the epoch it had (epoch-went-back, seed 1062 of --faults all)", async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    await expect(replaceGoneLease({ ...ctx('a'), store: failingCreates(store) }, ownership(lease), 'pos-5')).rejects.toThrow('create failed');
    const released = await store.replace({ ...(await store.read('p.0'))!, owner: null, epoch: 4 }); // marked, no child yet
    expect(await finishReplacement(ctx('c'), released)).toEqual(['1', '2']); // children at epoch 5, the parent deleted
    // Child 1 is taken (epoch 7), split in turn and deleted by its own replacement.
    const child = (await store.read('p.1'))!;
    const taken = await store.replace({ ...child, owner: 'b', epoch: 7, properties: withoutSignals(child.properties) });
    await store.delete(taken);
    // d's reads lag c's delete: it still reads the marked parent, with no child noted on it.
    const created: string[] = [];
    const lagging = laggingParentRead(store, released, created);
    expect(await finishReplacement({ ...ctx('d'), store: lagging }, released)).toBeUndefined();
    expect(created).toEqual([]); // p.1 again at epoch 5, below the 7 it had, would have its writes refused
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.2']);
  });

  it("a child's create that lands after the child was taken, replaced and deleted is refused: the child never comes back below its epoch (epoch-went-back, seeds 434 and 1103 of issue 25's fault sets)", async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    const parts = new FakePartitions(1);
    parts.split('0');
    // a marks the parent and sends the creates of its children, then pauses: they land only when it resumes.
    const paused = pausedCreates(store);
    const zombie = replaceGoneLease({ ...ctx('a'), store: paused.store }, ownership(lease), 'pos-5');
    await paused.held();
    // Meanwhile (a's lease expired) b finishes the replacement: the children at epoch 4, the parent deleted.
    const marked = (await store.read('p.0'))!;
    expect(isReplaced(marked)).toBe(true);
    expect(await finishReplacement(ctx('b'), marked)).toEqual(['1', '2']);
    // c takes child 1 (epoch 5) and reads it on; partition 1 splits in turn and c replaces it: child 1 is deleted.
    const child = (await store.read('p.1'))!;
    const taken = await store.replace({ ...child, owner: 'c', epoch: 5, continuation: 'pos-9', properties: withoutSignals(child.properties) });
    parts.split('1');
    const grandParts = { store, naming: naming('c'), listPartitions: async () => (await parts.listPartitions()).filter((p) => p.id !== '2') };
    const owned = { current: taken, epoch: 5, leaseToken: '1', partition: { id: '1', range: child.feedRange! }, parentDeleteSent: false };
    expect(await replaceGoneLease(grandParts, owned, 'pos-9')).toMatchObject({ kind: 'replaced', children: ['3', '4'] });
    expect(await store.read('p.1')).toBeUndefined();
    // a resumes: its create of child 1 (epoch 4, from pos-5) lands now. Refused: the id had epoch 5.
    await paused.resumeUntil(zombie);
    expect(await store.read('p.1')).toBeUndefined();
    expect((await store.list('p.')).leases.map((l) => [l.id, l.epoch, l.continuation])).toEqual([
      ['p.2', 4, 'pos-5'],
      ['p.3', 6, 'pos-9'],
      ['p.4', 6, 'pos-9'],
    ]);
  });

  it("one gone parent gets one set of children: a host finishing it creates the children the mark recorded, not those of its own newer listing (deposed-view-write-accepted, seed 434 of issue 25's fault sets)", async () => {
    // Partition 0 split into 2 and 3; lease p.0 owned by `a` under epoch 1.
    const { store, parts, left, right, two, three, one, owned } = await splitBesideNeighbour();
    const ctx = (owner: string) => ({ store, naming: naming(owner), listPartitions: parts.listPartitions });
    // a lists 2 and 3, marks the parent and sends the creates of its children, then pauses: they land only when it resumes.
    const paused = pausedCreates(store);
    const zombie = replaceGoneLease({ ...ctx('a'), store: paused.store }, owned, 'pos-5');
    await paused.held();
    // Meanwhile partition 3 merges with 1 (into 4), and a's lease expires: b finishes the replacement with a
    // listing that shows 2 and 4. From that listing it would create an EPK lease for 3's range beside a's lease 3.
    parts.list = [two, { id: '4', range: { minInclusive: three.range.minInclusive, maxExclusive: one.range.maxExclusive }, parents: [right, '1'] }];
    const marked = (await store.read('p.0'))!;
    expect(isReplaced(marked)).toBe(true);
    expect(await finishReplacement(ctx('b'), marked)).toEqual([left, right]);
    // a resumes: its creates find the children b created.
    await paused.resumeUntil(zombie);
    expect((await store.list('p.')).leases.map((l) => [l.id, l.epoch, l.continuation, l.properties[PARENT_LEASE]])).toEqual([
      [`p.${left}`, 2, 'pos-5', '0'],
      [`p.${right}`, 2, 'pos-5', '0'], // one lease for 3's range: its own replacement gives the merged part its EPK lease
    ]);
  });

  it("the owner's retry creates the children its mark recorded, whatever its listing shows since (a merge after the mark)", async () => {
    const { store, parts, left, right, two, three, one, owned } = await splitBesideNeighbour();
    await expect(replaceGoneLease({ store: failingCreates(store), naming: naming('a'), listPartitions: parts.listPartitions }, owned, 'pos-5')).rejects.toThrow('create failed');
    expect(recordedChildren(owned.current)).toEqual([
      { token: left, range: two.range },
      { token: right, range: three.range },
    ]);
    parts.list = [two, { id: '4', range: { minInclusive: three.range.minInclusive, maxExclusive: one.range.maxExclusive }, parents: [right, '1'] }];
    expect(await replaceGoneLease({ store, naming: naming('a'), listPartitions: parts.listPartitions }, owned, 'pos-5')).toMatchObject({ kind: 'replaced', children: [left, right] });
    expect((await store.list('p.')).leases.map((l) => l.id)).toEqual([`p.${left}`, `p.${right}`]);
  });

  it('a mark recording no children, or children that are unreadable or do not cover its range (marked before the property, or written by hand), leaves them to the listing', async () => {
    for (const recorded of [undefined, 'not json', '[["1","","4000"]]', '[["","","FF"]]', '[]']) {
      const { store, lease, ctx } = await splitParent('pos-5');
      const marked = await store.replace({ ...lease, owner: null, properties: { [REPLACED_AT_EPOCH]: '3', ...(recorded === undefined ? {} : { [REPLACEMENT_CHILDREN]: recorded }) } });
      expect(await finishReplacement(ctx('b'), marked)).toEqual(['1', '2']);
      expect((await store.list('p.')).leases.map((l) => l.id)).toEqual(['p.1', 'p.2']);
    }
  });

  it('finishing leaves alone a marked lease its owner wrote since it was listed (alive after all), and one not marked', async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    await expect(replaceGoneLease({ ...ctx('a'), store: failingCreates(store) }, ownership(lease), 'pos-5')).rejects.toThrow('create failed');
    const listed = (await store.read('p.0'))!;
    const renewed = await store.replace({ ...listed, timestampMs: 2_000 }); // a's renewal, after b listed it
    expect(await finishReplacement(ctx('b'), listed)).toBeUndefined();
    expect(await store.read('p.0')).toEqual(renewed);
    const unmarked = await splitParent('pos-5');
    expect(await finishReplacement(unmarked.ctx('b'), unmarked.lease)).toBeUndefined();
    expect((await unmarked.store.list('p.')).leases.map((l) => l.id)).toEqual(['p.0']);
  });
});

describe('split children and fencing by key range (decided design 5)', () => {
  it("a child's first epoch is above its parent's: a store fencing by key range refuses the deposed parent's late write", async () => {
    const { store, lease, ctx, ownership } = await splitParent('pos-5');
    await replaceGoneLease(ctx('a'), ownership(lease), 'pos-5');
    const child = (await store.read('p.1'))!;
    expect(child).toMatchObject({ owner: null, epoch: lease.epoch + 1 }); // created untaken one above the parent's epoch…
    const taken = child.epoch + 1; // …and every take raises it: the first owner writes above the parent
    let fences = raiseFence([], { leaseToken: '0', range: lease.feedRange, epoch: lease.epoch });
    fences = raiseFence(fences, { leaseToken: '1', range: child.feedRange, epoch: taken });
    expect(() => raiseFence(fences, { leaseToken: '0', range: lease.feedRange, epoch: lease.epoch })).toThrow(DeadLetterFencedError);
  });
});

/** `store`'s methods, bound (to override one of them). */
function methodsOf(store: LeaseStore): LeaseStore {
  return {
    list: (p) => store.list(p),
    read: (id) => store.read(id),
    createIfAbsent: (l) => store.createIfAbsent(l),
    replace: (l) => store.replace(l),
    delete: (l) => store.delete(l),
    ...(store.tombstone ? { tombstone: (l: Lease) => store.tombstone!(l) } : {}),
  };
}

/** `store` without tombstones, whose `delete` first runs `before` (another writer racing it). */
function withDelete(store: MemoryLeaseStore, before: (lease: Lease) => Promise<void>): LeaseStore {
  const { list, read, createIfAbsent, replace } = methodsOf(store);
  return {
    list,
    read,
    createIfAbsent,
    replace,
    delete: async (l) => {
      await before(l);
      return store.delete(l);
    },
  };
}

/** `store` whose creates all fail with 'create failed'. */
function failingCreates(store: LeaseStore): LeaseStore {
  return { ...methodsOf(store), createIfAbsent: async () => Promise.reject(new Error('create failed')) };
}

/** `store` whose deletes (and tombstones) all fail with `message`. */
function failingDeletes(store: LeaseStore, message: string): LeaseStore {
  return { ...methodsOf(store), delete: async () => Promise.reject(new Error(message)), tombstone: async () => Promise.reject(new Error(message)) };
}

/** `store` whose reads of p.0 still answer `parent` (they lag another host's writes), noting each lease it creates (`id@epoch`) in `created`. */
function laggingParentRead(store: LeaseStore, parent: Lease, created: string[]): LeaseStore {
  return {
    ...methodsOf(store),
    read: async (id) => (id === 'p.0' ? parent : store.read(id)),
    createIfAbsent: async (l) => {
      const made = await store.createIfAbsent(l);
      if (made) created.push(`${made.id}@${made.epoch}`);
      return made;
    },
  };
}

/**
 * `store` whose creates are held until resumed (a host paused after sending them): `held()` waits until one is,
 * `resumeUntil(work)` lets every held create land, again and again, until `work` settles.
 */
function pausedCreates(inner: LeaseStore) {
  const held: (() => void)[] = [];
  const store: LeaseStore = {
    ...methodsOf(inner),
    createIfAbsent: async (l) => {
      await new Promise<void>((resume) => held.push(resume));
      return inner.createIfAbsent(l);
    },
  };
  return {
    store,
    held: async (): Promise<void> => {
      while (held.length === 0) await new Promise((r) => setImmediate(r));
    },
    resumeUntil: async (work: Promise<unknown>): Promise<void> => {
      for (const resume of held.splice(0)) resume();
      while (true) {
        const settled = await Promise.race([work.then(() => true, () => true), new Promise<false>((r) => setImmediate(() => r(false)))]);
        for (const resume of held.splice(0)) resume();
        if (settled) break;
      }
    },
  };
}
