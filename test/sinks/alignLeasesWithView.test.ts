import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { LeaseConflictError } from '../../src/errors/LeaseConflictError.js';
import type { NewLease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import { alignLeasesWithView } from '../../src/sinks/alignLeasesWithView.js';
import { withReplace } from '../support/replacing.js';

const newLease = (token: string, continuation: string | null): NewLease => ({
  id: `view.${token}`,
  leaseToken: token,
  feedRange: undefined,
  owner: null,
  continuation,
  timestampMs: 0,
  epoch: 1,
  mode: 'latestVersion',
  properties: {},
});

async function setup() {
  const leases = new MemoryLeaseStore();
  for (const [token, continuation] of [
    ['0', 'p0@2'],
    ['1', null],
    ['2', 'p2@9'],
  ] as const) {
    await leases.createIfAbsent(newLease(token, continuation));
  }
  const view = new MemoryViewStore<{ n: number }>();
  // The view committed further than the lease checkpoints of 0 and 1, exactly as far as 2, and saw '9' (a split parent).
  await view.write({
    mode: 'exactlyOnce',
    changes: [{ key: 'a', row: { n: 1 }, lsn: 5, timestampMs: 0, partition: '0' }],
    partitions: [
      { partition: '0', epoch: 1, position: 'p0@5', lsn: 5 },
      { partition: '1', epoch: 1, position: 'p1@3', lsn: undefined },
      { partition: '2', epoch: 1, position: 'p2@9', lsn: undefined },
      { partition: '9', epoch: 1, position: 'p9@1', lsn: undefined },
    ],
  });
  return { leases, view };
}

describe('alignLeasesWithView', () => {
  it("moves lease positions to the view's so an exactly-once view resumes where it committed", async () => {
    const { leases, view } = await setup();
    const moved = await alignLeasesWithView(view, leases, { prefix: 'view.' });
    expect(moved).toEqual([
      { leaseToken: '0', from: 'p0@2', to: 'p0@5' },
      { leaseToken: '1', from: null, to: 'p1@3' },
    ]);
    const listed = (await leases.list('view.')).leases;
    expect(Object.fromEntries(listed.map((l) => [l.leaseToken, l.continuation]))).toEqual({ '0': 'p0@5', '1': 'p1@3', '2': 'p2@9' });
    // Idempotent.
    expect(await alignLeasesWithView(view, leases, { prefix: 'view.' })).toEqual([]);
  });

  it("moves a split child the view has no position for to its nearest ancestor's position", async () => {
    const leases = new MemoryLeaseStore();
    const child = (token: string, minInclusive: string, maxExclusive: string, continuation: string | null) =>
      leases.createIfAbsent({ ...newLease(token, continuation), feedRange: { minInclusive, maxExclusive } });
    const view = new MemoryViewStore<{ n: number }>();
    const commit = (partition: string, minInclusive: string, maxExclusive: string, lsn: number, epoch: number) =>
      view.write({
        mode: 'exactlyOnce',
        changes: [],
        partitions: [{ partition, epoch, position: `${partition}@${lsn}`, lsn, range: { minInclusive, maxExclusive } }],
      });
    // Grandparent G [,FF) and parent P [,80) committed (each child taken one epoch above its parent); P split into
    // L [,40) and R [40,80) from P's older lease checkpoint.
    await commit('G', '', 'FF', 10, 1);
    await commit('P', '', '80', 20, 2);
    await commit('S', '80', 'FF', 15, 2);
    await child('L', '', '40', 'P@12');
    await child('R', '40', '80', 'P@12');
    await child('X', '', 'FF', null); // reaches past P: only G contains it
    await child('S', '80', 'FF', 'S@15'); // has its own position, already there
    const moved = await alignLeasesWithView(view, leases, { prefix: 'view.' });
    expect(moved).toEqual([
      { leaseToken: 'L', from: 'P@12', to: 'P@20' },
      { leaseToken: 'R', from: 'P@12', to: 'P@20' },
      { leaseToken: 'X', from: null, to: 'G@10' },
    ]);
  });

  it('re-reads a lease another host replaced meanwhile, and gives up after the attempts', async () => {
    const { leases, view } = await setup();
    let conflicts = 1;
    const racing = (store: LeaseStore): LeaseStore =>
      withReplace(store, async (lease, replace) => {
        if (conflicts-- > 0) throw new LeaseConflictError(lease.id, 'changed');
        return replace(lease);
      });
    expect((await alignLeasesWithView(view, racing(leases), { prefix: 'view.' })).map((m) => m.leaseToken)).toEqual(['0', '1']);

    conflicts = 10;
    const fresh = await setup();
    await expect(alignLeasesWithView(fresh.view, racing(fresh.leases), { prefix: 'view.', attempts: 2 })).rejects.toBeInstanceOf(
      LeaseConflictError,
    );
  });

  it("leaves alone the leases of a processor whose prefix begins with this one's", async () => {
    const { leases, view } = await setup();
    // Another processor, 'view.v2.', shares the lease container: its lease of partition 0 lists under 'view.'.
    await leases.createIfAbsent({ ...newLease('0', 'other@1'), id: 'view.v2.0' });
    await alignLeasesWithView(view, leases, { prefix: 'view.' });
    expect((await leases.read('view.v2.0'))?.continuation).toBe('other@1');
    expect((await leases.read('view.0'))?.continuation).toBe('p0@5');
  });

  it("aligns the leases of a processor in the .NET layout (leaseScheme 'dotnet': <prefix>..<token>)", async () => {
    const leases = new MemoryLeaseStore();
    const prefix = 'acct_db_coll';
    await leases.createIfAbsent({ ...newLease('0', 'p0@2'), id: `${prefix}..0` });
    await leases.createIfAbsent({ ...newLease('', null), id: `${prefix}.info` });
    const view = new MemoryViewStore<{ n: number }>();
    await view.write({ mode: 'exactlyOnce', changes: [], partitions: [{ partition: '0', epoch: 1, position: 'p0@5', lsn: 5 }] });
    expect(await alignLeasesWithView(view, leases, { prefix, leaseScheme: 'dotnet' })).toEqual([{ leaseToken: '0', from: 'p0@2', to: 'p0@5' }]);
    expect((await leases.read(`${prefix}..0`))?.continuation).toBe('p0@5');
    await expect(alignLeasesWithView(view, leases, { prefix: 'view.', leaseScheme: 'dotnet' })).rejects.toThrow(/ends with '\.'/);
  });

  it('rejects a missing prefix', async () => {
    const { leases, view } = await setup();
    await expect(alignLeasesWithView(view, leases, {} as never)).rejects.toBeInstanceOf(InvalidOptionsError);
  });
});
