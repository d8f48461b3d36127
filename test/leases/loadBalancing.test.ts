import { describe, expect, it } from 'vitest';
import { planBalance } from '../../src/leases/balancing.js';
import { HANDOFF_AT, HANDOFF_TO, LOAD_PROPERTY, publishedLoad } from '../../src/leases/protocol/index.js';
import type { Lease } from '../../src/leases/Lease.js';
import { planLoadBalance } from '../../src/leases/loadBalancing.js';
import { createLeaseCoordinator } from '../../src/leases/createLeaseCoordinator.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { FakePartitions, startHost } from './hosts.js';
import { VirtualScheduler } from './virtualScheduler.js';

const NOW = 1_000_000;
const EXP = 60_000;

/** One letter per lease = its owner ('-' free, lowercase live, uppercase expired); `loads[i]` published as its load. */
function leases(spec: string, loads: readonly number[] = []): Lease[] {
  return [...spec].map((c, i) => ({
    id: `p.${String(i).padStart(3, '0')}`,
    leaseToken: String(i),
    feedRange: undefined,
    owner: c === '-' ? null : c.toLowerCase(),
    continuation: null,
    timestampMs: c === c.toUpperCase() && c !== '-' ? NOW - EXP - 1 : NOW - 1_000,
    epoch: 1,
    mode: 'latestVersion',
    properties: (loads[i] !== undefined ? { [LOAD_PROPERTY]: String(loads[i]) } : {}) as Record<string, string>,
    etag: '"1"',
  }));
}

const ids = (list: readonly Lease[]) => list.map((l) => l.leaseToken);

describe('planLoadBalance', () => {
  it.each([
    // spec, loads, owner, steal (lease tokens), settled
    ['aaaabbbb', [100, 100, 1, 1, 1, 1, 1, 1], 'b', ['0'], false], // equal counts, a has both hot ones: b takes one
    ['aaaabbbb', [100, 100, 1, 1, 1, 1, 1, 1], 'a', [], false], // a gives, it does not take
    ['aabb', [10, 10, 9, 9], 'b', [], true], // gap below minGain: no churn
    ['aaaaaaab', [50, 1, 1, 1, 1, 1, 1, 1], 'b', ['0'], false], // the hot one goes to b …
    ['aaaaaaab', [50, 1, 1, 1, 1, 1, 1, 1], 'a', ['7'], false], // … and b's cold one to a
    ['aaaabbbbcccc', [90, 90, 90, 90, 1, 1, 1, 1, 1, 1, 1, 1], 'b', ['0'], false], // one hot each to b and c
    ['aaaabbbbcccc', [90, 90, 90, 90, 1, 1, 1, 1, 1, 1, 1, 1], 'c', ['1'], false],
  ])('%s loads %j as %s steals %j', (spec, loads, owner, steal, settled) => {
    const plan = planLoadBalance(leases(spec, loads), owner, NOW, { expirationMs: EXP });
    expect(ids(plan.steal)).toEqual(steal);
    expect(plan.take).toEqual([]);
    expect(plan.settled).toBe(settled);
  });

  it('follows the count rules while something is free, left over or over the maximum, or no load is known', () => {
    for (const [spec, loads, opts] of [
      ['----', [5, 5, 5, 5], {}],
      ['aaB-', [50, 1, 1, 1], {}],
      ['aaaa', [9, 1, 1, 1], { maxLeases: 2 }],
      ['bbbb', [], {}],
    ] as const) {
      const all = leases(spec, loads);
      expect(planLoadBalance(all, 'a', NOW, { expirationMs: EXP, ...opts })).toEqual(planBalance(all, 'a', NOW, { expirationMs: EXP, ...opts }));
    }
  });

  it('never moves a lease to a host at maxLeases', () => {
    expect(planLoadBalance(leases('aaaabb', [90, 90, 1, 1, 1, 1]), 'b', NOW, { expirationMs: EXP, maxLeases: 2 }).steal).toEqual([]);
  });

  it('counts a lease with a pending handoff for the host that asked for it', () => {
    const all = leases('aaaabbbb', [100, 100, 1, 1, 1, 1, 1, 1]);
    all[0] = { ...all[0]!, properties: { ...all[0]!.properties, [HANDOFF_TO]: 'b', [HANDOFF_AT]: String(NOW - 10) } };
    const plan = planLoadBalance(all, 'b', NOW, { expirationMs: EXP });
    expect(plan.steal).toEqual([]); // lease 0 is already on its way to b: nothing more to move
    expect(plan.settled).toBe(false);
  });

  it('every host computes the same moves: carried out together they are disjoint and even the load out', () => {
    const all = leases('aaaaaaaabbbbbbbbcccccccc', [80, 80, 80, 80, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    const moves = ['a', 'b', 'c'].flatMap((h) => planLoadBalance(all, h, NOW, { expirationMs: EXP }).steal.map((l) => [h, l.id] as const));
    expect(new Set(moves.map(([, id]) => id)).size).toBe(moves.length);
    const after = all.map((l) => ({ ...l, owner: moves.find(([, id]) => id === l.id)?.[0] ?? l.owner }));
    const loadOf = (h: string) => after.filter((l) => l.owner === h).reduce((s, l) => s + publishedLoad(l), 0);
    const hostLoads = ['a', 'b', 'c'].map(loadOf);
    expect(Math.max(...hostLoads) / Math.min(...hostLoads)).toBeLessThan(2);
    for (const h of ['a', 'b', 'c']) expect(planLoadBalance(after, h, NOW, { expirationMs: EXP }).steal).toEqual([]);
  });

  it('reads the published load, ignoring what is not a non-negative number', () => {
    expect(publishedLoad(leases('a', [12.5])[0]!)).toBe(12.5);
    for (const bad of ['-3', 'x', 'NaN', 'Infinity']) {
      expect(publishedLoad({ ...leases('a')[0]!, properties: { [LOAD_PROPERTY]: bad } })).toBe(0);
    }
  });
});

describe("createLeaseCoordinator with balanceBy: 'load'", () => {
  const timings = { leaseAcquireIntervalMs: 13_000, leaseRenewIntervalMs: 40_000, leaseExpirationMs: 60_000 };

  it('publishes the reported load on checkpoint and renewal, only in load mode', async () => {
    for (const balanceBy of ['count', 'load'] as const) {
      const clock = new VirtualScheduler();
      const store = new MemoryLeaseStore();
      const host = startHost('a', store, clock, new FakePartitions(1).listPartitions, { ...timings, balanceBy });
      await clock.advance(100);
      const owned = host.acquired[0]!;
      owned.reportLoad?.(12.3456);
      await owned.checkpoint('pos-1');
      expect((await store.read('p.0'))!.properties[LOAD_PROPERTY]).toBe(balanceBy === 'load' ? '12.3' : undefined);
      owned.reportLoad?.(7);
      await clock.advance(timings.leaseRenewIntervalMs + 10); // a renewal carries it too
      expect((await store.read('p.0'))!.properties[LOAD_PROPERTY]).toBe(balanceBy === 'load' ? '7' : undefined);
      await host.coordinator.stop();
    }
  });

  it('moves a hot lease to the host that got only cold ones by count', async () => {
    const clock = new VirtualScheduler();
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(4);
    const a = startHost('a', store, clock, parts.listPartitions, { ...timings, balanceBy: 'load' });
    await clock.advance(100);
    const rates: Record<string, number> = { '0': 100, '1': 100, '2': 1, '3': 1 };
    for (const o of a.acquired) {
      o.reportLoad?.(rates[o.leaseToken]!);
      await o.checkpoint(`pos-${o.leaseToken}`);
    }
    const b = startHost('b', store, clock, parts.listPartitions, { ...timings, balanceBy: 'load' });
    await clock.advance(10 * timings.leaseAcquireIntervalMs);
    const ownerOf = (token: string) => store.snapshot().find((l) => l.leaseToken === token)!.owner;
    expect([ownerOf('0'), ownerOf('1')].sort()).toEqual(['a', 'b']); // one hot lease each
    const count = (h: string) => store.snapshot().filter((l) => l.owner === h && l.leaseToken !== '.info').length;
    expect(count('a') + count('b')).toBe(4);
    await a.coordinator.stop();
    await b.coordinator.stop();
  });

  it("rejects an unknown balanceBy, naming the option", () => {
    expect(() =>
      createLeaseCoordinator({ store: new MemoryLeaseStore(), listPartitions: async () => [], prefix: 'test.', owner: 'a', balanceBy: 'lag' as 'load' }),
    ).toThrow(/balanceBy/);
  });
});
