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
 * Seeds that fail on the code before the reader and coordinator rework, each shrunk to its smallest config
 * (`npm run sim -- --find <invariant> --faults <set>`). `it.fails` keeps `npm test` green while they fail;
 * once a fix lands the test "unexpectedly passes": move it to the suite above.
 */
describe('simulation (known failures until the reader rework lands)', () => {
  const known: { bug: string; config: SimConfig }[] = [
    // listPartitions fails once while a split is handled: the parent lease stays owned, nobody reads it (bug 1).
    { bug: 'owned-but-unread after a split (issue 9, bug 1)', config: { seed: 7, faults: ['source'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    // A view write fails; retry() re-subscribes to a coordinator that already stopped (bug 3).
    { bug: 'change-never-delivered after retry() (bug 3)', config: { seed: 9, faults: ['view'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    // A fenced view write drops its batches without returning their credit (bug 4).
    { bug: 'credit-not-returned after a fenced view write (bug 4)', config: { seed: 6, faults: ['lease'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    // A replayed write skips storing the epoch, so a deposed owner's later write is accepted (bug 5), and the
    // deposed owner kept writing after the takeover (bug 11).
    { bug: 'deposed-view-write-accepted and write-after-takeover-accepted (bugs 5, 11)', config: { seed: 42, faults: ['lease'], hosts: { min: 2, max: 2 }, chaosMs: 10_000 } },
    // A read that hangs is never given up: the lease stays owned and renewed, unread (bug 9's rule).
    { bug: 'owned-but-unread with a hung read (bug 9)', config: { seed: 13, faults: ['hang'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
    // A zombie's view write is fenced after a pause; its batches keep their credit (bug 4).
    { bug: 'credit-not-returned after a zombie is fenced (bug 4)', config: { seed: 12, faults: ['host', 'sink', 'view'], hosts: { min: 2, max: 6 }, onError: 'restart' } },
    // Everything at once.
    { bug: 'all faults', config: { seed: 3, faults: ['lease', 'source', 'view', 'host', 'sink'], hosts: { min: 2, max: 6 } } },
  ];
  for (const { bug, config } of known) {
    it.fails(`${bug}: ${replayLine(config)}`, () => expectNoViolations(config));
  }
});
