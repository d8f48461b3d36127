/** The bound on a processor's reads in flight (`maxConcurrentReads`): the limiter, and the reader using it. */
import { describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { resolveOptions } from '../../src/feed/options.js';
import { ReadLimiter } from '../../src/feed/reader/ReadLimiter.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { concurrentReadsOfAgent } from '../../src/sources/cosmos/agentSockets.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import type { ReadRequest } from '../../src/sources/Source.js';
import { forwardSource } from '../support/faults/forwardSource.js';
import { withFakeTimers } from '../support/fakeTimers.js';
import { FAST_TIMINGS } from '../support/memory.js';

describe('ReadLimiter', () => {
  it('grants at most `limit` slots at once, synchronously while one is free', () => {
    const limiter = new ReadLimiter(2);
    expect(limiter.tryAcquire()).toBe(true);
    expect(limiter.tryAcquire()).toBe(true);
    expect(limiter.tryAcquire()).toBe(false);
    expect(limiter.inFlight).toBe(2);
    limiter.release();
    expect(limiter.tryAcquire()).toBe(true);
  });

  it('hands a freed slot to a waiting urgent read before polls that waited longer', async () => {
    const limiter = new ReadLimiter(1);
    const never = new AbortController().signal;
    expect(limiter.tryAcquire()).toBe(true);
    const order: string[] = [];
    const poll1 = limiter.acquire(false, never).then((granted) => order.push(`poll1:${granted}`));
    const poll2 = limiter.acquire(false, never).then((granted) => order.push(`poll2:${granted}`));
    const busy = limiter.acquire(true, never).then((granted) => order.push(`busy:${granted}`));
    expect(limiter.waiting).toBe(3);
    // A free slot is never taken past the reads waiting for one.
    expect(limiter.tryAcquire()).toBe(false);
    limiter.release();
    await busy;
    expect(order).toEqual(['busy:true']);
    limiter.release();
    await poll1;
    limiter.release();
    await poll2;
    expect(order).toEqual(['busy:true', 'poll1:true', 'poll2:true']);
    expect(limiter.inFlight).toBe(1);
    limiter.release();
    expect(limiter.inFlight).toBe(0);
  });

  it('a wait whose signal aborts resolves false, holds nothing, and is skipped by the next release', async () => {
    const limiter = new ReadLimiter(1);
    const never = new AbortController().signal;
    limiter.tryAcquire();
    const leaving = new AbortController();
    const left = limiter.acquire(false, leaving.signal);
    const next = limiter.acquire(false, never);
    leaving.abort();
    expect(await left).toBe(false);
    expect(limiter.waiting).toBe(1);
    limiter.release();
    expect(await next).toBe(true);
    expect(limiter.inFlight).toBe(1);
    limiter.release();
    expect(limiter.inFlight).toBe(0);
    expect(limiter.waiting).toBe(0);
    expect(await limiter.acquire(true, AbortSignal.abort())).toBe(false);
    expect(limiter.inFlight).toBe(0);
  });

  it('refuses a release without a slot held, and a limit below 1', () => {
    expect(() => new ReadLimiter(1).release()).toThrow(/without a slot/);
    expect(() => new ReadLimiter(0)).toThrow(RangeError);
  });
});

describe('maxConcurrentReads', () => {
  const source = new MemorySource({ partitions: 1 });
  const base = { source, leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'r.' };

  it('defaults to what the source advises, else 128, and is validated', () => {
    expect(resolveOptions(base).maxConcurrentReads).toBe(128);
    const advising = Object.assign(forwardSource(source), { concurrentReads: 7 });
    expect(resolveOptions({ ...base, source: advising }).maxConcurrentReads).toBe(7);
    expect(resolveOptions({ ...base, source: advising, maxConcurrentReads: 3 }).maxConcurrentReads).toBe(3);
    expect(() => resolveOptions({ ...base, maxConcurrentReads: 0 })).toThrow(InvalidOptionsError);
    expect(() => resolveOptions({ ...base, maxConcurrentReads: 1.5 })).toThrow(/maxConcurrentReads/);
  });

  it("CosmosSource's advice: half the agent's kept-alive connections, at most its maxSockets", () => {
    expect(concurrentReadsOfAgent(undefined)).toBe(128);
    expect(concurrentReadsOfAgent({ maxSockets: Number.POSITIVE_INFINITY, maxFreeSockets: 256 })).toBe(128);
    expect(concurrentReadsOfAgent({ maxSockets: 50, maxFreeSockets: 256 })).toBe(50);
    expect(concurrentReadsOfAgent({ maxSockets: 50, maxFreeSockets: 1 })).toBe(1);
  });
});

describe('a processor under maxConcurrentReads', () => {
  const subscriptions = withFakeTimers();

  it('never has more reads in flight than the bound, and a busy partition reads before waiting polls', async () => {
    const partitions = 8;
    const memory = new MemorySource<{ id: string }>({ partitions });
    let inFlight = 0;
    let most = 0;
    /** When the busy partition's reads started (fake clock), once it has changes. */
    const busyStarts: number[] = [];
    let recording = false;
    const busyId = '3';
    const READ_MS = 20;
    const source = forwardSource(memory, {
      read: (read) => async (request: ReadRequest) => {
        inFlight++;
        most = Math.max(most, inFlight);
        if (recording && request.partition.id === busyId) busyStarts.push(Date.now());
        try {
          await new Promise((resolve) => setTimeout(resolve, READ_MS));
          return await read(request);
        } finally {
          inFlight--;
        }
      },
    });
    const keyIn = (id: string, prefix: string) => {
      let i = 0;
      while (memory.partitionFor(`${prefix}${i}`) !== id) i++;
      return `${prefix}${i}`;
    };
    const feed = createChangeFeed({
      source,
      leases: new MemoryLeaseStore(),
      instanceName: 'a',
      leasePrefix: 'r.',
      ...FAST_TIMINGS,
      // Every partition polls at once: seven quiet ones and the busy one contend for two slots.
      pollIntervalMs: 0,
      maxItemCount: 1,
      maxConcurrentReads: 2,
    });
    const seen: ChangeBatch<{ id: string }>[] = [];
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe((b) => seen.push(b)));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(feed.health().leases.length).toBe(partitions);
    // Ten changes on one partition, read a page of one at a time: each read after a page with changes
    // goes before the quiet partitions' polls waiting for a slot.
    for (let i = 0; i < 10; i++) memory.write({ id: keyIn(busyId, `k${i}-`) });
    seen.length = 0;
    recording = true;
    await vi.advanceTimersByTimeAsync(2_000);
    recording = false;
    expect(most).toBe(2);
    expect(seen.flatMap((b) => b.changes).length).toBe(10);
    // Each read of the busy partition after a page with changes waits at most for one read in flight to free
    // its slot (all slots are taken by polls), never for the quiet partitions' polls queued before it: as
    // one of eight readers in a queue served in turn it would wait for about three reads (seven polls ahead
    // of it, two slots) every time.
    const gaps = busyStarts.slice(1).map((at, i) => at - busyStarts[i]!);
    expect(busyStarts.length).toBeGreaterThanOrEqual(10);
    expect(Math.max(...gaps.slice(0, 9))).toBeLessThanOrEqual(2 * READ_MS);
    const stopped = feed.stop();
    await vi.advanceTimersByTimeAsync(1_000);
    await stopped;
  });

  it("counts the bootstrap's pins of new leases' starts ('now': a read per partition) against the bound", async () => {
    const memory = new MemorySource<{ id: string }>({ partitions: 8 });
    let inFlight = 0;
    let most = 0;
    let pins = 0;
    const source = forwardSource(memory, {
      positionAt: (positionAt) => async (partition, at, signal) => {
        pins++;
        inFlight++;
        most = Math.max(most, inFlight);
        try {
          await new Promise((resolve) => setTimeout(resolve, 20));
          return await positionAt(partition, at, signal);
        } finally {
          inFlight--;
        }
      },
    });
    const feed = createChangeFeed({ source, leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'p.', ...FAST_TIMINGS, startFrom: 'now', maxConcurrentReads: 2 });
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(1_000);
    expect(pins).toBe(8);
    expect(most).toBe(2);
    expect(feed.health().leases.length).toBe(8);
    const stopped = feed.stop();
    await vi.advanceTimersByTimeAsync(1_000);
    await stopped;
  });
});
