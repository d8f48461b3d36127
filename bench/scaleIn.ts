/**
 * Graceful scale-in: one host of 3 stops; time until each lease it held is owned (and so read) by a
 * survivor, divided by `leaseAcquireIntervalMs` (target ≤ 0.1 at the defaults).
 *
 * In-process, virtual time: real coordinators with the default timings on a MemoryLeaseStore. The hosts
 * settle, then one of them stops at a pseudo-random phase against the renew and scan timers (each run a
 * different phase). Two workloads: "busy", every partition has changes flowing (each owner checkpoints
 * each lease every `BUSY_CHECKPOINT_MS`, and drains with a final checkpoint), and "idle", nothing to
 * checkpoint (only renewals). Nothing is re-delivered in either: a stopping host drains, checkpoints and
 * releases before a survivor reads (test/feed/scaleIn.test.ts proves it end to end).
 *
 * Run: npx tsx bench/scaleIn.ts
 */
import { LEASE_DEFAULTS } from '../src/leases/createLeaseCoordinator.js';
import { MemoryLeaseStore } from '../src/leases/MemoryLeaseStore.js';
import { FakePartitions, startHost, type SimHost } from '../test/leases/hosts.js';
import { VirtualScheduler } from '../test/leases/virtualScheduler.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const BUSY_CHECKPOINT_MS = 1_000;
const STEP_MS = 50;
const ACQUIRE_MS = LEASE_DEFAULTS.leaseAcquireIntervalMs;

/** Per lease of the stopping host: ms from `stop()` until a survivor owns it. */
async function handoverMs(seed: number, partitionCount: number, busy: boolean): Promise<number[]> {
  const clock = new VirtualScheduler(1_700_000_000_000);
  const store = new MemoryLeaseStore();
  const parts = new FakePartitions(partitionCount);
  const hosts = ['a', 'b', 'c'].map((name) => startHost(name, store, clock, parts.listPartitions));
  const drainWithCheckpoint = (host: SimHost) =>
    host.coordinator.acquired$.subscribe((o) => o.onDrain(() => o.checkpoint(`drained-${clock.now()}`)));
  if (busy) for (const h of hosts) drainWithCheckpoint(h);
  const run = async (ms: number) => {
    for (const end = clock.now() + ms; clock.now() < end; ) {
      if (busy && clock.now() % BUSY_CHECKPOINT_MS < STEP_MS) {
        for (const h of hosts) for (const o of h.coordinator.owned()) void o.checkpoint(`at-${clock.now()}`).catch(() => undefined);
      }
      await clock.advance(STEP_MS);
    }
  };
  // Settle, then stop at a pseudo-random phase within two minutes.
  await run(5 * 60_000 + ((seed * 7_919) % 120_000));
  const leaving = hosts[seed % 3]!;
  const survivors = hosts.filter((h) => h !== leaving);
  const ids = leaving.coordinator.owned().map((o) => o.lease.id);
  const stoppedAt = clock.now();
  const took = new Map<string, number>();
  for (const s of survivors) {
    s.coordinator.acquired$.subscribe((o) => {
      if (ids.includes(o.lease.id) && !took.has(o.lease.id)) took.set(o.lease.id, clock.now() - stoppedAt);
    });
  }
  void leaving.coordinator.stop();
  for (let waited = 0; took.size < ids.length && waited < 2 * LEASE_DEFAULTS.leaseExpirationMs; waited += STEP_MS) await run(STEP_MS);
  for (const h of hosts) h.gate.pause(); // drop them; nothing else runs on this clock
  return ids.map((id) => took.get(id) ?? Number.POSITIVE_INFINITY);
}

async function report(partitionCount: number, busy: boolean): Promise<void> {
  const ratios: number[] = [];
  for (let seed = 1; seed <= RUNS; seed++) for (const ms of await handoverMs(seed, partitionCount, busy)) ratios.push(ms / ACQUIRE_MS);
  ratios.sort((a, b) => a - b);
  const mean = ratios.reduce((s, r) => s + r, 0) / ratios.length;
  const p = (q: number) => ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))]!;
  const label = `${partitionCount} partitions, 3 hosts, ${busy ? 'busy' : 'idle'}`;
  console.log(
    `${label.padEnd(32)} handover/acquire interval over ${ratios.length} leases (${RUNS} stops): ` +
      `mean ${mean.toFixed(2)}  p50 ${p(0.5).toFixed(2)}  p95 ${p(0.95).toFixed(2)}  max ${ratios.at(-1)!.toFixed(2)}`,
  );
}

for (const partitionCount of [12, 64]) {
  await report(partitionCount, true);
  await report(partitionCount, false);
}
