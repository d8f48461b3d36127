/**
 * Failover time after a host dies, divided by the lease expiration (target ≤ 1.2).
 *
 * In-process, virtual-time version: 3 hosts share 12 leases on a MemoryLeaseStore; one host is frozen
 * (a SIGKILL: no release, no renewals, its writes never arrive) at a random moment, and the clock runs
 * until the survivors hold every lease. Failover = kill → last of its leases held by a survivor. Repeated
 * for many kill moments (the phase against the renew and scan timers matters). The multi-process SIGKILL
 * run over the emulator needs changeFeed + CosmosSource and is not part of this file.
 *
 * Run: npx tsx bench/failover.ts
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

await report('rxfeed defaults (13 s / 40 s / 60 s)', {});
await report('rxfeed, short timings (1 s / 3 s / 5 s)', {
  leaseAcquireIntervalMs: 1_000,
  leaseRenewIntervalMs: 3_000,
  leaseExpirationMs: 5_000,
});
console.log('target: max ≤ 1.2 (virtual time, in-process; the multi-process SIGKILL run lands with CosmosSource)');
