import { describe, expect, it } from 'vitest';
import { LeaseConflictError } from '../../src/errors/index.js';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { confirmEpochFloor, floorDocument, floorId, leaseIdsOf, readEpochFloor } from '../../src/leases/protocol/index.js';

const now = () => 1_700_000_000_000;

/** A floor raised from 12 to 13 (a reset), and the version at 12 a lagging read still answers. */
async function raisedFloor(scheme: 'dotnet' | 'rxfeed'): Promise<{ store: MemoryLeaseStore; stale: Lease; ids: ReturnType<typeof leaseIdsOf> }> {
  const ids = leaseIdsOf('p', scheme);
  const store = new MemoryLeaseStore();
  const stale = (await store.createIfAbsent(floorDocument(ids, 12, now())))!;
  await store.replace({ ...stale, epoch: 13 });
  return { store, stale, ids };
}

describe('the epoch floor new leases are created at', () => {
  it("dotnet scheme: a read that lags a reset's raise is not used: confirmed by a write, read again", async () => {
    const { store, stale, ids } = await raisedFloor('dotnet');
    expect(await confirmEpochFloor(store, ids, now, stale)).toBe(13);
  });

  it('dotnet scheme: a read that missed the floor altogether is read again', async () => {
    const { store, ids } = await raisedFloor('dotnet');
    expect(await confirmEpochFloor(store, ids, now, undefined)).toBe(13);
  });

  it('dotnet scheme: no floor at all: confirmed by a write that can only answer "missing", leaving no document', async () => {
    const ids = leaseIdsOf('p', 'dotnet');
    const store = new MemoryLeaseStore();
    expect(await confirmEpochFloor(store, ids, now, await readEpochFloor(store, ids))).toBe(0);
    expect(await store.read(floorId('p'))).toBeUndefined();
  });

  it('dotnet scheme: reads that keep lagging fail the round (retried later), never give the old floor', async () => {
    const { store, stale, ids } = await raisedFloor('dotnet');
    const lagging = { ...store, list: store.list.bind(store), read: async () => stale, createIfAbsent: store.createIfAbsent.bind(store), replace: store.replace.bind(store), delete: store.delete.bind(store) };
    await expect(confirmEpochFloor(lagging, ids, now, stale)).rejects.toBeInstanceOf(LeaseConflictError);
  });

  it('rxfeed scheme: the read as it is, no write (a tombstone refuses a create below a deleted epoch)', async () => {
    const { store, stale, ids } = await raisedFloor('rxfeed');
    const before = await store.read(floorId('p'));
    expect(await confirmEpochFloor(store, ids, now, stale)).toBe(12);
    expect(await store.read(floorId('p'))).toEqual(before);
  });
});
