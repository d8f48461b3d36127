/**
 * Lease-store requests per partition per minute while idle (no changes, nothing to checkpoint), rxfeed
 * defaults versus the .NET change feed processor defaults (acquire 13 s, renew 17 s, expiry 60 s).
 *
 * rxfeed is measured: real coordinators on a request-counting MemoryLeaseStore, in virtual time.
 * .NET is modelled from its source: each host lists the leases every acquire interval (1 query) and
 * renews each lease it owns every renew interval; its RenewAsync reads the lease before the conditional
 * replace (2 requests). The "strict" column counts a .NET renewal as 1 request, which favours .NET.
 *
 * Run: npx tsx bench/leaseCost.ts
 */
import type { Lease, NewLease } from '../src/leases/Lease.js';
import type { LeaseStore } from '../src/leases/LeaseStore.js';
import { LEASE_DEFAULTS } from '../src/leases/createLeaseCoordinator.js';
import { MemoryLeaseStore } from '../src/leases/MemoryLeaseStore.js';
import { FakePartitions, startHost } from '../test/leases/hosts.js';
import { VirtualScheduler } from '../test/leases/virtualScheduler.js';

class CountingStore implements LeaseStore {
  requests = 0;
  constructor(private readonly inner: LeaseStore) {}
  list(prefix: string) {
    this.requests++;
    return this.inner.list(prefix);
  }
  read(id: string) {
    this.requests++;
    return this.inner.read(id);
  }
  createIfAbsent(lease: NewLease) {
    this.requests++;
    return this.inner.createIfAbsent(lease);
  }
  replace(lease: Lease) {
    this.requests++;
    return this.inner.replace(lease);
  }
  delete(lease: Lease) {
    this.requests++;
    return this.inner.delete(lease);
  }
}

const WARMUP_MS = 10 * 60_000;
const MEASURE_MS = 60 * 60_000;

async function measure(partitionCount: number, hostCount: number): Promise<number> {
  const clock = new VirtualScheduler(1_700_000_000_000);
  const store = new CountingStore(new MemoryLeaseStore());
  const parts = new FakePartitions(partitionCount);
  const hosts = Array.from({ length: hostCount }, (_, i) => startHost(`h${i}`, store, clock, parts.listPartitions));
  await clock.advance(WARMUP_MS);
  const before = store.requests;
  await clock.advance(MEASURE_MS);
  const perPartitionPerMinute = (store.requests - before) / partitionCount / (MEASURE_MS / 60_000);
  for (const h of hosts) h.gate.pause(); // drop them; nothing else runs on this clock
  return perPartitionPerMinute;
}

function dotnet(partitionCount: number, hostCount: number, requestsPerRenewal: number): number {
  const lists = (hostCount * 60) / 13;
  const renewals = (partitionCount * 60 * requestsPerRenewal) / 17;
  return (lists + renewals) / partitionCount;
}

console.log(
  `rxfeed defaults: acquire ${LEASE_DEFAULTS.leaseAcquireIntervalMs} ms (settled: scan at next expiry, ≤ expiry/2), ` +
    `renew ${LEASE_DEFAULTS.leaseRenewIntervalMs} ms, expiry ${LEASE_DEFAULTS.leaseExpirationMs} ms`,
);
console.log('partitions hosts | rxfeed req/partition/min | .NET (read+replace) ratio | .NET strict (1 req/renew) ratio');
let worst = 0;
for (const [p, h] of [
  [4, 1],
  [4, 2],
  [16, 2],
  [16, 4],
  [64, 4],
  [256, 8],
] as const) {
  const ours = await measure(p, h);
  const net = dotnet(p, h, 2);
  const strict = dotnet(p, h, 1);
  worst = Math.max(worst, ours / strict);
  console.log(
    `${String(p).padStart(10)} ${String(h).padStart(5)} | ${ours.toFixed(2).padStart(24)} | ` +
      `${net.toFixed(2).padStart(6)} ${(ours / net).toFixed(2).padStart(6)}x | ${strict.toFixed(2).padStart(6)} ${(ours / strict).toFixed(2).padStart(6)}x`,
  );
}
console.log(`worst ratio against the strict .NET model: ${worst.toFixed(2)}x (target ≤ 0.5x)`);
