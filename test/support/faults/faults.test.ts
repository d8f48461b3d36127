import { firstValueFrom, from, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { PartitionGoneError, TransientError } from '../../../src/errors/index.js';
import { LeaseConflictError } from '../../../src/errors/LeaseConflictError.js';
import { MemoryLeaseStore } from '../../../src/leases/MemoryLeaseStore.js';
import { MemoryViewStore } from '../../../src/sinks/MemoryViewStore.js';
import { MemorySource } from '../../../src/sources/MemorySource.js';
import {
  FaultEnv,
  faultyLeaseStore,
  faultySource,
  faultyStep,
  faultyViewStore,
  gateLeaseStore,
  HostClock,
  VirtualClock,
} from './index.js';

const newLease = (id: string) => ({
  id,
  leaseToken: id,
  feedRange: undefined,
  owner: 'a',
  continuation: null,
  timestampMs: 0,
  epoch: 1,
  mode: undefined,
  properties: {},
});

/** Tracks whether a promise settled, without awaiting it. */
function watch<T>(promise: Promise<T>): { settled: () => boolean; promise: Promise<T> } {
  let settled = false;
  const tracked = promise.finally(() => (settled = true));
  tracked.catch(() => undefined);
  return { settled: () => settled, promise: tracked };
}

describe('FaultEnv', () => {
  it('strikes a count rule exactly that many times, then never', () => {
    const env = new FaultEnv({ seed: 1, scheduler: new VirtualClock() });
    const plan = { read: [{ kind: 'transient', count: 2 }] };
    const picks = Array.from({ length: 5 }, () => env.pick('source', plan, 'read')?.kind);
    expect(picks).toEqual(['transient', 'transient', undefined, undefined, undefined]);
    expect(env.counts().get('source.transient')).toBe(2);
  });

  it('draws probabilities from the seed: same seed, same faults; disabled or outside a condition, none', () => {
    const plan = { read: [{ kind: 'slow', probability: 0.3 }], list: [{ kind: 'slow', probability: 1, during: 'storm' }] };
    const run = (seed: number) => {
      const env = new FaultEnv({ seed, scheduler: new VirtualClock() });
      return Array.from({ length: 50 }, () => env.pick('s', plan, 'read')?.kind ?? '-').join('');
    };
    expect(run(7)).toBe(run(7));
    expect(run(7)).not.toBe(run(8));
    expect(run(7)).toContain('slow');
    const env = new FaultEnv({ seed: 1, scheduler: new VirtualClock() });
    expect(env.pick('s', plan, 'list')).toBeUndefined();
    env.turnOn('storm');
    expect(env.pick('s', plan, 'list')?.kind).toBe('slow');
    env.withScheduler(new VirtualClock()).enabled = false; // shared switch
    expect(env.pick('s', plan, 'list')).toBeUndefined();
  });

  it('lets the first `after` calls pass before a rule applies', () => {
    const env = new FaultEnv({ seed: 1, scheduler: new VirtualClock() });
    const plan = { publish: [{ kind: 'drop', after: 2, count: 1 }] };
    expect(Array.from({ length: 5 }, () => env.pick('broker', plan, 'publish')?.kind)).toEqual([undefined, undefined, 'drop', undefined, undefined]);
  });

  it('withRandom: a seam of its own PRNG leaves the draws of the others as they were, sharing switch and tally', () => {
    const plan = { read: [{ kind: 'slow', probability: 0.5 }] };
    const draws = (extra: boolean) => {
      const env = new FaultEnv({ seed: 3, scheduler: new VirtualClock() });
      const other = env.withRandom(() => 0); // always strikes
      return Array.from({ length: 30 }, () => {
        if (extra) expect(other.pick('broker', plan, 'read')?.kind).toBe('slow');
        return env.pick('source', plan, 'read')?.kind ?? '-';
      }).join(',');
    };
    expect(draws(true)).toBe(draws(false));
    const env = new FaultEnv({ seed: 3, scheduler: new VirtualClock() });
    const other = env.withRandom(() => 0);
    other.pick('broker', plan, 'read');
    expect(env.counts().get('broker.slow')).toBe(1);
    env.enabled = false;
    expect(other.pick('broker', plan, 'read')).toBeUndefined();
  });
});

describe('faultySource', () => {
  it('throttles with retry-after, fails transiently, slows on the virtual clock and hangs until aborted', async () => {
    const clock = new VirtualClock();
    const memory = new MemorySource<{ id: string }>({ partitions: 1, scheduler: clock });
    memory.write({ id: 'a' });
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    const source = faultySource(
      memory,
      { read: [{ kind: 'throttle', count: 1, retryAfterMs: 250 }, { kind: 'transient', count: 1 }, { kind: 'slow', count: 1, ms: 1_000 }, { kind: 'hang', count: 1 }] },
      env,
    );
    const [partition] = await source.listPartitions();
    const request = { partition: partition!, from: 'beginning' as const, maxItemCount: 10 };
    await expect(source.read(request)).rejects.toMatchObject({ statusCode: 429, retryAfterMs: 250 });
    await expect(source.read(request)).rejects.toBeInstanceOf(TransientError);
    const slow = watch(source.read(request));
    await clock.advance(999);
    expect(slow.settled()).toBe(false);
    await clock.advance(1);
    expect((await slow.promise).changes).toHaveLength(1);
    const controller = new AbortController();
    const hung = watch(source.read({ ...request, signal: controller.signal }));
    await clock.advance(60_000);
    expect(hung.settled()).toBe(false);
    controller.abort();
    await expect(hung.promise).rejects.toBeDefined();
  });

  it('splits the partition read through the source, so the read finds it gone', async () => {
    const clock = new VirtualClock();
    const memory = new MemorySource<{ id: string }>({ partitions: 1, scheduler: clock });
    const source = faultySource(memory, { read: [{ kind: 'split', count: 1 }] }, new FaultEnv({ seed: 1, scheduler: clock }));
    const [partition] = await source.listPartitions();
    await expect(source.read({ partition: partition!, from: 'beginning', maxItemCount: 10 })).rejects.toBeInstanceOf(PartitionGoneError);
    expect((await source.listPartitions()).map((p) => p.parents)).toEqual([['0'], ['0']]);
  });
});

describe('faultyLeaseStore', () => {
  it('conflicts and times out without writing; a lost reply writes and still fails', async () => {
    const clock = new VirtualClock();
    const inner = new MemoryLeaseStore();
    const created = (await inner.createIfAbsent(newLease('x')))!;
    const store = faultyLeaseStore(
      inner,
      { replace: [{ kind: 'conflict', count: 1 }, { kind: 'timeout', count: 1, ms: 500 }, { kind: 'lostReply', count: 1 }] },
      new FaultEnv({ seed: 1, scheduler: clock }),
    );
    await expect(store.replace({ ...created, continuation: 'mem:1' })).rejects.toBeInstanceOf(LeaseConflictError);
    const timedOut = watch(store.replace({ ...created, continuation: 'mem:2' }));
    await clock.advance(499);
    expect(timedOut.settled()).toBe(false);
    await clock.advance(1);
    await expect(timedOut.promise).rejects.toMatchObject({ statusCode: 408 });
    expect((await inner.read('x'))!.continuation).toBeNull();
    await expect(store.replace({ ...created, continuation: 'mem:3' })).rejects.toMatchObject({ statusCode: 408 });
    expect((await inner.read('x'))!.continuation).toBe('mem:3');
  });
});

describe('faultyViewStore', () => {
  it('a failed write changes nothing; a lost reply lands and still rejects', async () => {
    const inner = new MemoryViewStore<number>();
    const view = faultyViewStore(inner, { write: [{ kind: 'failure', count: 1 }, { kind: 'lostReply', count: 1 }] }, new FaultEnv({ seed: 1, scheduler: new VirtualClock() }));
    const write = (lsn: number) => ({
      mode: 'guarded' as const,
      changes: [{ key: 'k', row: lsn, lsn, timestampMs: 0, partition: '0' }],
      partitions: [{ partition: '0', epoch: 1, position: `mem:${lsn}`, lsn }],
    });
    await expect(view.write(write(1))).rejects.toThrow(/injected/);
    expect(await inner.rows()).toEqual([]);
    await expect(view.write(write(2))).rejects.toThrow(/reply lost/);
    expect((await inner.get('k'))?.row).toBe(2);
  });
});

describe('faultyStep', () => {
  it('slows values on the clock, in order, and fails the stream when told', async () => {
    const clock = new VirtualClock();
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    const slow = watch(firstValueFrom(from([1, 2, 3]).pipe(faultyStep<number>({ next: [{ kind: 'slow', count: 1, ms: 100 }] }, env), toArray())));
    await clock.advance(99);
    expect(slow.settled()).toBe(false);
    await clock.advance(1);
    expect(await slow.promise).toEqual([1, 2, 3]);
    await expect(firstValueFrom(from([1]).pipe(faultyStep<number>({ next: [{ kind: 'failure', count: 1 }] }, env)))).rejects.toThrow(/injected/);
  });
});

describe('HostClock', () => {
  it('a paused host runs its late timers on resume; a killed one never again', async () => {
    const clock = new VirtualClock();
    const host = new HostClock(clock);
    const fired: number[] = [];
    host.schedule(() => void fired.push(clock.now()), 100);
    host.pause();
    await clock.advance(1_000);
    expect(fired).toEqual([]);
    host.resume();
    await clock.advance(0);
    expect(fired).toEqual([1_000]);
    host.schedule(() => void fired.push(clock.now()), 100);
    host.kill();
    await clock.advance(1_000);
    expect(fired).toEqual([1_000]);
  });

  it('gates store calls: a paused host neither sends nor sees replies, a dead one hangs for good', async () => {
    const clock = new VirtualClock();
    const host = new HostClock(clock);
    const inner = new MemoryLeaseStore();
    const store = gateLeaseStore(inner, host);
    host.pause();
    const call = watch(store.createIfAbsent(newLease('y')));
    await clock.advance(1_000);
    expect(call.settled()).toBe(false);
    expect(await inner.read('y')).toBeUndefined();
    host.resume();
    expect((await call.promise)?.id).toBe('y');
    host.kill();
    const dead = watch(store.read('y'));
    await clock.advance(1_000);
    expect(dead.settled()).toBe(false);
  });

  it('supports periodic actions rescheduling themselves (as RxJS interval does)', async () => {
    const clock = new VirtualClock();
    const host = new HostClock(clock);
    const fired: number[] = [];
    host.schedule(function (this: { schedule(state?: unknown, delay?: number): unknown }) {
      fired.push(clock.now());
      if (fired.length < 3) this.schedule(undefined, 10);
    }, 10);
    await clock.advance(100);
    expect(fired).toEqual([10, 20, 30]);
  });

  it('has clocks of its own: a wall clock skewed, drifting, stepped; a monotonic one that only drifts, which its timers run on', async () => {
    const clock = new VirtualClock(10_000);
    const host = new HostClock(clock, { skewMs: -8_000, drift: 0.25, uptimeMs: 40 });
    expect(host.wallNow()).toBe(2_000);
    expect(host.now()).toBe(40);
    const fired: number[] = [];
    host.schedule(() => void fired.push(host.now()), 1_000); // 1 000 of the host's ms: 800 shared ms
    await clock.advance(800);
    expect(fired).toEqual([1_040]);
    expect(host.wallNow()).toBe(3_000);
    host.step(500);
    expect(host.wallNow()).toBe(3_500);
    expect(host.now()).toBe(1_040);
    expect(host.skewMs).toBe(3_500 - 10_800);
    // Without options both read the shared clock.
    const plain = new HostClock(clock);
    await clock.advance(100);
    expect([plain.now(), plain.wallNow()]).toEqual([10_900, 10_900]);
  });

  it('a slow event loop runs timers late, by at most lateMs, and keeps running', async () => {
    const clock = new VirtualClock();
    const host = new HostClock(clock, { random: () => 0.5 });
    host.slow(400);
    const fired: number[] = [];
    host.schedule(() => void fired.push(clock.now()), 100);
    await clock.advance(299);
    expect(fired).toEqual([]);
    await clock.advance(1);
    expect(fired).toEqual([300]);
    host.slow(0);
    host.schedule(() => void fired.push(clock.now()), 100);
    await clock.advance(100);
    expect(fired).toEqual([300, 400]);
  });
});
