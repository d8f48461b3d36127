import type { SimConfig } from './config.js';

/** The fault sets of `--faults all` (every set but `twin`), as the seeds of the retaken-parent bug ran them. */
const LINEAGE_FAULTS = ['lease', 'source', 'hang', 'view', 'host', 'sink', 'clock', 'late', 'bootstrap', 'poison', 'topology', 'admin', 'broker'] as const;

/** A seed that found a bug of issue 25, and the invariant it broke before the fix. */
export interface Found {
  readonly bug: string;
  readonly invariant: string;
  readonly config: SimConfig;
}

/**
 * Seeds the new fault sets and variants found, each for a bug listed in issue 25 (see test/sim/README.md,
 * "Found and fixed"): `sim.test.ts` runs each as a regression test.
 */
export const FOUND_BEING_FIXED: readonly Found[] = [
  { bug: 'clock skew: two live owners (issue 25 item 6, leases)', invariant: 'two-live-owners', config: { seed: 1, faults: ['clock'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
  { bug: 'clock skew: needless drops and retakes (issue 25 item 6, leases)', invariant: 'lease-churn', config: { seed: 5, faults: ['clock'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
  { bug: "a split parent's late view write after its child's, exactlyOnce (issue 25 item 2, views)", invariant: 'deposed-view-write-accepted', config: { seed: 17, faults: ['host', 'source', 'view', 'sink', 'hang'], hosts: { min: 2, max: 6 }, chaosMs: 10_000, view: 'exactlyOnce' } },
  { bug: "a split parent's view write accepted after its child's, guarded (issue 25 item 2, views)", invariant: 'deposed-view-write-accepted', config: { seed: 17, faults: ['host', 'source', 'view', 'sink', 'hang'], hosts: { min: 2, max: 6 }, chaosMs: 10_000 } },
  { bug: 'stop() during the bootstrap (issue 25 item 3, leases)', invariant: 'write-after-stop', config: { seed: 2, faults: ['bootstrap'], hosts: { min: 2, max: 3 }, chaosMs: 5_000 } },
  { bug: "startFrom 'now' taken at the first read (issue 25 item 1, feed)", invariant: 'change-never-delivered', config: { seed: 9, faults: ['host', 'source'], hosts: { min: 2, max: 4 }, chaosMs: 6_000, start: 'now' } },
  { bug: "startFrom 'now' pinned at a host's clock, off the source's (issue 25 item 1 with item 6's clocks, feed)", invariant: 'change-never-delivered', config: { seed: 4, faults: ['clock', 'host'], hosts: { min: 2, max: 4 }, chaosMs: 5_000, start: 'now' } },
  { bug: "the same through a startFrom function (issue 25 item 1 with item 6's clocks, feed)", invariant: 'change-never-delivered', config: { seed: 4, faults: ['clock', 'host'], hosts: { min: 2, max: 4 }, chaosMs: 5_000, start: 'function' } },
  { bug: 'a lease write looping on conflicts without a delay when reads lag (issue 25 suspicion 7, leases)', invariant: 'lease-request-spin', config: { seed: 4, faults: ['late'], hosts: { min: 2, max: 4 }, chaosMs: 8_000 } },
  { bug: "a failed bootstrap's lock and lease creates landing after stop() (leases; seeds 10, 138, 212, 319 of --faults all)", invariant: 'write-after-stop', config: { seed: 3, faults: ['lease', 'bootstrap'], hosts: { min: 2, max: 2 }, chaosMs: 3_000 } },
  { bug: "the simulated handler writing on after its ownership ended (the simulation's handler; seeds 63, 85, 254, 348 of --faults all)", invariant: 'write-after-takeover-accepted', config: { seed: 71, faults: ['lease', 'view'], hosts: { min: 2, max: 2 }, chaosMs: 10_000, groups: true, form: 'handler' } },
  { bug: "a gone parent's lease taken again after its children were created, read above their epoch (issue 25, leases; seed 83 of --faults all)", invariant: 'deposed-view-write-accepted', config: { seed: 83, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: true, form: 'handler', policy: 'deadLetter', start: 'time', leaseScheme: 'dotnet', positions: 'lsn', relay: 'off', source: 'memory' } },
  { bug: "a gone parent's lease taken again after its children were created, read above their epoch (issue 25, leases; seed 96 of --faults all)", invariant: 'deposed-view-write-accepted', config: { seed: 96, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'now', leaseScheme: 'dotnet', positions: 'opaque', relay: 'amqp', source: 'memory' } },
  { bug: "a gone parent's lease taken again after its children were created, read above their epoch (issue 25, leases; seed 121 of --faults all)", invariant: 'deposed-view-write-accepted', config: { seed: 121, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'exactlyOnce', groups: true, form: 'handler', policy: 'deadLetter', start: 'function', leaseScheme: 'dotnet', positions: 'opaque', relay: 'off', source: 'memory' } },
  { bug: "a gone parent's lease taken again after its children were created, read above their epoch (issue 25, leases; seed 151 of --faults all)", invariant: 'deposed-view-write-accepted', config: { seed: 151, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'load', view: 'exactlyOnce', groups: true, form: 'handler', policy: 'deadLetter', start: 'time', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'off', source: 'memory' } },
  { bug: "a gone parent's lease taken again after its children were created, read above their epoch (issue 25, leases; seed 227 of --faults all)", invariant: 'deposed-view-write-accepted', config: { seed: 227, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: true, form: 'handler', policy: 'deadLetter', start: 'beginning', leaseScheme: 'dotnet', positions: 'opaque', relay: 'off', source: 'memory' } },
  { bug: "a split child over its parent's whole range created again by the parent's retry after it was replaced in turn, below its old epoch, and taken until it wrote above its own children (issue 25, leases; seed 209 of --faults all)", invariant: 'epoch-went-back', config: { seed: 209, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: false, form: 'handler', policy: 'deadLetter', start: 'beginning', leaseScheme: 'rxfeed', positions: 'opaque', relay: 'off', source: 'memory' } },
  { bug: 'a host judged idle while a late view write issued before the faults stopped was still on its way (simulation; seed 3 of --faults all with the seed 45 fix)', invariant: 'credit-not-returned', config: { seed: 3, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: false, form: 'rx', policy: 'deadLetter', start: 'now', leaseScheme: 'dotnet', positions: 'opaque', relay: 'amqp', source: 'memory', sse: 'off' } },
  { bug: "a bootstrap lock removed as stale by a host whose wall clock ran ahead, right after the bootstrap finished; that host bootstrapped on lagging listings and created a gone parent's lease again beside its children, read above their epoch (issue 25, leases; seed 338 of --faults all)", invariant: 'deposed-view-write-accepted', config: { seed: 338, faults: LINEAGE_FAULTS, hosts: { min: 2, max: 6 }, balanceBy: 'count', view: 'guarded', groups: true, form: 'handler', policy: 'halt', start: 'beginning', leaseScheme: 'rxfeed', positions: 'lsn', relay: 'off', source: 'memory', sse: 'off' } },
];
