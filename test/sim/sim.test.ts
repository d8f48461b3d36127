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
 * Seeds the `admin`, `topology` and `broker` fault sets found with every fault set on (issue 25), each shrunk
 * where a smaller config showed the same invariant: each broke it before its fix, and must hold now.
 */
describe('simulation: seeds the admin, topology and broker fault sets found', () => {
  // broker-key-order (seeds 30 and 188 of the whole product): an operator's rewind to the beginning, under a
  // start other than 'beginning', publishes changes written before the start for the first time, after their
  // documents' later changes. The simulation now counts those (relay.rewindDisorder); the relay was right.
  const rewindBeforeStart: SimConfig = { seed: 5, faults: ['admin', 'host'], hosts: { min: 2, max: 2 }, chaosMs: 10_000, start: 'function', relay: 'amqp' };
  it(`broker-key-order: a rewind to before the start publishes older changes first-time: ${replayLine(rewindBeforeStart)}`, async () => {
    const { stats, violations } = await runSimulation(rewindBeforeStart);
    expect(violations).toEqual([]);
    expect(stats.faults['relay.rewindDisorder']).toBeGreaterThan(0);
  });
  // broker-key-order (seeds 455, 865, 1011, 1517, 1883 of 2000 with every fault set): an operator's reset starts
  // over from `startFrom`, which can lie before changes it never published: a time read on a merged partition
  // (its log not in time order) returns older changes of the other parent; a run's pinned "now" precedes the
  // changes a failed reset's re-created leases skipped. They are published for the first time after their
  // documents' later changes; the simulation now counts those (relay.resetDisorder); the relay was right.
  const resetBeforeStart: SimConfig = {
    seed: 455,
    faults: FAULT_SETS.filter((f) => f !== 'twin'),
    hosts: { min: 2, max: 6 },
    balanceBy: 'count',
    view: 'guarded',
    groups: true,
    form: 'rx',
    policy: 'deadLetter',
    start: 'time',
    leaseScheme: 'rxfeed',
    positions: 'lsn',
    relay: 'amqp',
    source: 'memory',
    sse: 'off',
  };
  it(`broker-key-order: a reset publishes changes written before the start first-time: ${replayLine(resetBeforeStart)}`, async () => {
    const { stats, violations } = await runSimulation(resetBeforeStart);
    expect(violations).toEqual([]);
    expect(stats.faults['relay.resetDisorder']).toBeGreaterThan(0);
  });
  // checkpoint-moved-backwards: a split parent whose delete never landed (its owner lost the lease between the
  // creates and the delete) stood beside its child. Seed 9: the child's replacement took the parent (an EPK
  // lease of the same range) for a descendant covering its children, created none, and the parent's older
  // checkpoint took over the range. Seed 226: the parent's replacement moved the child's own untaken children
  // back to the parent's older checkpoint. Children record their parent lease now (replaceGoneLease).
  const whole = { faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, groups: true, form: 'handler', policy: 'deadLetter', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'off', source: 'memory' } as const;
  const epkParentBesideChild: SimConfig = { ...whole, seed: 9, chaosMs: 12_000, balanceBy: 'count', view: 'exactlyOnce', start: 'function' };
  const parentMovesGrandchildBack: SimConfig = { ...whole, seed: 226, balanceBy: 'count', view: 'guarded', start: 'beginning' };
  for (const [what, config] of [
    ["a child's replacement took its same-range parent for a descendant", epkParentBesideChild],
    ["a stale parent's replacement moved its child's children back", parentMovesGrandchildBack],
  ] as const) {
    it(`checkpoint-moved-backwards: ${what}: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['source.split']).toBeGreaterThan(0);
    });
  }
  // deposed-view-write-accepted (seeds 433, 866, 1091, --policy deadLetter): a bootstrap finished and removed its
  // lock at once; another host, whose `.info` read lagged (`late`), took the lock and bootstrapped again on
  // listings that lagged the first one's creates and a merge's replacement since (a stale partition listing, a
  // lease listing still showing the claimed parent): it created the replaced parent's lease again, at epoch 1,
  // below its child. Read from its start, the parent was fenced by the view, lost and retaken one epoch higher
  // each time until it passed the child, and its write was accepted after the child's. A bootstrap now keeps
  // its lock an expiration after `.info` landed, and reads `.info` again under the lock
  // (test/leases/bootstrapRace.test.ts).
  const bootstrapAgainOnLaggingReads: SimConfig[] = [
    { ...whole, seed: 433, balanceBy: 'load', view: 'exactlyOnce', groups: false, start: 'beginning', sse: 'off' },
    { ...whole, seed: 866, balanceBy: 'count', view: 'exactlyOnce', form: 'rx', start: 'beginning', positions: 'opaque', relay: 'jetstream', sse: 'off' },
    { ...whole, seed: 1091, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', start: 'beginning', relay: 'jetstream', sse: 'off' },
  ];
  for (const config of bootstrapAgainOnLaggingReads) {
    it(`deposed-view-write-accepted: a bootstrap again on reads that lagged one just finished: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['source.merge']).toBeGreaterThan(0);
    });
  }
  // deposed-view-write-accepted (seed 1404, --policy deadLetter): a false positive. An EPK lease's token names
  // its range: 7F800000-FF (a merge's part, epochs 6–10) was cut by a split and deleted; a merge made the range
  // one partition again (8, epoch 15), which merged in turn, and 8's replacement created 7F800000-FF again as its
  // child (epoch 16, taken at 17). The checker kept one lineage per token and took the child's write for its old
  // ancestor's. A token created again by a descendant of its earlier lease is a new lineage now
  // (World.registerToken; writes are told apart by epoch: the new one starts above every epoch of the old).
  const epkTokenUsedAgain: SimConfig = { ...whole, seed: 1404, balanceBy: 'count', view: 'exactlyOnce', start: 'function', sse: 'off' };
  it(`deposed-view-write-accepted: an EPK token created again by a descendant of its earlier lease: ${replayLine(epkTokenUsedAgain)}`, async () => {
    const { stats, violations } = await runSimulation(epkTokenUsedAgain);
    expect(violations).toEqual([]);
    expect(stats.faults['lease.epkCreated']).toBeGreaterThan(0);
  });
  // change-never-delivered, poison-not-contained, view-differs-from-source (seed 160, --policy deadLetter): a
  // bootstrap retried after failures listed the partitions within a moment of a split, and the listing missed
  // one child (partition 3, ['', 3FC00000)): it created leases for the two listed ones and wrote `.info`, and
  // no lease ever covered the missed range (144 of 562 changes never read). The bootstrap now lists again
  // until the partitions cover the key space (test/leases/coordinator.test.ts).
  const bootstrapMissedChild: SimConfig = { ...whole, seed: 160, balanceBy: 'count', view: 'guarded', groups: false, start: 'function', positions: 'opaque' };
  it(`change-never-delivered: a bootstrap on a listing that missed a split's child: ${replayLine(bootstrapMissedChild)}`, async () => {
    const { stats, violations } = await runSimulation(bootstrapMissedChild);
    expect(violations).toEqual([]);
    expect(stats.faults['source.listing.missing']).toBeGreaterThan(0);
  });
  // change-never-delivered (seed 50, --policy deadLetter): the operator's rewind to a time after a lagging
  // lease's checkpoint moved it forward (mem:161 → mem:266), as rewindLeases documents ("the new checkpoint");
  // the simulation took the 105 changes skipped on request for lost. A simulation bug: they are counted now
  // (World.skippedByOperator, admin.rewind.skipped). Found as seed 50; the start-up change (leases listed beside
  // the first `.info` read, a lease's first page read beside the write that takes it) moved its schedule so that
  // no rewind skipped a change: seed 3 (same options) reaches the scenario on today's code (79 skipped).
  const rewindPastCheckpoint: SimConfig = { ...whole, seed: 3, balanceBy: 'count', view: 'exactlyOnce', groups: false, start: 'time' };
  it(`change-never-delivered: a rewind to a time past a lagging lease's checkpoint: ${replayLine(rewindPastCheckpoint)}`, async () => {
    const { stats, violations } = await runSimulation(rewindPastCheckpoint);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.rewind.skipped']).toBeGreaterThan(0);
  });
  // good-change-dead-lettered (seed 125, --policy deadLetter): a merged partition's LSN group of four
  // (d86, d83, d40, d107 at LSN 32) in a batch that failed on a later change's one-time failure (d128@35); the
  // group run alone then failed once on d40 and once on d107, and after 3 attempts (the batch run counts, as
  // failurePolicy `retryAlone` documents) was dead-lettered. The product kept its policy; the simulation's
  // one-time failures struck each member of a group in turn. A simulation bug: they strike a group once now.
  const groupFailedOncePerMember: SimConfig = {
    ...whole,
    seed: 125,
    balanceBy: 'load',
    view: 'exactlyOnce',
    start: 'time',
    positions: 'opaque',
    sse: 'off',
  };
  it(`good-change-dead-lettered: each member of an LSN group failed once in turn: ${replayLine(groupFailedOncePerMember)}`, async () => {
    const { stats, violations } = await runSimulation(groupFailedOncePerMember);
    expect(violations).toEqual([]);
    expect(stats.faults['source.merge']).toBeGreaterThan(0);
    expect(stats.faults['poison.change']).toBeGreaterThan(0);
  });
  // change-never-delivered, poison-not-contained, view-differs-from-source (seed 54, --policy deadLetter): a
  // bootstrap raced an admin reset. h2 wrote `.info` and dropped its lock; h3 (which had read no `.info`) took
  // the lock, found leases 0 and 2 present, and its create of 1 was slow; the reset deleted 0, 1, 2, `.info`
  // and h3's lock; h3's create of 1 landed and h3 wrote `.info`. A lease and `.info` existed, so no bootstrap
  // ran again, and the ranges of 0 and 2 had no lease for good (197 of 528 changes never read). Seed 45 of
  // --faults all: a forced reset that failed part way (some leases deleted, the markers left). The balance
  // loop now finds key ranges no lease covers and creates their leases (Coverage, test/leases/coverage.test.ts).
  const resetRacedBootstrap: SimConfig = {
    seed: 54,
    faults: ['lease', 'source', 'hang', 'view', 'host', 'sink', 'clock', 'bootstrap', 'poison', 'topology', 'admin', 'broker'],
    hosts: { min: 2, max: 6 },
    view: 'guarded',
    policy: 'deadLetter',
  };
  const resetFailedPartWay: SimConfig = { seed: 45, faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, ...drawVariant(45), policy: 'deadLetter' };
  // Seed 54's run no longer reaches the race since the operator's reads are current once faults stop (seed 186)
  // and the halt backoff changed its timing: it stays as a guard of the scenario; seed 45 still needs a repair.
  // The race itself is tested in test/leases/coverage.test.ts.
  for (const [what, config, repairs] of [
    ['a reset that raced a bootstrap', resetRacedBootstrap, false],
    ['a forced reset that failed part way', resetFailedPartWay, true],
  ] as const) {
    it(`change-never-delivered: key ranges left without a lease by ${what}: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      if (repairs) expect(stats.faults['lease.gapRepaired']).toBeGreaterThan(0);
    });
  }
  // change-never-delivered, view-differs-from-source (seed 186, found with --sse on; the same without the hub):
  // a forced reset failed part way amid the chaos (it had deleted lease ['', 1FE00000) at LSN 147, and d170@148,
  // written 600 ms before, was never read), and every run again failed too: under `late` the operator's reads
  // lagged 241 ms while the owners renewed every 300 ms, so each forced delete met a conflict, re-read the same
  // stale lease in the same instant and gave up after 5 attempts. A simulation bug: the reset is run again once
  // the faults are off (AdminOps.finish), and the operator's reads are current then. Found as seed 186; the start-up
  // change (leases listed beside the first `.info` read) moved its schedule off a failed reset: seed 183 (same
  // options) fails a reset under read lag on today's code.
  const resetNeverCompleted: SimConfig = { ...whole, seed: 183, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', start: 'beginning', positions: 'opaque', relay: 'amqp', sse: 'off' };
  it(`change-never-delivered: a failed reset run again reads current leases once the faults are off: ${replayLine(resetNeverCompleted)}`, async () => {
    const { stats, violations } = await runSimulation(resetNeverCompleted);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset.failed']).toBeGreaterThan(0);
    expect(stats.faults['lease.readLag']).toBeGreaterThan(0);
  });
  // change-never-delivered, poison-not-contained, view-differs-from-source (seed 7010 of the dotnet-scheme sweep,
  // --lease-scheme dotnet --from 7001): h10 joined in the chaos's last tick with a bootstrap interruption drawn
  // (a stop 135 ms after it started); the chaos ended with h10 the only live host (h5, h7, h9 and h8 crashed), so
  // the quiescence started none, and then the interruption stopped h10: no host ran for the 122 s of quiescence, and
  // 70 of 542 changes were never read (h8's last handler call waited on a retry timer of a crashed host). A
  // simulation bug: a fault scheduled in the chaos struck after the faults were off. It strikes no more then
  // (`bootstrap.afterChaos`, test/sim/chaos.ts). Under leaseScheme 'rxfeed' the same seed reaches the late
  // interruption with another host still running, and passed.
  const bootstrapStopAfterChaos: SimConfig = { ...whole, seed: 7010, balanceBy: 'load', view: 'exactlyOnce', start: 'now', leaseScheme: 'dotnet', sse: 'off' };
  it(`change-never-delivered: a bootstrap interruption due after the chaos stopped the last host: ${replayLine(bootstrapStopAfterChaos)}`, async () => {
    const { stats, violations } = await runSimulation(bootstrapStopAfterChaos);
    expect(violations).toEqual([]);
    expect(stats.faults['bootstrap.afterChaos']).toBeGreaterThan(0);
  });
  // credit-above-budget (seed 85): a merged partition's page came back one change larger than its credit (a
  // page never splits an LSN group) while the budget was used up; the reader now reads it again once it fits.
  // No smaller config showed it (--find over topology with sink, view and host faults). The seed also breaks
  // change-never-delivered under --policy halt, a bug of its own (the halt cluster, fixed on another branch):
  // only the budget is checked here.
  const pageBeyondCredit: SimConfig = { ...whole, seed: 85, chaosMs: 24_000, balanceBy: 'load', view: 'guarded', policy: 'halt', start: 'beginning' };
  it(`credit-above-budget: a page larger than its credit with the budget used up: ${replayLine(pageBeyondCredit)}`, async () => {
    const { stats, violations } = await runSimulation(pageBeyondCredit);
    expect(violations.filter((v) => v.invariant === 'credit-above-budget')).toEqual([]);
    expect(stats.faults['source.merge']).toBeGreaterThan(0);
  });
  // broker-key-order (seed 53, appeared with a bootstrap timing change): h3 asked h1 for partition 3; h1's
  // drain timed out (500 ms) while flow control (broker.blocked) held the AMQP relay's round for d49@10..12 on
  // 'drain', and h1 released the lease at checkpoint 9. h3 read from it and published d49@13 (a
  // latest-version page: d49@11 no longer in it); then the broker read again and h1's relay went on sending
  // the rest of its round, d49@11 among it, after its ownership had ended. The AMQP publisher now sends
  // nothing more of a round once a batch of it lost its ownership (test/brokers/relayModel.test.ts).
  const sendAfterHandover: SimConfig = { ...whole, seed: 53, balanceBy: 'load', view: 'guarded', groups: false, form: 'rx', policy: 'halt', start: 'beginning', positions: 'opaque', relay: 'amqp', sse: 'on' };
  it(`broker-key-order: a relay round held by flow control went on sending after a handover: ${replayLine(sendAfterHandover)}`, async () => {
    const { stats, violations } = await runSimulation(sendAfterHandover);
    expect(violations).toEqual([]);
    expect(stats.faults['broker.blocked']).toBeGreaterThan(0);
  });
  // change-never-delivered (seeds 594 and 1495, --faults all): the operator's rewind to a time moved an EPK-range
  // lease forward past changes it had not read, as rewindLeases documents (594: [7F800000, FF), the part of a
  // merged partition one parent had, read from the merge's split child 4: 200 → 227; 1495: [7F800000,
  // BF400000) read from partition 10: 118 → 223). The simulation counted the skipped changes by lineage, and
  // the lease was no ancestor nor descendant of the partition the changes were written to: it took them for
  // lost. A simulation bug: a lease's skip is counted by key now (World.skippedByOperator, the writes'
  // effective partition keys). Seed 1495 moved to 81 (same options): the start-up change (leases listed beside the
  // first `.info` read, a lease's first page read beside the write that takes it) moved its schedule so that no
  // rewind skipped a change. Seed 81 (same options) has a rewind skip (39) and EPK-range leases (2) on today's
  // code, but the skip is a partition lease's (the earlier attempt's scan found no seed 1–600 with these options
  // with an EPK-range lease's own skip; not scanned again), which seed 594 above still reaches.
  const rewoundEpkLeases: SimConfig[] = [
    { ...whole, seed: 594, balanceBy: 'count', view: 'exactlyOnce', form: 'rx', start: 'function', positions: 'opaque', relay: 'jetstream', sse: 'on' },
    { ...whole, seed: 81, balanceBy: 'count', view: 'exactlyOnce', groups: false, form: 'rx', start: 'now', positions: 'opaque', relay: 'jetstream', sse: 'on' },
  ];
  for (const config of rewoundEpkLeases) {
    it(`change-never-delivered: a rewind past an EPK-range lease's checkpoint skips by key: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['admin.rewind.skipped']).toBeGreaterThan(0);
      expect(stats.faults['lease.epkCreated']).toBeGreaterThan(0);
    });
  }
  // change-never-delivered, view-differs-from-source (seed 864, --policy halt): the EPK-range lease
  // [AA000000, FF) halted on poison d2@34; while it waited out its halt backoff its partition split (7 → 8, 9)
  // and the halves merged back (10), so no read of it ever answered "gone": it went on as part of 10, halting
  // on d2@34 at each try and holding up its range, as the halt policy means. The simulation's lineage counted
  // it gone at the split and 10 its descendant, whose changes it then required (64 of 588). A simulation bug:
  // a halted lease still stored, with a poison change above its checkpoint, excuses the changes of its keys
  // above it (World.excused).
  const haltedEpkOverMergedHalves: SimConfig = { ...whole, seed: 864, balanceBy: 'count', view: 'guarded', form: 'rx', policy: 'halt', start: 'function', leaseScheme: 'dotnet', positions: 'opaque', sse: 'on' };
  it(`change-never-delivered: a halted EPK-range lease goes on over its split range merged back: ${replayLine(haltedEpkOverMergedHalves)}`, async () => {
    const { stats, violations } = await runSimulation(haltedEpkOverMergedHalves);
    expect(violations).toEqual([]);
    expect(stats.faults['poison.halted']).toBeGreaterThan(0);
    expect(stats.faults['source.merge']).toBeGreaterThan(0);
  });
  // change-never-delivered, view-differs-from-source (seed 50, found with --sse on; the hub only moves the timing):
  // lease 0 halted on poison d8@293 (checkpoint 288) again and again while its partition split (1, 2); at
  // 33 408 ms a halt found it gone and handed it to 1 and 2 from 288, and the final checks ran at 33 500 ms,
  // before both children halted at 33 555 ms (on d8@293 and d78@348): lease 0 deleted and no child halt yet
  // recorded, nothing excused the 26 changes written to the children, which those halts hold (checkpoints 288
  // and 329, below them). Seed 72 (latestVersion mode; 242 changes, poison-not-contained too): the same hand-over
  // (0 to 2, 3, 5, 6) 40 ms before the checks; the children delivered the changes below their poison changes
  // 109 ms after them. A simulation bug: convergence before the settle is one moment, and the halt retries during
  // the settle moved what holds a change; the checks now run once converged again (checkQuiescence), within the
  // same bound.
  const haltHandedOver = { ...whole, balanceBy: 'count', view: 'exactlyOnce', groups: false, form: 'rx', policy: 'halt', start: 'time', sse: 'on' } as const;
  for (const seed of [50, 72]) {
    const config: SimConfig = { ...haltHandedOver, seed };
    it(`change-never-delivered: the checks ran while a halted, split partition's children took over: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['poison.halted']).toBeGreaterThan(0);
      expect(stats.faults['source.split']).toBeGreaterThan(0);
    });
  }
  // change-never-delivered, poison-not-contained, view-differs-from-source (seed 962, --faults all): h0's
  // bootstrap crashed with its lease creates in flight (they landed); h2 found its lock stale, took the lock,
  // found leases 0, 1 and 2 there, and then a forced reset deleted them and h2's lock; h2's `.info` landed
  // after it. No lease at all and `.info` present: no host bootstraps, and Coverage only ran beside a listing
  // with leases, so the whole key space was read by nobody (282 of 488 changes). A processor with no lease
  // treats the whole key space as a gap now (Coordinator, test/leases/coverage.test.ts). The stale-lock retry
  // delay (a delete that conflicted waits before the next look) moved this schedule off the gap repair: the replay
  // guards the scenario (no violation, a reset in the run); the unit test above holds the repair itself.
  const resetBeforeInfo: SimConfig = { ...whole, seed: 962, balanceBy: 'count', view: 'guarded', start: 'beginning', positions: 'opaque', sse: 'off' };
  it(`change-never-delivered: a reset between a bootstrap's creates and its .info write left no lease at all: ${replayLine(resetBeforeInfo)}`, async () => {
    const { stats, violations } = await runSimulation(resetBeforeInfo);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
  });
  // broker-key-order (seed 1722 of the whole product): h4 read split parent 0 to its end (drainGone) while slow
  // acknowledgements held its relay three rounds behind; the drain gave up after 500 ms and h4 replaced the lease
  // by its children from checkpoint 47, still owning it meanwhile. h1 took child 3 and published d43@85 (a
  // latest-version page: d43@64 superseded); then h4's relay sent its next round, d43@64 in it. A gone partition
  // now hands its batches still out over (their signal aborts) before the replacement (test/feed/reader.test.ts).
  const goneWithRelayBehind: SimConfig = { ...whole, seed: 1722, balanceBy: 'load', view: 'guarded', groups: false, form: 'rx', start: 'beginning', leaseScheme: 'dotnet', positions: 'opaque', relay: 'jetstream', sse: 'off' };
  it(`broker-key-order: a gone partition's relay went on publishing while its children were read: ${replayLine(goneWithRelayBehind)}`, async () => {
    const { stats, violations } = await runSimulation(goneWithRelayBehind);
    expect(violations).toEqual([]);
    expect(stats.faults['source.split']).toBeGreaterThan(0);
  });
  // broker-key-order (seed 1957, SDK mode; shortened chaos, same disorder): h0's relay sent a round (d14@10 in it)
  // while it owned partition 3, and flow control (broker.blocked) held it at the broker for 1.6 s; h0's handover
  // drain gave up after 500 ms, h1 took the lease and published d14@29 (d14@10 superseded in its page), then the
  // broker read h0's round. A publisher cannot take back what it sent, and no broker fences publishers: only a
  // drain longer than the broker's hold keeps this in order. The simulation counts it (relay.heldDisorder) when
  // the message was sent while its ownership was live and before the later change arrived; the relay was right.
  const heldPastHandover: SimConfig = { ...whole, seed: 1957, chaosMs: 4_000, balanceBy: 'load', view: 'guarded', groups: false, form: 'rx', start: 'time', positions: 'lsn', relay: 'jetstream', source: 'sdk', sse: 'on' };
  it(`broker-key-order: a round the broker held past a handover: ${replayLine(heldPastHandover)}`, { timeout: 120_000 }, async () => {
    // Later fixes (the bootstrap's lock hold, tombstones, recorded children) moved this schedule: the replay guards
    // the scenario (no violation); the unit tests assert the rule.
    const { violations } = await runSimulation(heldPastHandover);
    expect(violations).toEqual([]);
  });
  // epoch-went-back, deposed-view-write-accepted (seeds 434, 1989), checkpoint-moved-backwards (seed 1103): a lease
  // create sent by a host that then paused (or sent slowly) landed after the lease id had been deleted: a split
  // child created by the marked parent's owner, landing after another host finished the replacement and the child
  // was taken, split in turn and deleted (434, 1103); a bootstrap's create of a partition that split and whose
  // lease was deleted meanwhile (1989). A create is "create if absent": the lease came back below an epoch it had.
  // A delete now leaves a tombstone keeping the epoch (rxfeed scheme), and a create lands over it only at that
  // epoch or above (LeaseStore.tombstone; test/support/leaseStoreConformance.ts, test/leases/replaceGoneLease.test.ts).
  // With tombstones, seed 434 still broke deposed-view-write-accepted: h1 marked lease 0 with children 2 and 3 (its
  // listing), paused with its creates in flight; 3 merged with 1, and h0 finished the marked lease from its own
  // listing: 2 and EPK 3FC00000-7F800000. h1's create of lease 3 (an id never deleted) landed beside it; lease 3,
  // retaken at epoch 4, wrote after the EPK lease at 3. The mark now records the children, and every retry and
  // finisher creates those (rxfeed.replacementChildren; test/leases/replaceGoneLease.test.ts).
  const lateChild: SimConfig = { ...whole, seed: 434, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', start: 'time', positions: 'opaque', relay: 'jetstream', sse: 'on' };
  const lateVariant = { ...whole, balanceBy: 'count', view: 'exactlyOnce', groups: true, form: 'handler', start: 'beginning', positions: 'opaque', relay: 'off', sse: 'off' } as const;
  for (const [what, config] of [
    ["a paused owner's split child created after the child was replaced", lateChild],
    ["a paused host's bootstrap create of a partition split since", { ...lateVariant, seed: 1989 }],
    ["a split child created late, after it was taken and replaced", { ...lateVariant, seed: 1103 }],
  ] as const) {
    // With the bootstrap's lock held after `.info` (seeds 433, 866) these schedules no longer bring the late create
    // about: the replays guard the scenario; the unit tests (replaceGoneLease, leaseAdmin, the conformance suite)
    // assert the rule.
    it(`epoch-went-back: ${what}: ${replayLine(config)}`, () => expectNoViolations(config));
  }
  // deposed-view-write-accepted (seed 691): h3 marked split parent 2 (its children 6 and 7, as listed), created 6
  // and paused; 7 split into 8 and 9. h2 finished the marked lease from a fresh listing (children 6, 8, 9) and
  // deleted it; then h3's create of 7 landed (an id that never existed: no tombstone refused it), a lease of gone
  // partition 7 beside its own children, read to its end under epochs above theirs, its view writes over child
  // 8's. The mark records the children now (`rxfeed.replacementChildren`, seed 434): every finisher and retry
  // creates exactly those (test/leases/replaceGoneLease.test.ts).
  const secondGeneration: SimConfig = { ...whole, seed: 691, balanceBy: 'load', view: 'exactlyOnce', groups: false, form: 'handler', start: 'time', positions: 'opaque', relay: 'off', sse: 'off' };
  it(`deposed-view-write-accepted: a paused owner's child created beside the children a finisher made from a later listing: ${replayLine(secondGeneration)}`, () => expectNoViolations(secondGeneration));
  // epoch-went-back under leaseScheme 'dotnet' (seeds 758, 1635): deletes are plain there (the .NET processor reads
  // every document under `<prefix>..` as a lease), so a late create landed and the next acquire owned the range at
  // the epoch a former owner held: a gap repair's create landing after a reset (758), a paused owner's split child
  // landing after the child was taken at 7, split and deleted (1635). A delete there now raises the id's record
  // `<prefix>.gone.<token>` first, and a host deletes a lease below its record instead of taking it; the check is
  // that no write leaves such a lease owned at or below the epoch it had. The record's reads moved both schedules
  // (no late create any more): the replays guard the scenario, test/leases/lateCreateDotnet.test.ts the rule.
  // Seed 1823 (deposed-view-write-accepted: a child's create landing after a finisher on a fresher listing created
  // that child's own children) is seed 434's cause, fixed by the children the mark records.
  const dotnetLate = { ...whole, leaseScheme: 'dotnet', positions: 'lsn', sse: 'off' } as const;
  for (const [what, config] of [
    ['a gap repair create landing after a reset', { ...dotnetLate, seed: 758, balanceBy: 'load', view: 'exactlyOnce', groups: false, form: 'handler', policy: 'halt', start: 'now', relay: 'off' }],
    ["a paused owner's split child landing after the child was taken, split and deleted", { ...dotnetLate, seed: 1635, balanceBy: 'load', view: 'exactlyOnce', groups: true, form: 'rx', policy: 'deadLetter', start: 'beginning', relay: 'amqp' }],
    ["a split child's create landing beside its own children", { ...dotnetLate, seed: 1823, balanceBy: 'count', view: 'guarded', groups: true, form: 'handler', policy: 'halt', start: 'beginning', relay: 'off' }],
  ] as const) {
    it(`epoch-went-back (dotnet scheme): ${what}: ${replayLine(config)}`, () => expectNoViolations(config));
  }
  // write-after-stop (seed 380 of --faults all, found after this session's merges moved its schedule): stop() was
  // called while a view write failed; the pipeline's `retry` subscribed again 200 ms later and started a second run,
  // which took two leases while the first run drained; stop() stopped only the run it was called on and resolved, and
  // the second run's writes (its drain, checkpoints and releases on unsubscription) landed after. stop() is final
  // now (no run starts after it) and waits for every run still going (test/feed/stopFinal.test.ts).
  const retryAfterStop: SimConfig = { ...whole, seed: 380, balanceBy: 'load', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'beginning', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'jetstream', sse: 'off' };
  it(`write-after-stop: a pipeline's retry started a run behind stop(): ${replayLine(retryAfterStop)}`, () => expectNoViolations(retryAfterStop));
  // checkpoint-moved-backwards (seed 1142): h2's bootstrap wrote `.info` and deleted its lock; h3, whose reads
  // lagged (`late`), took the lock a moment later, listed none of h2's leases and created split partition 1's
  // children from the start beside lease 1 at checkpoint 16. The bootstrap now holds its lock one lease
  // expiration after `.info` lands and reads `.info` again under it (test/leases/bootstrapRace.test.ts).
  const lateSecondBootstrap: SimConfig = { ...whole, seed: 1142, balanceBy: 'count', view: 'guarded', groups: false, form: 'handler', start: 'beginning', positions: 'lsn', relay: 'off', sse: 'off' };
  it(`checkpoint-moved-backwards: a second bootstrap on a lagging read of .info: ${replayLine(lateSecondBootstrap)}`, () => expectNoViolations(lateSecondBootstrap));
  // checkpoint-moved-backwards (seed 1645; the simulation's check): h7 marked split parent 8 (checkpoint 60,
  // children 11 and 12) and created 11; a forced reset then deleted 11 and failed part way (parent 8 was not among
  // its deletes); h7 created 12 from 60 and deleted 8; three seconds later h6's gap repair created 11 at the epoch
  // floor from its pinned 'now' start (LSN 32). Positions start over for what a reset deleted, as resetLeases
  // documents: the check cleared its checkpoints at the reset, but took parent 8's write after it for a checkpoint
  // its child must not go below. A lease a reset deleted, created again with no creator once no parent's lease is
  // left, is no longer held to its parent's checkpoint (test/sim/observedStores.ts). The start-up change (leases
  // listed beside the first `.info` read, a lease's first page read beside the write that takes it) moved seed
  // 1645's schedule off the gap repair (a failed reset, no repair): seed 3 (same options; the first of 1–400)
  // has a failed reset (1) and gap repairs (2) on today's code.
  const resetChild: SimConfig = { ...whole, seed: 3, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'halt', start: 'now', positions: 'opaque', relay: 'jetstream', sse: 'off' };
  it(`checkpoint-moved-backwards: a split child a failed reset deleted, repaired from the start: ${replayLine(resetChild)}`, async () => {
    const { stats, violations } = await runSimulation(resetChild);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset.failed']).toBeGreaterThan(0);
    expect(stats.faults['lease.gapRepaired']).toBeGreaterThan(0);
  });
});

/**
 * Seeds of the halting failure policy (`onFailure: halt`, the default): each broke its invariants before its
 * fix (`change-never-delivered`, `poison-not-contained`, `view-differs-from-source` unless said otherwise).
 */
describe('simulation: seeds the halt policy found', () => {
  const all = FAULT_SETS.filter((f) => f !== 'twin');
  const halt = (seed: number): SimConfig => ({ seed, faults: all, hosts: { min: 2, max: 6 }, ...drawVariant(seed), policy: 'halt' });
  const found: { bug: string; config: SimConfig }[] = [
    // A gone partition answers what it held until read to its end (`drainGone`): a parent halted before its
    // end was retaken and halted again forever, and its children, healthy half included, were never created.
    { bug: 'a halted split parent held up its whole range (feed)', config: { seed: 3, faults: ['topology', 'poison', 'host'], hosts: { min: 2, max: 3 }, chaosMs: 10_000, form: 'rx', policy: 'halt' } },
    { bug: 'the same in the handler form (feed)', config: { seed: 3, faults: ['topology', 'poison', 'host'], hosts: { min: 2, max: 3 }, chaosMs: 10_000, form: 'handler', policy: 'halt' } },
    { bug: 'a halted parent of a merge and a split (feed; issue 25 example)', config: halt(16) },
    // deposed-view-write-accepted with a first fix that took a halted partition for gone when a lagging listing
    // left it out: a live merged child was replaced by leases of its gone parents. Only a read answering
    // "gone" counts now.
    { bug: 'a lagging listing is no proof of a gone partition (feed)', config: { seed: 19, faults: ['topology', 'poison', 'host'], hosts: { min: 2, max: 3 }, chaosMs: 6_000, form: 'handler', policy: 'halt' } },
    // A forced reset meeting a halted partition's lease (taken and given back again and again) failed part way:
    // the operator runs it again after the chaos now (the simulation left the processor half reset, with
    // ranges no lease covered), and the epoch floor is raised before each delete (epoch-went-back when run
    // again; seed 5 showed it amid the chaos too).
    { bug: 'a reset that failed part way, run again (simulation)', config: halt(54) },
    { bug: 'a reset run again after a failure kept the epochs it deleted (admin; epoch-went-back)', config: halt(21) },
    // lease-request-spin: a host finishing a split parent's replacement (marked, its owner gone) read it through
    // a read lagging another host's delete of it; its delete found it gone and it reported the replacement as
    // finished, so it balanced at once, listed the same lagging view, found the marked parent again and finished
    // it again, in a loop within one virtual ms. A parent found gone by the delete is reported as nothing to do.
    { bug: 'a finisher looping on a marked parent another host deleted (leases; lease-request-spin)', config: halt(142) },
    // lease-churn: a halted partition's lease, given back, was taken by another host within milliseconds, which
    // halted on the same poison change and gave it back: it bounced around the fleet (4 takes in 2 s), moving a
    // healthy lease along with it. A halted lease now carries the halt signal and waits out a fleet-wide backoff.
    { bug: 'a halted lease bounced around the fleet (leases; lease-churn)', config: { seed: 16, faults: ['topology', 'poison', 'host'], hosts: { min: 2, max: 3 }, chaosMs: 10_000, form: 'rx', policy: 'halt' } },
    // deposed-view-write-accepted, found with the halt backoff (its timing): two hosts bootstrapped again after
    // a reset, one on a listing lagging a split (the parent), the other a moment later (the children); the
    // second listed the leases beside its lock, before the first's creates landed, and created the children
    // beside their parent. The listing is now read once the lock is taken.
    { bug: 'a bootstrap listed the leases before its lock (leases; bootstrap)', config: halt(43) },
    // epoch-went-back: a split parent's owner marked it and created its first child, the create's reply lost; the
    // child was taken (epoch 19), then a reset raised the floor and deleted every lease. The owner's retry read
    // its marked parent through a read lagging the reset's delete and created the child again, one above the
    // parent (18). A retry now confirms the mark by a conditional write before creating children again. (With
    // the extra write the run's timing moves: the replay guards the scenario; the unit test asserts the rule.)
    { bug: "a split retry over a reset it read through a lagging read created a child below its old epoch (leases; epoch-went-back)", config: halt(45) },
    // epoch-went-back: a host finishing a marked split parent (its owner gone, no child noted on it) read it
    // through a read lagging another finisher's delete; a child created then had been taken, split in turn and
    // deleted at a higher epoch, and was created again one above the parent, below it. A finisher now confirms
    // the mark by a conditional write before creating children, as a retry does (seeds 659 and 1062 too).
    { bug: "a finisher read a parent another host finished through a lagging read and created a child below its old epoch (leases; epoch-went-back)", config: halt(1453) },
  ];
  for (const { bug, config } of found) {
    it(`${bug}: ${replayLine(config)}`, () => expectNoViolations(config));
  }
});

/**
 * Seeds of the sweep from 1701 (`--faults all`) whose failures were the simulation's own: each broke the
 * invariants named before the checker's fix, and the product did as documented.
 */
describe('simulation: seeds the checker misjudged (sweep from 1701)', () => {
  const all = { faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, relay: 'off', source: 'memory', sse: 'off', form: 'handler' } as const;
  // change-never-delivered, poison-not-contained, view-differs-from-source (seeds 1714 and 1816, --policy halt):
  // an EPK-range lease (a merged partition's part, 7F800000-FF and -7F800000) halted on a poison change; its
  // range was cut by a split and made whole again by a merge 200 ms (2 s) later, while the halt backoff kept
  // every host off it, so its lease was never replaced and reads the merged partition on, halting on the same
  // poison change. The lineage took the cut for good and the lease for the merged partition's parent, whose
  // halt holds back nothing of it. A halted lease still stored and still stuck now holds up its keys by their
  // effective partition key, whatever the lineage says (World.excused; the same cause as seed 864).
  const epkHealedBehindHalt: SimConfig = { ...all, seed: 1714, balanceBy: 'load', view: 'guarded', groups: false, policy: 'halt', start: 'function', leaseScheme: 'dotnet', positions: 'lsn' };
  const epkHealedBehindHaltAgain: SimConfig = { ...all, seed: 1816, balanceBy: 'load', view: 'guarded', groups: false, policy: 'halt', start: 'beginning', leaseScheme: 'dotnet', positions: 'lsn' };
  for (const config of [epkHealedBehindHalt, epkHealedBehindHaltAgain]) {
    it(`change-never-delivered: a halted EPK-range lease cut and made whole again before its replacement: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['poison.halted']).toBeGreaterThan(0);
      expect(stats.faults['source.merge']).toBeGreaterThan(0);
    });
  }
  // change-never-delivered, poison-not-contained, view-differs-from-source (seed 1900, --policy deadLetter): the
  // operator's rewind to a time moved EPK-range lease -7F800000 forward (mem:257 → mem:288), as rewindLeases
  // documents; the 11 changes it skipped had been written to the merged partition that lease read part of,
  // neither its ancestor nor its descendant, so they were not counted as skipped. A rewind skips its keys'
  // changes between the two checkpoints now, whichever partition held them (World.skippedByOperator).
  const rewindOverMergedPartition: SimConfig = { ...all, seed: 1900, balanceBy: 'count', view: 'guarded', groups: true, policy: 'deadLetter', start: 'time', leaseScheme: 'rxfeed', positions: 'opaque' };
  it(`change-never-delivered: a rewind skipping an EPK-range lease's changes written to the merged partition: ${replayLine(rewindOverMergedPartition)}`, async () => {
    // Since the bootstrap holds its lock after `.info` (seeds 433, 866), this seed's schedule no longer reaches the
    // skip (seeds 594 and 1495 still do, above): it guards the scenario, not the tally.
    const { violations } = await runSimulation(rewindOverMergedPartition);
    expect(violations).toEqual([]);
  });
  // owned-but-unread (seed 1581): h1's handler waited on three late view writes in a row (6.9 s each, the `late`
  // set) with its read budget used up, so no read of lease 0 started for 20.7 s while it kept writing the
  // lease's changes (backpressure, and the `stall` event said so). A view write of the lease leaving or landing
  // counts as work on it between reads now; a read in flight still counts from its start.
  const slowSinkHoldsBudget: SimConfig = { ...all, seed: 1581, balanceBy: 'count', view: 'guarded', groups: true, policy: 'deadLetter', start: 'beginning', leaseScheme: 'rxfeed', positions: 'opaque' };
  it(`owned-but-unread: a slow sink holding the read budget: ${replayLine(slowSinkHoldsBudget)}`, async () => {
    const { stats, violations } = await runSimulation(slowSinkHoldsBudget);
    expect(violations).toEqual([]);
    expect(stats.faults['view.slow']).toBeGreaterThan(0);
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

  // CosmosSource's iterator cache past its bound: with one iterator per process, every read of another partition
  // evicts, and the evicted partition's next read rebuilds its iterator from its position (read-went-back,
  // change-never-delivered; unit test in test/sources/cosmosIteratorEviction.test.ts).
  const oneIterator: SimConfig = { seed: 5, faults: ['lease', 'source', 'view', 'host', 'sink', 'topology'], hosts: { min: 2, max: 4 }, chaosMs: 4_000, source: 'sdk', iterators: 1 };
  it(`evicted iterators rebuilt where they stood, over splits: ${replayLine(oneIterator)}`, async () => {
    const { stats, violations } = await runSimulation(oneIterator);
    expect(violations).toEqual([]);
    expect(stats.faults['sdk.iteratorEvicted']).toBeGreaterThan(0);
    expect(stats.faults['sdk.iteratorRebuilt']).toBeGreaterThan(0);
    expect(stats.faults['source.split']).toBeGreaterThan(0);
  });

  it('replays an SDK seed exactly: same violations, same stats, faults of the HTTP path among them', async () => {
    // Seed 11: its run meets three kinds of SDK faults (sdk.reset, sdk.migrating, sdk.bulkPartly); seed 8 met one
    // until the start-up change moved its schedule.
    const config: SimConfig = { seed: 11, faults: ['lease', 'source', 'host'], hosts: { min: 2, max: 3 }, chaosMs: 4_000, source: 'sdk' };
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
  // sse-gap (seed 137, a simulation bug): a hub read d278@177 under an EPK-range lease over part of merged
  // partition 6 (token BF400000-DF200000), then again under partition 6's own lease, re-reading from 162 after an
  // admin reset (resetLeases: leases made anew over the partitions as they are, from the start function). A browser that started after the first read (a reset to the hub's position, which holds
  // BF400000-DF200000:186) got 6@176, then 6@178: the hub skipped the re-read of a change it still held, and the
  // id said the browser stood past it where the hub had published it. The check looked at token 6's mark alone;
  // it now passes over a change the hub was handed under another token the id holds at or past it.
  // sse-client-behind (seed 137 again, a simulation bug, once the gap repair judged a bootstrap lock by the
  // monotonic clock): browser c0 received d337@200 under BF400000-DF200000 from h4-6; partition 6's lease re-read
  // its range from 148 after the reset, the hub started its clients over (a `reset` at its position, which holds
  // BF400000-DF200000:200) and skipped d337@200 when 6 re-read it (it still held it). The quiescence check looked at
  // token 6's mark alone (199); like the gap check, it now passes over a change handed before under another token
  // the browser stands at or past.
  const whole: SimConfig = { seed: 137, faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'exactlyOnce', groups: false, form: 'rx', policy: 'deadLetter', start: 'function', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'jetstream', source: 'memory', sse: 'on' };
  it(`sse-gap, sse-client-behind: a change re-read under a merged partition's lease, published before under its EPK-range lease: ${replayLine(whole)}`, async () => {
    // Later fixes (the bootstrap's lock hold, tombstones, recorded children) moved this schedule: the replay guards
    // the scenario (no violation); the unit tests assert the rule.
    const { violations } = await runSimulation(whole);
    expect(violations).toEqual([]);
  });
  const sseSeed = (seed: number, variant: Omit<SimConfig, 'seed' | 'faults' | 'hosts'>): SimConfig => ({ seed, faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, ...variant });
  // sse-order (seed 1592, a hub bug): partition 0 split; h1's last batch of 0 (d49@83 among them) waited in the
  // relay (broker retries) while the lease went to the children from 0's checkpoint, and child 2 read d49@160 (the
  // feed's latest version); the late batch of 0 then reached the hub, which sent d49@83 after d49@160. The hub no
  // longer sends an older version of a document after a newer one it holds over the same range.
  const lateParent = sseSeed(1592, { balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'function', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'jetstream', source: 'memory', sse: 'on' });
  it(`sse-order: a split parent's batch that reaches the hub after its child's: ${replayLine(lateParent)}`, async () => {
    const { stats, violations } = await runSimulation(lateParent);
    expect(violations).toEqual([]);
    expect(stats.faults['source.split']).toBeGreaterThan(0);
  });
  // sse-order (seed 1713, a hub bug): h6 published EPK-range lease 55000000-AA000000 up to 192 (d21@183 among them);
  // after an admin reset, merged partition 7's own lease read [55000000, BF400000) from 11. The hub had read only
  // part of that range, so 7 inherited no mark, and its first batch (d21@18 among them) went out as a new partition's,
  // without starting the clients over (the next batch did). A range read from below what was published over part of
  // it now starts the clients over too (and an older version after a newer one held is not sent).
  // sse-gap (seed 1713 again, a simulation bug, once the dotnet scheme's records moved the schedule): h6-7 published
  // d161@198 under EPK-range lease 55000000-AA000000; merged partition 7 re-read its range after an admin reset, the
  // hub started its clients over (a `reset` at its position, 55000000-AA000000:202), and 7's re-read brought d161@169,
  // which the hub rightly did not send (it holds d161@198). The gap check passed over an older version only when the
  // chain had received the newer one; it now also passes over one whose newer version the hub was handed before
  // under a token the browser stands at or past (`sse.olderVersion`), as the quiescence check does.
  const partRereads = sseSeed(1713, { balanceBy: 'count', view: 'exactlyOnce', groups: true, form: 'rx', policy: 'deadLetter', start: 'function', leaseScheme: 'dotnet', positions: 'lsn', relay: 'jetstream', source: 'memory', sse: 'on' });
  it(`sse-order: a merged partition re-read after an admin reset, part of its range published as an EPK-range lease: ${replayLine(partRereads)}`, async () => {
    const { stats, violations } = await runSimulation(partRereads);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    expect(stats.faults['sse.resets']).toBeGreaterThan(0);
    // Hosts drawing a read limit (`maxConcurrentReads`) moved this schedule past the older version's re-read: seed
    // 1539 below still reaches it; this replay guards the reset scenario.
  });
  // sse-snapshot-behind (seed 801, a simulation bug): under startFrom 'now', an admin reset made partition 3's lease
  // anew, pinned at the new run's "now"; d71@72, written before it, was never read by anyone (owed to no one: the
  // other checks pass over it), yet the snapshot check asked the view's row d71@64 to reflect it under the view's
  // position 3:106. It now passes over changes written before the start, as `sse-gap` and `change-never-delivered` do.
  const beforeStart = sseSeed(801, { balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'now', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'off', source: 'memory', sse: 'on' });
  it(`sse-snapshot-behind: a change written before an admin reset's "now": ${replayLine(beforeStart)}`, async () => {
    const { stats, violations } = await runSimulation(beforeStart);
    expect(violations).toEqual([]);
    expect(stats.faults['sse.snapshotMode']).toBe(1);
  });
  // sse-gap (seed 1926, a simulation bug): h2's hub published partition 1 up to 45, then from 142 (another host read
  // 46–141 meanwhile: a hole in its reading, `sse.hostHoles`); after an admin reset its lease re-read 1 from 37 and
  // handed d36@48 to the hub, below its position (not sent). A stalled browser then read 1@142 and the check found
  // that the hub "read" d36@48, which it did only 270 ms after it published 1@142. It now asks whether the hub had
  // read the change before it published the one received.
  const readAfter = sseSeed(1926, { balanceBy: 'load', view: 'guarded', groups: false, form: 'rx', policy: 'halt', start: 'now', leaseScheme: 'dotnet', positions: 'lsn', relay: 'jetstream', source: 'memory', sse: 'on' });
  it(`sse-gap: a change the hub read only after it published a later one: ${replayLine(readAfter)}`, async () => {
    const { stats, violations } = await runSimulation(readAfter);
    expect(violations).toEqual([]);
    expect(stats.faults['sse.hostHoles']).toBeGreaterThan(0);
  });
  // sse-order, then sse-gap (seed 1539, a simulation bug once the hub kept documents in order): after an admin
  // reset, merged partition 12 re-read [5FA00000, FF) from 4; h4's hub had published d312@181 under EPK-range lease
  // BF400000-FF (which it had read from 168: another host read d312@166). The re-read brought d312@166: sent after
  // d312@181 before; now left out, and the gap check asked for it. It passes over a change whose document the
  // chain already holds at a newer LSN (`sse.olderVersion`): no hub can send it in order any more.
  const olderVersion = sseSeed(1539, { balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'time', leaseScheme: 'dotnet', positions: 'lsn', relay: 'off', source: 'memory', sse: 'on' });
  it(`sse-order, sse-gap: a merged partition re-read brings back an older version than one published: ${replayLine(olderVersion)}`, async () => {
    // Later fixes (the bootstrap's lock hold, tombstones, recorded children) moved this schedule: the replay guards
    // the scenario (no violation); the unit tests assert the rule. Since the dotnet scheme's records it failed again
    // the way seed 1713 did (a browser reset at h4-5's position, BF400000-FF:198, past d300@176; merged 12 re-read
    // d300@147): the browser stands past the newer version, not owed the older one (`sse.olderVersion`).
    // Since the hub no longer publishes a re-read below what it published over the range (seed 1611 below), the
    // browser starts over past d300@176's re-read and the gap check has no older version to pass over.
    const { stats, violations } = await runSimulation(olderVersion);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    expect(stats.faults['sse.resets']).toBeGreaterThan(0);
  });
  // sse-order (seed 1611, a hub bug): h1-2 published d29@15, d29@42 (a delete) and d29@67 under partition 4
  // ([, 2A800000)); after an admin reset, merged partition 8 ([, 3FC00000): a part the hub never read) re-read its
  // range from the start. d29@67 had left the replay buffer, so the hub could not tell the re-read from what it had
  // sent: it reset its clients at its position (4 at 68), then sent them d29@15, d29@42 and d29@67 again (a browser
  // that reloaded its state went back to an older version, then lost the document). The check saw no disorder (a
  // reset starts a new chain); it now also reports a change older than a version the browser stands past. The hub
  // no longer publishes a re-read up to the furthest it published over the range: a `reset` stands past it (the
  // state it makes the browser load has it), and in snapshot mode clients start over from the view once the
  // re-read has passed it (test/sse/lineage.test.ts).
  const rereadPastBuffer = sseSeed(1611, { balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'time', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'off', source: 'memory', sse: 'on' });
  it(`sse-order: an older version re-read after an admin reset once the newer one left the replay buffer: ${replayLine(rereadPastBuffer)}`, async () => {
    const { stats, violations } = await runSimulation(rereadPastBuffer);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    expect(stats.faults['sse.resets']).toBeGreaterThan(0);
  });
  // Found by the fix above before it was done (both pass on the hub before it): sse-client-behind (seed 98, snapshot
  // mode): merged partition 14 re-read its range up to 162 in one batch at h4-5, whose host then lost the lease; the
  // hub had held the re-read back until the re-read passed 162 and started no one over, so its browsers never got
  // d2@62 and d42@67. Clients now start over from the view after each batch of a re-read held back. sse-duplicate
  // (seed 83, snapshot mode): a snapshot held partition 4 at 359 (this host's re-read) beside EPK-range lease
  // -7F800000 at 388 (another host's), d343@361 a row; 4 then read d343@361 and the hub sent it (a client's own mark
  // of the token settled it); a part of the range standing further now makes the change undecidable (start over).
  const heldRereadLeft = sseSeed(98, { balanceBy: 'count', view: 'exactlyOnce', groups: false, form: 'rx', policy: 'halt', start: 'time', leaseScheme: 'dotnet', positions: 'opaque', relay: 'amqp', source: 'memory', sse: 'on' });
  const ownMarkBelowPart = sseSeed(83, { balanceBy: 'count', view: 'guarded', groups: true, form: 'rx', policy: 'deadLetter', start: 'time', leaseScheme: 'dotnet', positions: 'lsn', relay: 'off', source: 'memory', sse: 'on' });
  for (const [what, config] of [['sse-client-behind: a re-read held back whose reading moved to another host', heldRereadLeft], ['sse-duplicate: a snapshot holding a token beside a part of its range read further', ownMarkBelowPart]] as const) {
    it(`${what}: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['sse.snapshotMode']).toBe(1);
      expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    });
  }
  // sse-client-behind (seed 5149, a hub bug, reached once the lease fix of 465a691 moved the schedule): after an admin
  // reset, merged partition 7 ([7F800000, FF)) re-read at h0-1 from 273, below its parts' 359: the hub held it back
  // up to 359 and started its clients over after each batch. Browser c0's snapshot read the view at 32.8 s (no
  // position of 7 yet) and its rows waited on the connection; the re-read passed 359 at 33.1 s, and the hub started
  // over its live clients only: c0 went live at 34.5 s on rows that lacked 7's last pages (d334@354, d90@355,
  // d336@356 of the lower part, which the view held at 351), which the hub never publishes. A snapshot whose rows
  // the hub passed a held re-read after is now started over (test/sse/lineage.test.ts).
  const heldRereadMidSnapshot = sseSeed(5149, { balanceBy: 'count', view: 'guarded', groups: true, form: 'rx', policy: 'deadLetter', start: 'time', leaseScheme: 'dotnet', positions: 'lsn', relay: 'off', source: 'memory', sse: 'on' });
  it(`sse-client-behind: a held re-read passed while a snapshot's rows were being sent: ${replayLine(heldRereadMidSnapshot)}`, async () => {
    const { stats, violations } = await runSimulation(heldRereadMidSnapshot);
    expect(violations).toEqual([]);
    expect(stats.faults['sse.snapshotMode']).toBe(1);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    expect(stats.faults['sse.rereads']).toBeGreaterThan(0);
  });
  // sse-duplicate (seed 6114, a hub bug; fails on 6c34481 too): h5-6's hub loaded its start positions from the view
  // when its host joined (2 at 43); the host froze twice, and took partition 2's lease only later, at a checkpoint
  // other hosts had moved to 97, so the hub published 2 from 98. A browser's snapshot then had row d3@92 (2 at 104). After
  // an admin reset, merged partition 11 ([1FE00000, FF)) read on from 91, its least advanced part's mark, and
  // brought d3@92: the hub took what it had published of 2 above 43 to be all in its buffer (held, found by
  // identity), and sent it. The hub now counts a partition's first change, whatever the start, as where it began
  // publishing it (below it, clients had it from elsewhere), for a re-read over the range and for another
  // process's ids (test/sse/resumeLog.test.ts).
  const startBelowFirstRead = sseSeed(6114, { balanceBy: 'count', view: 'exactlyOnce', groups: true, form: 'rx', policy: 'deadLetter', start: 'time', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'amqp', source: 'memory', sse: 'on' });
  it(`sse-duplicate: a partition first read well past the view's position when the hub started: ${replayLine(startBelowFirstRead)}`, async () => {
    const { stats, violations } = await runSimulation(startBelowFirstRead);
    expect(violations).toEqual([]);
    expect(stats.faults['sse.snapshotMode']).toBe(1);
    expect(stats.faults['host.pause']).toBeGreaterThan(0);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
  });
  // sse-gap (seeds 6030, 6146, the same hub bug's other face, hidden by the simulation until this fix): the gap check
  // passed over a resume from another hub's id in snapshot mode (`sse.unread`). h6-7 replayed a browser's id of
  // another hub holding 2 at 79 (6146: 4 at 10) from its buffer, which held 2 only from 124 (4 from 32): its start for the
  // partition (the view's positions when it started) vouched for 79, and d232@80 never came. The hub now needs such an id to stand just below
  // the first change it published of the partition; the check reports the gap in snapshot mode too.
  const variant = { faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, view: 'exactlyOnce', groups: false, form: 'rx', leaseScheme: 'dotnet', positions: 'lsn', source: 'memory', sse: 'on' } as const;
  const foreignIdsBelowFirstRead: SimConfig[] = [
    { ...variant, seed: 6030, balanceBy: 'load', policy: 'deadLetter', start: 'time', relay: 'amqp' },
    { ...variant, seed: 6146, balanceBy: 'count', policy: 'halt', start: 'beginning', relay: 'off' },
  ];
  for (const config of foreignIdsBelowFirstRead) {
    it(`sse-gap: another hub's id below the first change the hub read of a partition: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['sse.snapshotMode']).toBe(1);
    });
  }
  // sse-own-id-refused (seed 98, a hub bug found by reading `ResumeLog.holdRereads`, then by this check): merged
  // partition 14's re-read at h4-5 was held back up to 162, the furthest the hub had published over its range, and its
  // reading then ended on that host: the hold stayed open, and every resume of an id over the range was refused for
  // the hub's life (`unknown-stream` for its ids holding 14 at a snapshot's 67, `too-old` past that check), its own
  // latest ids included. A held re-read is over once its ownership here ends or other tokens published past its
  // end over its whole range; ids standing at or past what the hub was handed of it resume (test/sse/resumeLog.test.ts).
  // The browsers come back once more at quiescence (`sse.probes`), so a seed sees a hub that refuses what it sent.
  // sse-own-id-refused (seed 81, a hub bug, found with the check): h2-3's snapshots named partition 0, which other
  // hosts wrote to the view after the hub started and which it never read; its own ids held it, and it refused them
  // (`unknown-stream`: with seed 98, 37 of seeds 1-200 of `--faults all --sse on`). It now knows the tokens its
  // snapshots named.
  const ownIdsOfSnapshot = sseSeed(81, { balanceBy: 'load', view: 'exactlyOnce', groups: true, form: 'rx', policy: 'deadLetter', start: 'time', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'off', source: 'memory', sse: 'on' });
  for (const [what, config] of [['a re-read held back whose reading ended on this host', heldRereadLeft], ['an id holding a snapshot\'s position of a partition the hub never read', ownIdsOfSnapshot]] as const) {
    it(`sse-own-id-refused: ${what}: ${replayLine(config)}`, async () => {
      const { stats, violations } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['sse.snapshotMode']).toBe(1);
      expect(stats.faults['sse.probes']).toBeGreaterThan(0);
    });
  }
  // sse-client-behind (seed 1507 on d44f636, a simulation bug): h1-2 published d190@186 under EPK-range lease
  // -3FC00000; merged partition 9 ([, 4FB00000)) re-read from 126 after an admin reset, and the hub started its clients
  // over (a `reset` at its position, -3FC00000:215). Browser c2 then received 9's re-read up to d218@166, not d190@167,
  // older than the d190@186 it stands past (the hub holds it and does not send a document back). The quiescence check
  // passed over an older version only when the chain had received the newer one; like the gap check, it now passes
  // over one whose newer version the hub was handed before under a token the browser stands at or past. A later merge
  // moved this schedule (it passed on main before the fix): the replay guards the scenario; the unit test in
  // test/sse/lineage.test.ts asserts the hub's rule.
  const olderStoodPast = sseSeed(1507, { balanceBy: 'load', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'function', leaseScheme: 'dotnet', positions: 'lsn', relay: 'amqp', source: 'memory', sse: 'on' });
  it(`sse-client-behind: an older version re-read after a reset past a newer one published over part of the range: ${replayLine(olderStoodPast)}`, async () => {
    const { violations } = await runSimulation(olderStoodPast);
    expect(violations).toEqual([]);
  });
  // sse-duplicate (seed 1614, a hub bug): a browser's snapshot named EPK-range lease 7F800000-BF400000 at 187; after
  // an admin reset h8's hub read the same range under partition 6's own lease from 63, and the ids it sent the
  // browser held 6 at the hub's position (88) beside 7F800000-BF400000:187. On a resume the hub took the client's
  // own mark of 6 (88) alone and sent d106@91 again (a row of its snapshot). A client stands, in a partition, at the
  // furthest of its own mark and what the other tokens over its range hold; the gap check reads ids the same way.
  const sameRangeOtherToken = sseSeed(1614, { balanceBy: 'count', view: 'guarded', groups: true, form: 'rx', policy: 'deadLetter', start: 'beginning', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'off', source: 'memory', sse: 'on' });
  it(`sse-duplicate: a range re-read under the partition's own lease, a snapshot's positions naming its EPK-range lease: ${replayLine(sameRangeOtherToken)}`, async () => {
    const { stats, violations } = await runSimulation(sameRangeOtherToken);
    expect(violations).toEqual([]);
    expect(stats.faults['sse.snapshotMode']).toBe(1);
  });
  // sse-client-behind (seed 1888, a simulation bug): browser c3's snapshot at h4-5 held partition 0 at 137 (rows of
  // d39, d29 and d47 absent: their changes at 112, 122 and 129 were deletes); 0 split, and the ids the hub sent since
  // held child 1 at the hub's position (76) beside 0:137. Child 1 then re-read 108–129, which the hub rightly did not
  // send (1 inherits 137 from 0). The quiescence check took child 1's own mark (76) alone; like the hub and the gap
  // check, it now takes the furthest of a token's own mark and what the other tokens over its range hold. This
  // session's start-up and timing changes (leases listed beside the first `.info` read, the per-lease objects made
  // when first needed) moved the schedule: seed 1888 no longer reaches `sse.inheritedPast`, nor does any seed
  // 1–600 with these options, so the replay guards the scenario (no violation, a split still in the run).
  const inheritedPast = sseSeed(1888, { balanceBy: 'count', view: 'exactlyOnce', groups: false, form: 'rx', policy: 'halt', start: 'time', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'amqp', source: 'memory', sse: 'on' });
  it(`sse-client-behind: a split child re-read below its parent's mark in a snapshot's positions, deletes among it: ${replayLine(inheritedPast)}`, async () => {
    const { stats, violations } = await runSimulation(inheritedPast);
    expect(violations).toEqual([]);
    expect(stats.faults['source.split']).toBeGreaterThan(0);
  });
  // sse-duplicate (seeds 5 and 186): an admin reset made one lease over a merged partition (8, 14) whose range had
  // been read as EPK-range leases at different positions; the hub took the least advanced for the new lease and
  // sent the changes of the part ahead again (seed 5: to a live client, once they had left the replay buffer;
  // seed 186: to a client whose snapshot had them as rows, which the hub had not published itself). The hub cannot
  // tell which part a change is from: where neither its buffer nor the client's marks tell, the client starts over
  // (a `reset`, or a new snapshot), and ids from before get one too.
  const resetMerged: SimConfig = { seed: 5, faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, balanceBy: 'load', view: 'exactlyOnce', groups: true, form: 'rx', policy: 'deadLetter', start: 'function', leaseScheme: 'dotnet', positions: 'lsn', relay: 'off', source: 'memory', sse: 'on' };
  it(`sse-duplicate: a live client, a merged partition re-read after an admin reset: ${replayLine(resetMerged)}`, async () => {
    const { stats, violations } = await runSimulation(resetMerged);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    expect(stats.faults['sse.resets']).toBeGreaterThan(0);
  });
  const resetSnapshot: SimConfig = { seed: 186, faults: FAULT_SETS.filter((f) => f !== 'twin'), hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'beginning', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'amqp', source: 'memory', sse: 'on' };
  it(`sse-duplicate: a snapshot's rows, a merged partition re-read after an admin reset: ${replayLine(resetSnapshot)}`, async () => {
    const { stats, violations } = await runSimulation(resetSnapshot);
    expect(violations).toEqual([]);
    expect(stats.faults['admin.reset']).toBeGreaterThan(0);
    expect(stats.faults['sse.snapshots']).toBeGreaterThan(0);
  });
  it('--faults all draws it from a PRNG of its own, in the Rx form only', () => {
    const drawn = seeds(1, 40).map(drawVariant);
    expect(new Set(drawn.map((v) => v.sse))).toEqual(new Set(['on', 'off']));
    for (const v of drawn) if (v.form === 'handler') expect(v.sse).toBe('off');
  });
});

/**
 * Features that entered the simulation with their promises (issue 25): the `deadLettered` event against the
 * dead-letter store, a handler's `context.signal` reason, and OpenTelemetry counters against the events (a
 * fifth of the seeds, `randomFor('telemetry')`: seed 6 is one). Each check fails its mutant (test/sim/README.md).
 */
describe('simulation: dead-letter events, the ownership signal and telemetry', () => {
  const config: SimConfig = { seed: 6, faults: ['host', 'poison', 'lease', 'source', 'view', 'sink'], hosts: { min: 2, max: 4 }, chaosMs: 10_000, form: 'handler' };
  it(`every dead-letter write answered is announced once, signals abort with an AbortError, metrics add up: ${replayLine(config)}`, async () => {
    const { stats, violations } = await runSimulation(config);
    expect(violations).toEqual([]);
    expect(stats.faults['deadLetter.events']).toBeGreaterThan(0);
    expect(stats.faults['handler.signalAborted']).toBeGreaterThan(0);
    expect(stats.faults['telemetry.runs']).toBe(1);
    expect(stats.faults['telemetry.deadLetters']).toBeGreaterThan(0);
  });
});

/**
 * Seeds that failed once the first page of a lease was read beside the write that makes it this host's
 * (FirstPages moved their schedules; neither failure was its own). 532, checkpoint-moved-backwards and
 * deposed-view-write-accepted: h1's bootstrap created and claimed leases 0-2, its `.info` create failed and its
 * lock was removed at once; h0, whose lease reads lagged by 256 ms, took the lock 100 ms later, listed no lease,
 * and created split children 3 and 4 from "now" beside lease 2 (child 3 at LSN 6, parent's checkpoint 11). The
 * bootstrap now keeps its lock an expiration after a failed `.info` too (handed over, naming the leases, if
 * its host stops meanwhile). 534, view-differs-from-source (a
 * simulation bug): a rewind re-read d28@57, written before partition 1's "now" start, into the exactlyOnce view,
 * which skipped it as a replay (so it counted as delivered); an admin reset then let h2, running since before
 * the first leases' creator started, create lease 1 again at its own earlier "now", so d28@57 no longer counted
 * as before the start, and the view, its positions kept, skips it still.
 */
describe('simulation: seeds the FirstPages schedule found', () => {
  const opts: Omit<SimConfig, 'seed'> = {
    faults: ['lease', 'source', 'hang', 'view', 'host', 'sink', 'clock', 'late', 'bootstrap', 'poison', 'topology', 'admin', 'broker'],
    hosts: { min: 2, max: 6 },
    balanceBy: 'count',
    view: 'exactlyOnce',
    groups: false,
    form: 'rx',
    policy: 'deadLetter',
    start: 'now',
    leaseScheme: 'rxfeed',
    positions: 'opaque',
    relay: 'jetstream',
    source: 'memory',
    sse: 'on',
  };
  for (const seed of [532, 534]) {
    const config: SimConfig = { ...opts, seed };
    it(`no violation: ${replayLine(config)}`, () => expectNoViolations(config));
  }
});

/**
 * A bootstrap whose lease creates landed and whose `.info` create failed (a 503 of the `lease` set): its host went
 * on with the leases and nobody wrote `.info` while it ran (`info-never-written` at quiescence, seeds 15 and 23
 * of `--faults lease --hosts 1-1 --chaos-ms 3000`). With more hosts starting together, the one waiting on the
 * lock wrote it only once the lock's hold ended, an expiration later (seed 34 of `--hosts 2-3`). The host now
 * tries again an acquire interval later, takes its lock back and writes `.info` (`bootstrap.infoRetried`; unit
 * tests in test/leases/infoRetry.test.ts).
 */
describe('simulation: a failed .info create, tried again by its host', () => {
  const configs: SimConfig[] = [
    { seed: 15, faults: ['lease'], hosts: { min: 1, max: 1 }, chaosMs: 3_000 },
    { seed: 34, faults: ['lease'], hosts: { min: 2, max: 3 }, chaosMs: 3_000 },
  ];
  for (const config of configs) {
    it(`writes .info at its next try: ${replayLine(config)}`, async () => {
      const { violations, stats } = await runSimulation(config);
      expect(violations).toEqual([]);
      expect(stats.faults['bootstrap.infoFailed']).toBeGreaterThan(0);
      expect(stats.faults['bootstrap.infoRetried']).toBeGreaterThan(0);
    });
  }
});
