/**
 * A host whose wall clock is stepped (an NTP correction, a manual change of the system time). Lease time is
 * measured on a monotonic clock, so a step forward on a host that waits for a lease to expire does not make
 * it take the lease before its owner's own deadline; the wall clock only dates the documents.
 */
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLeaseCoordinator } from '../../src/leases/createLeaseCoordinator.js';
import type { LeaseCoordinator, OwnedLease } from '../../src/leases/LeaseCoordinator.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { FaultEnv, faultyLeaseStore, HostClock, VirtualClock } from '../support/faults/index.js';
import { FakePartitions } from './hosts.js';

const TIMINGS = { leaseAcquireIntervalMs: 1_000, leaseRenewIntervalMs: 1_000, leaseExpirationMs: 4_000 };
const live = (o: OwnedLease) => !o.signal.aborted;

interface Watched {
  readonly coordinator: LeaseCoordinator;
  readonly acquired: OwnedLease[];
}

function watch(coordinator: LeaseCoordinator): Watched {
  const acquired: OwnedLease[] = [];
  coordinator.acquired$.subscribe((o) => acquired.push(o));
  return { coordinator, acquired };
}

/** Leases `b` holds live while `a` still holds them live too. */
function overlaps(a: Watched, b: Watched): string[] {
  return b.acquired.filter(live).flatMap((held) => {
    const alsoA = a.acquired.find((o) => o.leaseToken === held.leaseToken && live(o));
    return alsoA ? [`lease ${held.leaseToken}: b at epoch ${held.epoch}, a at epoch ${alsoA.epoch}`] : [];
  });
}

describe('a wall clock stepped forward', () => {
  afterEach(() => void vi.useRealTimers());

  it('on the default clocks: the would-be taker does not take a lease before its owner’s deadline', async () => {
    // The system clocks, faked: `Date` (the wall clock, stepped below) and `performance` (monotonic).
    vi.useFakeTimers({ now: 1_700_000_000_000, toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] });
    // The owner measures on the monotonic clock whatever the defaults are: only the taker's defaults are under test.
    const monotonic: SchedulerLike = { now: () => performance.now(), schedule: asyncScheduler.schedule.bind(asyncScheduler) };
    const started = performance.now();
    const store = new MemoryLeaseStore();
    const env = new FaultEnv({ seed: 1, scheduler: monotonic });
    const parts = new FakePartitions(1);
    // The owner's renewals stall (10 s each) from some point on: its lease's version stays the one the taker saw.
    const ownerStore = faultyLeaseStore(store, { replace: [{ kind: 'slow', ms: 10_000, probability: 1, during: 'renewals stall' }] }, env);
    const a = watch(createLeaseCoordinator({ store: ownerStore, listPartitions: parts.listPartitions, owner: 'a', prefix: 'p.', scheduler: monotonic, now: () => Date.now(), ...TIMINGS }));
    await vi.advanceTimersByTimeAsync(1_500);
    expect(a.coordinator.owned()).toHaveLength(1);
    const b = watch(createLeaseCoordinator({ store, listPartitions: parts.listPartitions, owner: 'b', prefix: 'p.', ...TIMINGS }));
    await vi.advanceTimersByTimeAsync(1_500);
    expect(b.coordinator.owned()).toHaveLength(0);

    env.turnOn('renewals stall');
    await vi.advanceTimersByTimeAsync(800); // the taker has seen the last version the owner wrote
    vi.setSystemTime(Date.now() + 2_000); // an NTP step on both hosts' machine: only the wall clock moves
    const seen: string[] = [];
    for (let t = 0; t < 80; t++) {
      await vi.advanceTimersByTimeAsync(100);
      seen.push(...overlaps(a, b));
    }
    expect(seen).toEqual([]);
    // The owner's deadline passed and the taker has the lease: the step cost nothing else.
    expect(a.coordinator.owned()).toHaveLength(0);
    expect(b.coordinator.owned()).toHaveLength(1);
    // The timestamp other processes read is the wall clock's: later than the start plus the time run, by the step.
    const [lease] = (await store.list('p.')).leases.filter((l) => l.owner === 'b');
    expect(lease!.timestampMs).toBeGreaterThan(1_700_000_000_000 + (performance.now() - started));
    env.turnOff('renewals stall');
    await Promise.all([a.coordinator.stop(), b.coordinator.stop(), vi.advanceTimersByTimeAsync(20_000)]);
  });

  it('on virtual host clocks (as the simulation wires them): a step of the taker’s wall clock gives no two live owners', async () => {
    const clock = new VirtualClock(1_700_000_000_000);
    const hostA = new HostClock(clock, { uptimeMs: 5_000 });
    const hostB = new HostClock(clock, { uptimeMs: 900_000, skewMs: -700 });
    const store = new MemoryLeaseStore();
    const env = new FaultEnv({ seed: 1, scheduler: hostA });
    const parts = new FakePartitions(1);
    const ownerStore = faultyLeaseStore(store, { replace: [{ kind: 'slow', ms: 10_000, probability: 1, during: 'renewals stall' }] }, env);
    const a = watch(createLeaseCoordinator({ store: ownerStore, listPartitions: parts.listPartitions, owner: 'a', prefix: 'p.', scheduler: hostA, now: () => hostA.wallNow(), ...TIMINGS }));
    await clock.advance(1_500);
    const b = watch(createLeaseCoordinator({ store, listPartitions: parts.listPartitions, owner: 'b', prefix: 'p.', scheduler: hostB, now: () => hostB.wallNow(), ...TIMINGS }));
    await clock.advance(1_500);

    env.turnOn('renewals stall');
    await clock.advance(800);
    hostB.step(2_000);
    const seen: string[] = [];
    for (let t = 0; t < 80; t++) {
      await clock.advance(100);
      seen.push(...overlaps(a, b));
    }
    expect(seen).toEqual([]);
    expect(b.coordinator.owned()).toHaveLength(1);
    const [lease] = (await store.list('p.')).leases.filter((l) => l.owner === 'b');
    // Written with b's wall clock (700 ms behind, then stepped 2 s ahead), renewed within the last second.
    expect(lease!.timestampMs).toBeGreaterThan(clock.now());
    env.turnOff('renewals stall');
    await Promise.all([a.coordinator.stop(), b.coordinator.stop(), clock.advance(20_000)]);
  });
});
