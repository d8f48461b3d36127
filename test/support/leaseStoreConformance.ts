import { describe, expect, it } from 'vitest';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import { LeaseConflictError } from '../../src/errors/LeaseConflictError.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { finishReplacement, replaceGoneLease } from '../../src/leases/coordinator/replaceGoneLease.js';
import { isReplaced, PARENT_LEASE, REPLACED_AT_EPOCH, UNTAKEN_AT_EPOCH, type LeaseNaming } from '../../src/leases/protocol/index.js';

/** `store`'s methods, bound (to spread into a wrapper). */
function bound(store: LeaseStore): LeaseStore {
  return {
    list: (prefix) => store.list(prefix),
    read: (id) => store.read(id),
    createIfAbsent: (lease) => store.createIfAbsent(lease),
    replace: (lease) => store.replace(lease),
    delete: (lease) => store.delete(lease),
    ...(store.tombstone ? { tombstone: (lease: Lease) => store.tombstone!(lease) } : {}),
  };
}

/** What a conformance run needs from the store under test. */
export interface LeaseStoreHarness {
  /** A store; each call may return a new store on the same backing data or an empty one. */
  store: LeaseStore;
  /** Writes a raw, unreadable document under `id` (for stores that can hold one), or `undefined` to skip. */
  writeCorrupt?: (id: string) => Promise<void>;
}

let counter = 0;
/** A fresh prefix per test, so stores may be shared between tests. */
function freshPrefix(): string {
  return `conf${Date.now().toString(36)}${(counter++).toString(36)}.`;
}

function newLease(prefix: string, token: string, extra: Partial<NewLease> = {}): NewLease {
  return {
    id: prefix + token,
    leaseToken: token,
    feedRange: { minInclusive: '', maxExclusive: 'FF' },
    owner: null,
    continuation: null,
    timestampMs: 1_700_000_000_123,
    epoch: 0,
    mode: 'latestVersion',
    properties: { origin: 'test' },
    ...extra,
  };
}

/**
 * The behaviour every {@link LeaseStore} must have, as a vitest suite over a store factory. Run it for each
 * implementation: `leaseStoreConformance('MemoryLeaseStore', async () => ({ store: new MemoryLeaseStore() }))`.
 */
export function leaseStoreConformance(name: string, factory: () => Promise<LeaseStoreHarness>): void {
  describe(`LeaseStore conformance: ${name}`, () => {
    it('creates once, reads back every field, and refuses a second create', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const wanted = newLease(p, '0', { owner: 'a', continuation: 'pos-1', epoch: 3, properties: { k: 'v' } });
      const created = await store.createIfAbsent(wanted);
      expect(created).toBeDefined();
      expect(created!.etag).toEqual(expect.any(String));
      const { etag: _etag, ...fields } = created!;
      expect(fields).toEqual(wanted);
      expect(await store.createIfAbsent(newLease(p, '0', { owner: 'b' }))).toBeUndefined();
      expect(await store.read(p + '0')).toEqual(created);
      expect(await store.read(p + 'missing')).toBeUndefined();
    });

    it('replace is conditional on the etag and returns a new etag', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const first = (await store.createIfAbsent(newLease(p, '0')))!;
      const second = await store.replace({ ...first, owner: 'a', epoch: 1, continuation: 'c1', timestampMs: first.timestampMs + 5 });
      expect(second.etag).not.toBe(first.etag);
      expect(second).toMatchObject({ owner: 'a', epoch: 1, continuation: 'c1', timestampMs: first.timestampMs + 5 });

      const stale = store.replace({ ...first, owner: 'b' });
      await expect(stale).rejects.toBeInstanceOf(LeaseConflictError);
      await expect(stale).rejects.toMatchObject({ kind: 'changed', leaseId: p + '0' });
      expect((await store.read(p + '0'))!.owner).toBe('a');

      const released = await store.replace({ ...second, owner: null });
      expect(released.owner).toBeNull();
    });

    it('exactly one of many concurrent replaces on the same etag wins', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const lease = (await store.createIfAbsent(newLease(p, '0')))!;
      const results = await Promise.allSettled(
        ['a', 'b', 'c', 'd', 'e'].map((owner) => store.replace({ ...lease, owner, epoch: lease.epoch + 1 })),
      );
      const won = results.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<Lease>[];
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LeaseConflictError);
      expect((await store.read(p + '0'))!.owner).toBe(won[0]!.value.owner);
    });

    it('exactly one of many concurrent creates of the same id wins', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const results = await Promise.all(['a', 'b', 'c', 'd'].map((owner) => store.createIfAbsent(newLease(p, '.lock', { owner }))));
      expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    });

    it('delete is conditional on the etag; replace and delete of a missing lease conflict as missing', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const lease = (await store.createIfAbsent(newLease(p, '0')))!;
      const moved = await store.replace({ ...lease, owner: 'a' });
      await expect(store.delete(lease)).rejects.toBeInstanceOf(LeaseConflictError);
      await store.delete(moved);
      expect(await store.read(p + '0')).toBeUndefined();
      await expect(store.replace(moved)).rejects.toMatchObject({ kind: 'missing' });
      await expect(store.delete(moved)).rejects.toMatchObject({ kind: 'missing' });
    });

    it('a tombstone keeps the epoch: a late create below it is refused, one at or above it takes its place', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const first = (await store.createIfAbsent(newLease(p, '3', { epoch: 2 })))!;
      const taken = await store.replace({ ...first, owner: 'a', epoch: 4 });
      // Conditional on the etag, as delete.
      await expect(store.tombstone!(first)).rejects.toBeInstanceOf(LeaseConflictError);
      await store.tombstone!(taken);
      // Gone for every reader, writer and listing.
      expect(await store.read(p + '3')).toBeUndefined();
      expect((await store.list(p)).leases).toEqual([]);
      expect((await store.list(p)).corrupt).toEqual([]);
      await expect(store.replace(taken)).rejects.toBeInstanceOf(LeaseConflictError);
      await expect(store.delete(taken)).rejects.toBeInstanceOf(LeaseConflictError);
      await expect(store.tombstone!(taken)).rejects.toBeInstanceOf(LeaseConflictError);
      // The create a paused host sent before the delete, landing after it: refused, the id stays gone.
      expect(await store.createIfAbsent(newLease(p, '3', { epoch: 2 }))).toBeUndefined();
      expect(await store.createIfAbsent(newLease(p, '3', { epoch: 3, owner: 'b' }))).toBeUndefined();
      expect(await store.read(p + '3')).toBeUndefined();
      // A lease made afresh at the tombstone's epoch or above (a bootstrap above the epoch floor) takes its place,
      // once; the one after it finds a lease.
      const again = await Promise.all(['c', 'd', 'e'].map((owner) => store.createIfAbsent(newLease(p, '3', { epoch: 4, owner }))));
      expect(again.filter((l) => l !== undefined)).toHaveLength(1);
      const back = again.find((l) => l !== undefined)!;
      expect(back).toMatchObject({ id: p + '3', epoch: 4, owner: expect.any(String) });
      expect(await store.read(p + '3')).toEqual(back);
      expect((await store.list(p)).leases).toEqual([back]);
      // Tombstoned again at a higher epoch, the bar rises with it.
      await store.tombstone!((await store.replace({ ...back, epoch: 7 })));
      expect(await store.createIfAbsent(newLease(p, '3', { epoch: 6 }))).toBeUndefined();
      expect(await store.createIfAbsent(newLease(p, '3', { epoch: 8 }))).toMatchObject({ epoch: 8 });
    });

    it('a plain delete leaves no tombstone', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const lock = (await store.createIfAbsent(newLease(p, '.lock', { epoch: 5 })))!;
      await store.delete(lock);
      expect(await store.createIfAbsent(newLease(p, '.lock', { epoch: 0 }))).toMatchObject({ epoch: 0 });
    });

    it('lists only ids under the prefix, sorted by id', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      for (const t of ['2', '0', '10']) await store.createIfAbsent(newLease(p, t));
      await store.createIfAbsent(newLease(`${p}x`, '9')); // another processor whose prefix extends ours
      await store.createIfAbsent(newLease(`other${p}`, '0'));
      const { leases, corrupt } = await store.list(p);
      expect(leases.map((l) => l.id)).toEqual([p + '0', p + '10', p + '2', `${p}x9`]);
      expect(corrupt).toEqual([]);
      expect((await store.list(`nothing-${p}`)).leases).toEqual([]);
    });

    it('keeps leases without feed range or mode, and string properties as given', async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const lease = (await store.createIfAbsent(
        newLease(p, '.info', { feedRange: undefined, mode: undefined, properties: {} }),
      ))!;
      expect(lease.feedRange).toBeUndefined();
      expect(lease.properties).toEqual({});
      const merged = (await store.createIfAbsent(
        newLease(p, '00-7F', { feedRange: { minInclusive: '00', maxExclusive: '7F' }, mode: 'allVersionsAndDeletes' }),
      ))!;
      expect(merged.feedRange).toEqual({ minInclusive: '00', maxExclusive: '7F' });
      expect(merged.mode).toBe('allVersionsAndDeletes');
    });

    it("marks a gone partition's lease replaced before any child exists; the mark fences an acquire, survives a release, and any host finishes it", async () => {
      const { store } = await factory();
      const p = freshPrefix();
      const naming = (owner: string): LeaseNaming => ({ prefix: p, markerPrefix: p, scheme: 'rxfeed', owner, mode: 'latestVersion', now: () => 1_700_000_000_123 });
      const children = [
        { id: 'L', range: { minInclusive: '', maxExclusive: '80' } },
        { id: 'R', range: { minInclusive: '80', maxExclusive: 'FF' } },
      ];
      const listPartitions = async () => children;
      const parent = (await store.createIfAbsent(newLease(p, '0', { owner: 'a', epoch: 3, continuation: 'pos-5' })))!;
      // a marks the parent, then crashes before creating a child (its creates never reach the store).
      const crashing: LeaseStore = { ...bound(store), createIfAbsent: async () => Promise.reject(new Error('crashed')) };
      const owned = { current: parent, epoch: 3, leaseToken: '0', partition: { id: '0', range: parent.feedRange! }, parentDeleteSent: false };
      await expect(replaceGoneLease({ store: crashing, naming: naming('a'), listPartitions }, owned, 'pos-5')).rejects.toThrow('crashed');
      const marked = (await store.read(p + '0'))!;
      expect(isReplaced(marked)).toBe(true);
      expect(marked).toMatchObject({ owner: 'a', epoch: 3, continuation: 'pos-5', properties: { origin: 'test', [REPLACED_AT_EPOCH]: '3' } });
      expect((await store.list(p)).leases.map((l) => l.id)).toEqual([p + '0']);
      // A host that listed the lease before the mark cannot take it: the mark moved its etag.
      await expect(store.replace({ ...parent, owner: 'b', epoch: 4 })).rejects.toBeInstanceOf(LeaseConflictError);
      // Released by an admin (fenced: epoch raised, no owner): still marked, never taken again.
      const released = await store.replace({ ...marked, owner: null, epoch: 4 });
      expect(isReplaced(released)).toBe(true);
      // Any host finishes it: children one above the parent's epoch, untaken, from its checkpoint, without the mark,
      // recording the parent as their creator.
      expect(await finishReplacement({ store, naming: naming('b'), listPartitions }, released)).toEqual(['L', 'R']);
      expect(await store.read(p + '0')).toBeUndefined();
      const created = (await store.list(p)).leases;
      expect(created.map((l) => [l.id, l.owner, l.epoch, l.continuation, l.properties])).toEqual(
        ['L', 'R'].map((t) => [p + t, null, 5, 'pos-5', { origin: 'test', [UNTAKEN_AT_EPOCH]: '5', [PARENT_LEASE]: '0' }]),
      );
      // Finishing again (another host, a retry) finds nothing to do.
      expect(await finishReplacement({ store, naming: naming('c'), listPartitions }, released)).toBeUndefined();
    });

    it('reports unreadable documents under the prefix as corrupt without failing the listing', async (ctx) => {
      const harness = await factory();
      if (!harness.writeCorrupt) {
        ctx.skip(); // this store cannot hold a document that is not a lease
        return;
      }
      const p = freshPrefix();
      await harness.store.createIfAbsent(newLease(p, '0'));
      await harness.writeCorrupt(p + 'bad');
      const { leases, corrupt } = await harness.store.list(p);
      expect(leases.map((l) => l.id)).toEqual([p + '0']);
      expect(corrupt.map((c) => c.documentId)).toEqual([p + 'bad']);
    });
  });
}
