/**
 * Start and stop at awkward moments: a stop() while the bootstrap's creates are in flight, a bootstrap that
 * first waited out a dead host's lock, a stop() right after a lease was handed to the stopping host, a
 * bootstrap whose creates partly fail, a renewal that lands after its lease was lost.
 */
import { describe, expect, it } from 'vitest';
import { HANDED_OVER_LEASES } from '../../src/leases/coordinator/bootstrapLock.js';
import { isUntaken } from '../../src/leases/protocol/index.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { FaultEnv, faultyLeaseStore } from '../support/faults/index.js';
import { withReplace } from '../support/replacing.js';
import { FakePartitions, startHost } from './hosts.js';
import { VirtualScheduler } from './virtualScheduler.js';

const timings = { leaseAcquireIntervalMs: 13_000, leaseRenewIntervalMs: 40_000, leaseExpirationMs: 60_000 };
const isLease = (id: string) => /^p\.\d+$/.test(id);

/** `inner` whose lease creates answer only after `land()` (the bootstrap's creates are in flight until then). */
function slowCreates(inner: MemoryLeaseStore): { store: LeaseStore; land: () => void } {
  let land!: () => void;
  const landed = new Promise<void>((resolve) => (land = resolve));
  const store: LeaseStore = {
    list: (p) => inner.list(p),
    read: (id) => inner.read(id),
    createIfAbsent: async (l) => {
      if (isLease(l.id)) await landed;
      return inner.createIfAbsent(l);
    },
    replace: (l) => inner.replace(l),
    delete: (l) => inner.delete(l),
  };
  return { store, land };
}

describe('stop() during the bootstrap', () => {
  it('waits for the creates in flight and leaves nothing owned by the stopped host, its bootstrap lock released to nobody', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const inner = new MemoryLeaseStore();
    const { store, land } = slowCreates(inner);
    const parts = new FakePartitions(4);
    const a = startHost('a', store, clock, parts.listPartitions, timings);
    await clock.advance(10); // a holds the lock, its creates (claiming the leases as its own) are in flight

    let stopped = false;
    const stopping = a.coordinator.stop().then(() => (stopped = true));
    await clock.advance(10);
    expect(stopped).toBe(false);
    land();
    await clock.advance(10);
    await stopping;

    const leases = inner.snapshot().filter((l) => isLease(l.id));
    expect(leases).toHaveLength(4);
    expect(leases.filter((l) => l.owner !== null)).toEqual([]);
    // The lock is kept an expiration after `.info` landed (a host whose reads lag would bootstrap again), and
    // a stop() in that time releases it to nobody: no host waits on it, `.info` says the leases exist.
    expect((await inner.read('p..lock'))?.owner).toBeNull();
    expect(await inner.read('p..info')).toBeDefined();

    // The next host starts at once on them: no lock to wait out, no lease to wait out.
    const b = startHost('b', inner, clock, parts.listPartitions, timings);
    await clock.advance(1_000);
    expect(b.coordinator.owned()).toHaveLength(4);
    await b.coordinator.stop();
  });
});

describe('a bootstrap whose creates partly fail (the simulation, seed 138 of --faults all)', () => {
  /** Lease p.1's create fails at once; p.0, p.2 and p.3 are slow: still in flight when the bootstrap fails. */
  function partlyFailingCreates(clock: VirtualScheduler) {
    const inner = new MemoryLeaseStore();
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    const slow = (key: string) => ({ kind: 'slow' as const, ms: 500, count: 1, key });
    const store = faultyLeaseStore(inner, { createIfAbsent: [{ kind: 'transient', count: 1, key: 'p.1' }, slow('p.0'), slow('p.2'), slow('p.3')] }, env);
    return { inner, store };
  }

  it('waits for the creates still in flight: stop() then leaves none of them owned by the stopped host', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const { inner, store } = partlyFailingCreates(clock);
    const a = startHost('a', store, clock, new FakePartitions(4).listPartitions, timings);
    await clock.advance(10); // p.1's create failed; the other three are in flight, claiming their leases for a
    let stopped = false;
    const stopping = a.coordinator.stop().then(() => (stopped = true));
    await clock.advance(10);
    expect(stopped).toBe(false);
    await clock.advance(1_000);
    await stopping;

    await clock.advance(timings.leaseAcquireIntervalMs);
    expect(inner.snapshot().filter((l) => isLease(l.id) && l.owner === 'a')).toEqual([]);
    // The lock is not removed (a host whose reads lag would list none of the leases that landed): it is
    // handed over, owned by nobody, naming them for the next host to count as listed.
    const lock = await inner.read('p..lock');
    expect(lock?.owner).toBeNull();
    expect(JSON.parse(lock!.properties[HANDED_OVER_LEASES]!)).toEqual([
      ['0', '', '4000'],
      ['2', '8000', 'C000'],
      ['3', 'C000', 'FF'],
    ]);
  });

  it('owns the leases those creates claimed at once (never holds one it does not read), and creates the failed one at its next try', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const { inner, store } = partlyFailingCreates(clock);
    const a = startHost('a', store, clock, new FakePartitions(4).listPartitions, timings);
    await clock.advance(1_000);
    expect(a.coordinator.owned().map((o) => o.leaseToken).sort()).toEqual(['0', '2', '3']);
    await clock.advance(timings.leaseAcquireIntervalMs);
    expect(a.coordinator.owned().map((o) => o.leaseToken).sort()).toEqual(['0', '1', '2', '3']);
    expect(await inner.read('p..info')).toBeDefined();
    expect(a.events.filter((e) => e.type === 'leaseLost')).toEqual([]);
    await a.coordinator.stop();
  });
});

describe('a bootstrap lock created while the epoch floor could not be read (the simulation, seed 3 of --faults lease,bootstrap)', () => {
  it('is removed once its create lands: stop() leaves no lock of the stopped host behind', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const inner = new MemoryLeaseStore();
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    const store = faultyLeaseStore(inner, { createIfAbsent: [{ kind: 'slow', ms: 500, count: 1, key: 'p..lock' }], read: [{ kind: 'transient', count: 1, key: 'p..floor' }] }, env);
    const a = startHost('a', store, clock, new FakePartitions(2).listPartitions, timings);
    await clock.advance(10); // the floor's read failed; the lock's create is in flight
    let stopped = false;
    const stopping = a.coordinator.stop().then(() => (stopped = true));
    await clock.advance(10);
    expect(stopped).toBe(false);
    await clock.advance(1_000);
    await stopping;
    await clock.advance(1_000);
    expect(await inner.read('p..lock')).toBeUndefined();
    expect(inner.snapshot().filter((l) => l.owner === 'a')).toEqual([]);
  });
});

describe('a renewal that lands after the local deadline ended its ownership (the simulation, seed 53 of --faults all)', () => {
  it('is released once it lands; stop() waits for it and leaves nothing owned by the stopped host', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const inner = new MemoryLeaseStore();
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    // The first renewal (sent 40 s in) takes 30 s: the local deadline (54 s) ends the ownership before it lands.
    const store = faultyLeaseStore(inner, { replace: [{ kind: 'slow', ms: 30_000, count: 1, key: 'p.0' }] }, env);
    const a = startHost('a', store, clock, new FakePartitions(1).listPartitions, timings);
    await clock.advance(55_000);
    expect(a.events.filter((e) => e.type === 'leaseLost').map((e) => e.lease)).toEqual(['0']);
    expect(a.coordinator.owned()).toEqual([]);

    let stopped = false;
    const stopping = a.coordinator.stop().then(() => (stopped = true));
    await clock.advance(10_000);
    expect(stopped).toBe(false); // the renewal is still in flight
    await clock.advance(10_000);
    await stopping;
    const lease = (await inner.read('p.0'))!;
    expect(lease).toMatchObject({ owner: null, epoch: 1 });
    await clock.advance(timings.leaseExpirationMs);
    expect((await inner.read('p.0'))!.owner).toBeNull();
  });
});

describe('a bootstrap that waited out a dead host\'s lock', () => {
  it('starts its leases with a full local deadline: none is lost at once', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const store = new MemoryLeaseStore();
    await store.createIfAbsent({
      id: 'p..lock', leaseToken: '.lock', feedRange: undefined, owner: 'dead', continuation: null,
      timestampMs: clock.now(), epoch: 0, mode: 'latestVersion', properties: {},
    });
    const host = startHost('a', store, clock, new FakePartitions(2).listPartitions, timings);
    await clock.advance(timings.leaseExpirationMs + 1_000); // the lock goes stale; a bootstraps and claims both leases
    await clock.advance(timings.leaseAcquireIntervalMs);
    expect(host.events.filter((e) => e.type === 'leaseLost')).toEqual([]);
    expect(host.acquired.map((o) => [o.leaseToken, o.epoch])).toEqual([['0', 1], ['1', 1]]);
    await host.coordinator.stop();
  });
});

describe('a lease handed to a host that stops before taking it', () => {
  it('is released by that host\'s stop(), not left to expire; a live lease under its name it does not hold is left alone', async () => {
    const clock = new VirtualScheduler(1_700_000_000_000);
    const inner = new MemoryLeaseStore();
    const parts = new FakePartitions(4);
    const handedTo: { stop?: () => Promise<void> } = {};
    let stopping: Promise<void> | undefined;
    // b stops the moment a's handover to it lands, before b's next round would take the lease.
    const store = withReplace(inner, async (lease, replace) => {
      const stored = await replace(lease);
      if (stored.owner === 'b' && isUntaken(stored) && handedTo.stop) stopping ??= handedTo.stop();
      return stored;
    });
    const a = startHost('a', store, clock, parts.listPartitions, timings);
    await clock.advance(1_000);
    expect(a.coordinator.owned()).toHaveLength(4);
    const b = startHost('b', store, clock, parts.listPartitions, timings);
    handedTo.stop = () => b.coordinator.stop();
    for (let i = 0; i < 20 && !stopping; i++) await clock.advance(1_000);
    expect(stopping).toBeDefined();
    await clock.advance(1_000);
    await stopping;

    expect(b.acquired).toEqual([]);
    const leases = inner.snapshot().filter((l) => isLease(l.id));
    expect(leases.filter((l) => l.owner === 'b')).toEqual([]);
    // a takes the released leases back at once (the release notice, or its next round), with a new epoch.
    await clock.advance(timings.leaseAcquireIntervalMs);
    expect(a.coordinator.owned()).toHaveLength(4);
    await a.coordinator.stop();
  });
});

describe('a processor whose leases are gone while it runs', () => {
  it('bootstraps again once .info is gone too (a reset); while .info says they exist, says so once (the repair is coverage.test.ts\'s)', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(2);
    const a = startHost('a', store, clock, parts.listPartitions, timings);
    await clock.advance(1_000);
    for (const lease of (await store.list('p.')).leases.filter((l) => isLease(l.id))) await store.delete(lease);
    for (let i = 0; i < 3; i++) await clock.advance(timings.leaseAcquireIntervalMs);
    expect(a.events.filter((e) => e.type === 'leaseLost').map((e) => e.lease)).toEqual(['0', '1']);
    const stalls = a.events.filter((e) => e.type === 'stall').map((e) => e.message);
    expect(stalls).toEqual([expect.stringMatching(/no lease under prefix 'p\.' while its bootstrap marker p\.\.info says they exist: nothing is read.*created again/)]);

    await store.delete((await store.read('p..info'))!);
    // The first bootstrap keeps its lock an expiration after its `.info` landed (bootstrapRace.test.ts): the
    // bootstrap again comes once that lock is gone (a reset deletes it with `.info`).
    expect((await store.read('p..lock'))?.owner).toBe('a');
    await clock.advance(timings.leaseExpirationMs - 2 * timings.leaseAcquireIntervalMs);
    expect(a.coordinator.owned().map((o) => o.leaseToken).sort()).toEqual(['0', '1']);
    await a.coordinator.stop();
  });
});

describe('a lease store whose reads lag its writes (suspicion 7)', () => {
  it('a conflicting write whose re-read shows the refused version waits and retries instead of spinning, and keeps the lease', async () => {
    const clock = new VirtualScheduler(1_000_000);
    const inner = new MemoryLeaseStore();
    let lagUntil = 0;
    const before: { lease?: Awaited<ReturnType<MemoryLeaseStore['read']>> } = {};
    let laggingReads = 0;
    let attempts = 0;
    const store: LeaseStore = {
      list: (p) => inner.list(p),
      // For 500 ms after another writer touched p.0, reads return the version before (capped, so a spin ends).
      read: async (id) => (id === 'p.0' && clock.now() < lagUntil && laggingReads++ < 1_000 ? before.lease : inner.read(id)),
      createIfAbsent: (l) => inner.createIfAbsent(l),
      replace: async (l) => {
        if (l.id === 'p.0' && l.owner === 'a') attempts++;
        return inner.replace(l);
      },
      delete: (l) => inner.delete(l),
    };
    const a = startHost('a', store, clock, new FakePartitions(1).listPartitions, timings);
    await clock.advance(1_000);
    before.lease = await inner.read('p.0');
    await inner.replace({ ...before.lease!, properties: { touchedBy: 'another writer' } });
    lagUntil = clock.now() + 500;
    attempts = 0;
    const checkpoint = a.coordinator.owned()[0]!.checkpoint('pos-1');
    await clock.advance(1_000);
    await checkpoint;
    expect(laggingReads).toBeLessThan(10); // 10, 20, 40, … ms apart: not one retry per microtask
    expect(attempts).toBeLessThan(10);
    expect((await inner.read('p.0'))!).toMatchObject({ owner: 'a', continuation: 'pos-1' });
    expect(a.events.filter((e) => e.type === 'leaseLost')).toEqual([]);
    await a.coordinator.stop();
  });
});

describe('a handover whose drain outlasts the handoff deadline (suspicion 8)', () => {
  it('ends the ownership at the deadline (LeaseLost), and the requester has the lease about one expiration after asking, as with a handover', async () => {
    const fast = { leaseAcquireIntervalMs: 1_000, leaseRenewIntervalMs: 1_000, leaseExpirationMs: 4_000, drainTimeoutMs: 20_000 };
    const clock = new VirtualScheduler(1_700_000_000_000);
    const store = new MemoryLeaseStore();
    const parts = new FakePartitions(2);
    const a = startHost('a', store, clock, parts.listPartitions, fast);
    a.coordinator.acquired$.subscribe((o) => o.onDrain(() => new Promise<void>(() => undefined))); // a sink that never finishes
    await clock.advance(1_500);
    const b = startHost('b', store, clock, parts.listPartitions, fast);
    const joined = clock.now();
    const took = await clock.advanceUntil(() => b.coordinator.owned().length === 1, 30_000, 100);
    expect(b.coordinator.owned()).toHaveLength(1);
    const lease = b.coordinator.owned()[0]!.leaseToken;
    expect(a.events.filter((e) => e.type === 'leaseLost').map((e) => e.lease)).toEqual([lease]); // at the handoff deadline
    // The owner stops renewing at the deadline, which it counts from when it saw the request: b, which counts
    // from the owner's first write after its request, takes the lease as expired soon after. Not a drain bound
    // (25 s) or a second expiration later.
    expect(took).toBeLessThan(2 * fast.leaseExpirationMs);
    expect(clock.now() - joined).toBe(took);
    const stopping = Promise.all([a.coordinator.stop(), b.coordinator.stop()]);
    await clock.advance(30_000); // a's other drain never finishes either: its bound ends it
    await stopping;
  });
});
