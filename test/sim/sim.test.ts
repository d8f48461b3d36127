import { describe, expect, it } from 'vitest';
import { replayLine, runSimulation, type SimConfig } from './simulation.js';

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
  for (const seed of seeds(1, 30)) {
    it(`hosts and sink faults, seed ${seed}`, () =>
      expectNoViolations({ seed, faults: ['host', 'sink'], hosts: { min: 2, max: 6 }, onError: 'restart' }));
  }
  // View writes fail, lose their reply or slow down too.
  for (const seed of seeds(1, 11)) {
    it(`hosts, sink and view faults, seed ${seed}`, () =>
      expectNoViolations({ seed, faults: ['host', 'sink', 'view'], hosts: { min: 2, max: 6 }, onError: 'restart' }));
  }
  for (const seed of seeds(1, 4)) {
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
  for (const seed of seeds(100, 15)) {
    it(`lease, source, view, host, sink and hang faults, seed ${seed}`, () =>
      expectNoViolations({ seed, faults: ['lease', 'source', 'view', 'host', 'sink', 'hang'], hosts: { min: 2, max: 6 } }));
  }
});
