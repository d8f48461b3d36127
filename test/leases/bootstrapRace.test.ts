/**
 * A bootstrap that takes the lock a moment after another host's bootstrap finished (between its `.info` read
 * and its lock) must see the leases that one created: listed before its lock, it created leases for its own
 * listing of the partitions beside them (seed 43 of `--faults all --policy halt`: a gone parent beside its
 * children, the parent then read above their epoch).
 */
import { describe, expect, it } from 'vitest';
import type { Partition } from '../../src/core/Partition.js';
import { bootstrapLeases, type BootstrapContext } from '../../src/leases/coordinator/bootstrap.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { NewLease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { infoId, leaseDocument, lockId, markerDocument, namingOf } from '../../src/leases/protocol/index.js';

const WHOLE = { minInclusive: '', maxExclusive: 'FF' };
const parent: Partition = { id: '2', range: WHOLE };
const children: Partition[] = [
  { id: '3', range: { minInclusive: '', maxExclusive: '7F' }, parents: ['2'] },
  { id: '4', range: { minInclusive: '7F', maxExclusive: 'FF' }, parents: ['2'] },
];

describe('bootstrap after another host just finished one', () => {
  it('lists the leases once its lock is taken: the other host\'s leases cover its partitions, it creates none', async () => {
    const inner = new MemoryLeaseStore();
    const naming = (owner: string) => namingOf('p.', 'rxfeed', owner, 'latestVersion', () => 1_000);
    const a = naming('a');
    let finished = false;
    /** Host a's bootstrap (a stale listing: the parent only) lands while host b's lock create is on its way. */
    const finishA = async () => {
      if (finished) return;
      finished = true;
      await inner.createIfAbsent(markerDocument(a, lockId(a.markerPrefix)));
      await inner.createIfAbsent(leaseDocument(a, parent.id, parent.range, null, {}, 1, 'a'));
      await inner.createIfAbsent(markerDocument(a, infoId(a.markerPrefix)));
      await inner.delete((await inner.read(lockId(a.markerPrefix)))!);
    };
    const store: LeaseStore = {
      list: (prefix) => inner.list(prefix),
      read: (id) => inner.read(id),
      replace: (lease) => inner.replace(lease),
      delete: (lease) => inner.delete(lease),
      createIfAbsent: async (lease: NewLease) => {
        if (lease.id === lockId(a.markerPrefix)) await finishA();
        return inner.createIfAbsent(lease);
      },
    };
    const ctx: BootstrapContext = {
      store,
      naming: naming('b'),
      expirationMs: 1_000,
      retryMs: 10,
      listPartitions: async () => children,
      stopped: () => false,
      delay: async () => undefined,
      log: Object.assign(() => undefined, { enabled: false }) as unknown as BootstrapContext['log'],
      warn: () => undefined,
      claim: 1,
      clock: () => 0,
      background: () => undefined,
    };
    const result = await bootstrapLeases(ctx);
    expect(result.created).toEqual([]);
    const tokens = (await inner.list('p.')).leases.map((l) => l.leaseToken).filter((t) => !t.startsWith('.'));
    expect(tokens).toEqual(['2']);
  });
});

describe('a bootstrap lock judged by a host whose wall clock runs ahead', () => {
  it('is waited on for an expiration of this host\'s monotonic clock, not removed because its timestamp looks old (seed 338 of --faults all)', async () => {
    const inner = new MemoryLeaseStore();
    // Host a's wall clock reads 0, host b's 10 s ahead: a's lock, just created, looks 10 s old to b.
    const a = namingOf('p.', 'rxfeed', 'a', 'latestVersion', () => 0);
    const b = namingOf('p.', 'rxfeed', 'b', 'latestVersion', () => 10_000);
    await inner.createIfAbsent(markerDocument(a, lockId(a.markerPrefix)));
    let local = 0; // b's monotonic clock
    let aFinished = false;
    /** Host a's bootstrap finishes half an expiration later (on b's clock): its lease, `.info`, its lock removed. */
    const advance = async (ms: number) => {
      local += ms;
      if (local >= 500 && !aFinished) {
        aFinished = true;
        await inner.createIfAbsent(leaseDocument(a, parent.id, parent.range, null, {}, 1, 'a'));
        await inner.createIfAbsent(markerDocument(a, infoId(a.markerPrefix)));
        await inner.delete((await inner.read(lockId(a.markerPrefix)))!);
      }
    };
    const deletedByB: string[] = [];
    const store: LeaseStore = {
      list: (prefix) => inner.list(prefix),
      read: (id) => inner.read(id),
      replace: (lease) => inner.replace(lease),
      delete: async (lease) => {
        deletedByB.push(lease.id);
        await inner.delete(lease);
      },
      createIfAbsent: (lease: NewLease) => inner.createIfAbsent(lease),
    };
    const ctx: BootstrapContext = {
      store,
      naming: b,
      expirationMs: 1_000,
      retryMs: 100,
      // b's listing lags a split a's bootstrap saw: a lease of its own would be a gone parent's beside children.
      listPartitions: async () => [parent],
      stopped: () => false,
      delay: advance,
      log: Object.assign(() => undefined, { enabled: false }) as unknown as BootstrapContext['log'],
      warn: () => undefined,
      claim: 1,
      clock: () => local,
      background: () => undefined,
    };
    const result = await bootstrapLeases(ctx);
    expect(result.created).toEqual([]);
    expect(deletedByB).toEqual([]);
    expect(aFinished).toBe(true);
  });
});
