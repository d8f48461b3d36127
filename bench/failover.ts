/**
 * Failover time after a host dies, divided by the lease expiration (target ≤ 1.2).
 *
 * 1. In-process, virtual time: 3 hosts share 12 leases on a MemoryLeaseStore; one host is frozen (no
 *    release, no renewals, its writes never arrive) at a random moment, and the clock runs until the
 *    survivors hold every lease. Failover = kill → last of its leases held by a survivor. Repeated for many
 *    kill moments (the phase against the renew and scan timers matters).
 * 2. With `--processes [runs]`: the real thing, in real time: 3 child processes (changeFeed + CosmosSource +
 *    CosmosLeaseStore) share a lease container on the local emulator over HTTP while documents keep
 *    arriving; the one holding the most leases gets SIGKILL (lease expiration 2 s, see
 *    test/leases/fixtures/sigkillScenario.ts). Failover = SIGKILL → its leases held by survivors.
 *
 * Run: npx tsx bench/failover.ts            (virtual)
 *      npx tsx bench/failover.ts --processes 3
 */
import { LEASE_DEFAULTS } from '../src/leases/createLeaseCoordinator.js';
import type { LeaseCoordinatorOptions } from '../src/leases/createLeaseCoordinator.js';
import { MemoryLeaseStore } from '../src/leases/MemoryLeaseStore.js';
import { FakePartitions, startHost } from '../test/leases/hosts.js';
import { VirtualScheduler } from '../test/leases/virtualScheduler.js';

const RUNS = 60;

async function failoverMs(seed: number, timings: Partial<LeaseCoordinatorOptions>): Promise<number> {
  const expiry = timings.leaseExpirationMs ?? LEASE_DEFAULTS.leaseExpirationMs;
  const clock = new VirtualScheduler(1_700_000_000_000);
  const store = new MemoryLeaseStore();
  const parts = new FakePartitions(12);
  const hosts = ['a', 'b', 'c'].map((n) => startHost(n, store, clock, parts.listPartitions, timings));
  // Settle, then kill at a pseudo-random phase within two minutes.
  await clock.advance(5 * 60_000 + ((seed * 7_919) % 120_000));
  const victim = hosts[seed % 3]!;
  const victimLeases = new Set(victim.coordinator.owned().map((o) => o.lease.id));
  victim.gate.pause();
  const killedAt = clock.now();
  const survivors = hosts.filter((h) => h !== victim);
  const tookOver = () =>
    [...victimLeases].every((id) => survivors.some((h) => h.coordinator.owned().some((o) => o.lease.id === id)));
  await clock.advanceUntil(tookOver, 10 * expiry, 50);
  const elapsed = clock.now() - killedAt;
  for (const h of survivors) h.gate.pause();
  return elapsed;
}

async function report(label: string, timings: Partial<LeaseCoordinatorOptions>): Promise<void> {
  const expiry = timings.leaseExpirationMs ?? LEASE_DEFAULTS.leaseExpirationMs;
  const ratios: number[] = [];
  for (let seed = 1; seed <= RUNS; seed++) ratios.push((await failoverMs(seed, timings)) / expiry);
  ratios.sort((a, b) => a - b);
  const mean = ratios.reduce((s, r) => s + r, 0) / ratios.length;
  const p = (q: number) => ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))]!;
  console.log(
    `${label.padEnd(44)} failover/expiry over ${RUNS} kills: mean ${mean.toFixed(2)}  p50 ${p(0.5).toFixed(2)}  ` +
      `p95 ${p(0.95).toFixed(2)}  max ${ratios.at(-1)!.toFixed(2)}`,
  );
}

const processes = process.argv.indexOf('--processes');
if (processes >= 0) {
  const runs = Number(process.argv[processes + 1] ?? 3) || 3;
  const { startTestCosmos } = await import('../test/support/cosmos.js');
  const { runSigkillScenario } = await import('../test/leases/fixtures/sigkillScenario.js');
  const cosmos = await startTestCosmos({ initialRangeCount: 4 });
  const ratios: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const r = await runSigkillScenario(cosmos, `bench${i}`);
      const missed = r.written.filter((id) => !r.processed.has(id)).length;
      ratios.push(r.failoverMs / r.expirationMs);
      console.log(
        `run ${i + 1}: SIGKILL → takeover of ${r.victimLeases.length} lease(s) in ${r.failoverMs} ms = ` +
          `${(r.failoverMs / r.expirationMs).toFixed(2)} × expiration; ${r.written.length} changes, ${missed} missed`,
      );
    }
  } finally {
    await cosmos.stop();
  }
  console.log(`multi-process failover/expiry: mean ${(ratios.reduce((a, b) => a + b, 0) / ratios.length).toFixed(2)}, max ${Math.max(...ratios).toFixed(2)} (target ≤ 1.2)`);
  process.exit(0);
}

await report('rxfeed defaults (13 s / 40 s / 60 s)', {});
await report('rxfeed, short timings (1 s / 3 s / 5 s)', {
  leaseAcquireIntervalMs: 1_000,
  leaseRenewIntervalMs: 3_000,
  leaseExpirationMs: 5_000,
});
console.log('target: max ≤ 1.2 (virtual time, in-process; `--processes` for the multi-process SIGKILL run)');
