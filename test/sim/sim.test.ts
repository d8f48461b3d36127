import { describe, expect, it } from 'vitest';
import { FOUND_BEING_FIXED } from './found.js';
import { drawVariant, FAULT_SETS, replayLine, runSimulation, type SimConfig } from './simulation.js';

async function expectNoViolations(config: SimConfig): Promise<void> {
  const { violations, stats } = await runSimulation(config);
  if (violations.length > 0) {
    const lines = violations.slice(0, 5).map((v) => `  ${v.invariant} at ${v.atMs} ms: ${v.detail}`);
    throw new Error(`${violations.length} invariant violations (${stats.mode}):\n${lines.join('\n')}\nreplay: ${replayLine(config)}`);
  }
}

const seeds = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('simulation', () => {
  // Hosts crash, pause past expiry and come back as zombies, stop and join; sinks fail (the host restarts)
  // and slow down; writers keep writing. Every invariant must hold throughout and at quiescence.
  for (const seed of seeds(1, 12)) {
    it(`hosts and sink faults, seed ${seed}`, () =>
      expectNoViolations({ seed, faults: ['host', 'sink'], hosts: { min: 2, max: 6 }, onError: 'restart' }));
  }
  // View writes fail, lose their reply or slow down too.
  for (const seed of seeds(1, 6)) {
    it(`hosts, sink and view faults, seed ${seed}`, () =>
      expectNoViolations({ seed, faults: ['host', 'sink', 'view'], hosts: { min: 2, max: 6 }, onError: 'restart' }));
  }
  for (const seed of seeds(1, 2)) {
    it(`no faults, seed ${seed}`, () => expectNoViolations({ seed, faults: [], hosts: { min: 2, max: 6 } }));
  }

  it('replays a seed exactly: same violations, same stats', async () => {
    const config: SimConfig = { seed: 3, faults: ['lease', 'source', 'view', 'host', 'sink'], hosts: { min: 2, max: 6 }, chaosMs: 10_000 };
    const first = await runSimulation(config);
    const second = await runSimulation(config);
    expect(second.violations).toEqual(first.violations);
    expect(second.stats).toEqual(first.stats);
    expect(Object.keys(first.stats.faults).length).toBeGreaterThan(5); // faults of many kinds struck
  });
});

/**
 * Seeds that failed before the reader and coordinator rework, each shrunk to its smallest config
 * (`npm run sim -- --find <invariant> --faults <set>`): regression tests for the bugs they found.
 */
describe('simulation: seeds that found issue-9 bugs', () => {
  const found: { bug: string; config: SimConfig }[] = [
    { bug: 'owned-but-unread after a split (bug 1)', config: { seed: 7, faults: ['source'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    { bug: 'change-never-delivered after retry() (bug 3)', config: { seed: 9, faults: ['view'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    { bug: 'credit-not-returned after a fenced view write (bug 4)', config: { seed: 6, faults: ['lease'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    { bug: 'deposed-view-write-accepted and write-after-takeover-accepted (bugs 5, 11)', config: { seed: 42, faults: ['lease'], hosts: { min: 2, max: 2 }, chaosMs: 10_000 } },
    { bug: 'owned-but-unread with a hung read (bug 9)', config: { seed: 13, faults: ['hang'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    { bug: 'credit-not-returned after a zombie is fenced (bug 4)', config: { seed: 12, faults: ['host', 'sink', 'view'], hosts: { min: 2, max: 6 }, onError: 'restart' } },
    { bug: 'write-after-takeover-accepted: a forced takeover after an unanswered handoff request', config: { seed: 99, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang'], hosts: { min: 2, max: 6 } } },
    { bug: 'checkpoint-moved-backwards: split children left by an earlier attempt behind the parent\'s newer checkpoint', config: { seed: 478, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang'], hosts: { min: 2, max: 6 } } },
    { bug: 'checkpoint-moved-backwards: a split child taken and released moved back to the parent\'s position', config: { seed: 346, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang', 'twin'], hosts: { min: 2, max: 6 }, onError: 'restart' } },
    { bug: 'lease-churn: two hosts under one name taking each other\'s leases', config: { seed: 8, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang', 'twin'], hosts: { min: 2, max: 6 } } },
    { bug: 'all faults', config: { seed: 3, faults: ['lease', 'source', 'view', 'host', 'sink'], hosts: { min: 2, max: 6 } } },
  ];
  for (const { bug, config } of found) {
    it(`${bug}: ${replayLine(config)}`, () => expectNoViolations(config));
  }
});

describe('simulation: every fault kind at once', () => {
  for (const seed of seeds(100, 6)) {
    it(`lease, source, view, host, sink and hang faults, seed ${seed}`, () =>
      expectNoViolations({ seed, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang'], hosts: { min: 2, max: 6 }, chaosMs: 10_000 }));
  }
});

/**
 * Seeds the new fault sets found, each for a bug of issue 25 (clock skew, a split parent's late view write,
 * stop() during the bootstrap, startFrom 'now', the lease write's conflict loop): each broke its invariant
 * before its fix, and must hold now. Regression tests for those fixes.
 */
describe('simulation: seeds that found issue-25 bugs', () => {
  for (const { bug, invariant, config } of FOUND_BEING_FIXED) {
    it(`${invariant}: ${bug}: ${replayLine(config)}`, () => expectNoViolations(config));
  }
});

/**
 * Seeds the `topology` fault set found: each broke its invariant before its fix, and must hold now.
 */
describe('simulation: seeds the topology fault set found', () => {
  // A merged partition's equal LSNs: a failed batch run again change by change let an exactlyOnce view skip
  // the second change of an LSN (view-differs-from-source); failures are isolated by LSN group now.
  const equalLsns: SimConfig = { seed: 7, faults: ['host', 'poison', 'lease', 'source', 'topology'], hosts: { min: 2, max: 4 }, chaosMs: 20_000, view: 'exactlyOnce', groups: false, form: 'handler' };
  it(`view-differs-from-source: equal LSNs of a merge run apart: ${replayLine(equalLsns)}`, async () => {
    const { stats, violations } = await runSimulation(equalLsns);
    expect(violations).toEqual([]);
    expect(stats.faults['source.merge']).toBeGreaterThan(0);
    expect(stats.faults['poison.change']).toBeGreaterThan(0);
  });
  // The simulation's listing-lag wrapper did not forward `Source.currentTime`: without it a 'now' start is
  // pinned when each lease is created, and the changes written between the run's start and the bootstrap were
  // skipped (change-never-delivered in most `topology` seeds with --start now). Every wrapper forwards it now.
  const nowThroughWrappers: SimConfig = { seed: 1, faults: ['topology', 'host'], hosts: { min: 2, max: 4 }, start: 'now' };
  it(`change-never-delivered: a 'now' start through a source wrapper: ${replayLine(nowThroughWrappers)}`, async () => {
    const { violations } = await runSimulation(nowThroughWrappers);
    expect(violations).toEqual([]);
  });
});

/**
 * The whole product: each new fault set alone, and every fault set with a product variant per seed (view
 * mode, group keys, handler form, failure policy, start position, lease scheme, balancing). Short runs; the
 * variants that break an invariant of a bug being fixed are listed above, so these only count what struck.
 */
describe('simulation: every fault kind and mode (smoke)', () => {
  const all = FAULT_SETS.filter((f) => f !== 'twin');
  for (const seed of seeds(1, 4)) {
    const config: SimConfig = { seed, faults: all, hosts: { min: 2, max: 4 }, chaosMs: 3_000, ...drawVariant(seed) };
    it(`all faults, ${replayLine(config)}`, async () => {
      const { stats } = await runSimulation(config);
      expect(stats.writes).toBeGreaterThan(0);
      expect(Object.keys(stats.faults).length).toBeGreaterThan(3);
    });
  }
  for (const variant of [{ form: 'handler', policy: 'deadLetter' }, { form: 'rx', policy: 'halt' }, { form: 'handler', policy: 'halt' }, { view: 'exactlyOnce', groups: true }, { start: 'time', leaseScheme: 'dotnet', balanceBy: 'load' }] as const) {
    const config: SimConfig = { seed: 3, faults: ['host', 'poison'], hosts: { min: 2, max: 3 }, chaosMs: 4_000, ...variant };
    it(`poison changes and hosts, ${replayLine(config)}`, () => expectNoViolations(config));
  }
  // A merge read on as EPK-range leases, a listing that misses a new child, opaque positions, exactlyOnce views.
  const topology: SimConfig = { seed: 4, faults: ['topology', 'host', 'view'], hosts: { min: 2, max: 4 }, chaosMs: 10_000, view: 'exactlyOnce', groups: true, positions: 'opaque' };
  it(`merges, lagging listings and opaque positions, ${replayLine(topology)}`, async () => {
    const { stats, violations } = await runSimulation(topology);
    expect(violations).toEqual([]);
    expect(stats.faults['source.merge']).toBeGreaterThan(0);
    expect(stats.faults['lease.epkCreated']).toBeGreaterThan(0);
  });
  // Forced release and rewind against live hosts in the handler form with poison changes.
  const admin: SimConfig = { seed: 3, faults: ['admin', 'host', 'poison'], hosts: { min: 2, max: 4 }, chaosMs: 8_000, form: 'handler' };
  it(`admin operations on live hosts, ${replayLine(admin)}`, () => expectNoViolations(admin));
});

/**
 * The real SDK path (`source: 'sdk'`): `CosmosSource` and `CosmosLeaseStore` through `@azure/cosmos` against
 * the emulator in this process, the seams' faults striking at the emulator's fault layer, the SDK's timers
 * on the simulation's clock. A seed replays exactly here too.
 */
describe('simulation: the SDK path', () => {
  const sdkSeeds: SimConfig[] = [
    { seed: 8, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang'], hosts: { min: 2, max: 4 }, chaosMs: 4_000, source: 'sdk' },
    { seed: 2, faults: ['host', 'source', 'poison'], hosts: { min: 2, max: 3 }, chaosMs: 4_000, form: 'handler', source: 'sdk' },
  ];
  for (const config of sdkSeeds) {
    it(`${replayLine(config)}`, () => expectNoViolations(config));
  }
  // change-never-delivered: a bootstrap after a split, where the first one's `.info` write had failed, created
  // the children from startFrom ('now', as AllVersionsAndDeletes runs start here) instead of leaving them to
  // the parent's lease: the changes between the parent's checkpoint and the second bootstrap were skipped.
  const bootstrapAfterSplit: SimConfig = { seed: 22, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang'], hosts: { min: 2, max: 4 }, chaosMs: 3_000, source: 'sdk' };
  it(`a re-bootstrap leaves a split parent's children to its lease: ${replayLine(bootstrapAfterSplit)}`, () => expectNoViolations(bootstrapAfterSplit));

  it('replays an SDK seed exactly: same violations, same stats, faults of the HTTP path among them', async () => {
    const config: SimConfig = { seed: 8, faults: ['lease', 'source', 'host'], hosts: { min: 2, max: 3 }, chaosMs: 4_000, source: 'sdk' };
    const first = await runSimulation(config);
    const second = await runSimulation(config);
    expect(second.violations).toEqual(first.violations);
    expect(second.stats).toEqual(first.stats);
    expect(Object.keys(first.stats.faults).some((k) => k.startsWith('sdk.'))).toBe(true);
  });
});

/**
 * The `--sse on` variant (`sse.ts`): each host's hub behind its Rx pipeline, browsers that connect, lag, stall,
 * go away and resume, here and at another host's hub. This seed, in snapshot mode, finds a hub bug: a browser
 * that reconnected right after its snapshot resumed from the snapshot's positions and got again, as changes,
 * the rows read ahead of them (`sse-duplicate`, and `sse-order` for an older change after its row).
 */
describe('simulation: the SSE hub as an observer', () => {
  const config: SimConfig = { seed: 40, faults: ['host', 'source', 'sink', 'view', 'lease'], hosts: { min: 2, max: 4 }, chaosMs: 10_000, sse: 'on' };
  it(`clients connect, lag and resume with no gap, duplicate or disorder: ${replayLine(config)}`, async () => {
    const { stats, violations } = await runSimulation(config);
    expect(violations).toEqual([]);
    expect(stats.faults['sse.snapshots']).toBeGreaterThan(0);
    expect(stats.faults['sse.resumes']).toBeGreaterThan(0);
    expect(stats.faults['sse.failovers']).toBeGreaterThan(0);
    expect(stats.faults['sse.changes']).toBeGreaterThan(100);
    // The hub's snapshot reads wait a turn of the event loop (setImmediate): a seed still replays exactly.
    expect((await runSimulation(config)).stats).toEqual(stats);
  });
  it('--faults all draws it from a PRNG of its own, in the Rx form only', () => {
    const drawn = seeds(1, 40).map(drawVariant);
    expect(new Set(drawn.map((v) => v.sse))).toEqual(new Set(['on', 'off']));
    for (const v of drawn) if (v.form === 'handler') expect(v.sse).toBe('off');
  });
});
