/**
 * The handler form on a running processor (MemorySource, MemoryLeaseStore, fake timers): one call at a time
 * per partition, partitions in parallel, checkpoints after calls, and the scenarios of the Rx form: crash,
 * steal (rebalance), split, slow handler, poison changes.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { CloseReason, FeedEvent } from '../../src/core/events.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { type ChangeHandlers, type ChangeProcessorHandle, type PartitionContext, processChanges, type ProcessChangesOptions } from '../../src/handlers/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import type { Source } from '../../src/sources/Source.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { CrashableLeaseStore, FAST_TIMINGS, storedCheckpoints } from '../support/memory.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { ...FAST_TIMINGS, leasePrefix: 'h.', maxItemCount: 5 } as const;

const handles: ChangeProcessorHandle[] = [];
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(async () => {
  const closing = Promise.allSettled(handles.splice(0).map((h) => h.close()));
  await vi.advanceTimersByTimeAsync(5_000);
  await closing;
  vi.useRealTimers();
});

/** Records what the handlers see, per host. */
class Recorder {
  readonly processed: string[] = [];
  readonly log: string[] = [];
  readonly errors: [Error, string | undefined][] = [];
  readonly closes: [string, CloseReason][] = [];
  readonly running = new Map<string, number>();
  maxPerPartition = 0;
  maxOverall = 0;
  delayMs = 0;
  fails: (change: Change<Doc>) => boolean = () => false;

  handlers(): ChangeHandlers<Doc> {
    return {
      processInitialize: (ctx) => {
        this.log.push(`init ${ctx.leaseToken}`);
      },
      processChanges: async (changes, ctx) => {
        this.log.push(`call ${ctx.leaseToken}`);
        const now = (this.running.get(ctx.leaseToken) ?? 0) + 1;
        this.running.set(ctx.leaseToken, now);
        this.maxPerPartition = Math.max(this.maxPerPartition, now);
        this.maxOverall = Math.max(this.maxOverall, [...this.running.values()].reduce((a, b) => a + b, 0));
        try {
          if (this.delayMs) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
          const bad = changes.find(this.fails);
          if (bad) throw new Error(`cannot process ${bad.id} (injected)`);
          this.processed.push(...changes.map((c) => c.id));
        } finally {
          this.running.set(ctx.leaseToken, (this.running.get(ctx.leaseToken) ?? 1) - 1);
        }
      },
      processClose: (ctx, reason) => {
        this.closes.push([ctx.leaseToken, reason]);
      },
      processError: (error, ctx) => {
        this.errors.push([error, ctx?.leaseToken]);
      },
    };
  }
}

function start(source: Source<Doc>, leases: MemoryLeaseStore | CrashableLeaseStore, name: string, recorder: Recorder, options: Partial<ProcessChangesOptions<Doc>> = {}, events?: FeedEvent[]) {
  const handle = processChanges<Doc>(
    { source, leases, instanceName: name, ...FAST, checkpoint: { count: 1, ms: 10 }, ...(events ? { events: (e: FeedEvent) => events.push(e) } : {}), ...options },
    recorder.handlers(),
  );
  handles.push(handle);
  return handle;
}

function checkpoints(leases: MemoryLeaseStore): Promise<Map<string, number>> {
  return storedCheckpoints(leases, FAST.leasePrefix);
}

function latest(source: MemorySource<Doc>): Map<string, number> {
  return new Map(source.partitions().map((p) => [p.id, source.latestLsn(p.id)]));
}

describe('processChanges', () => {
  it('calls one at a time per partition, partitions in parallel, initialize first; close() resolves after the last checkpoint', async () => {
    const source = new MemorySource<Doc>({ partitions: 3 });
    const leases = new MemoryLeaseStore();
    for (let i = 0; i < 60; i++) source.write({ id: `d${i}`, n: i });
    const r = new Recorder();
    r.delayMs = 20;
    const handle = start(source, leases, 'a', r, { checkpoint: { count: 1000, ms: 60_000 } });
    await vi.advanceTimersByTimeAsync(2_000);
    expect(new Set(r.processed).size).toBe(60);
    expect(r.maxPerPartition).toBe(1);
    expect(r.maxOverall).toBeGreaterThan(1);
    for (const p of source.partitions()) expect(r.log.indexOf(`init ${p.id}`)).toBeLessThan(r.log.indexOf(`call ${p.id}`));
    // Nothing written yet (count and ms not reached); close() writes the last positions before it resolves.
    let closed = false;
    const closing = handle.close().then(() => (closed = true));
    await vi.advanceTimersByTimeAsync(1_000);
    await closing;
    expect(closed).toBe(true);
    expect(await checkpoints(leases)).toEqual(latest(source));
    expect(r.closes.map(([, reason]) => reason)).toEqual(['Shutdown', 'Shutdown', 'Shutdown']);
  });

  it('checkpoints only through context.checkpoint() in manual mode, and returns read credit either way', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    for (let i = 0; i < 30; i++) source.write({ id: `d${i}`, n: i });
    const seen: string[] = [];
    let context: PartitionContext | undefined;
    const handle = processChanges<Doc>(
      { source, leases, instanceName: 'a', ...FAST, maxInFlightChanges: 10, checkpoint: 'manual' },
      {
        processChanges: async (changes, ctx) => {
          context = ctx;
          seen.push(...changes.map((c) => c.id));
          if (changes.some((c) => c.id === 'd9')) await ctx.checkpoint();
        },
      },
    );
    handles.push(handle);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(seen).toHaveLength(30); // 30 changes through a budget of 10: credit came back without checkpoints
    expect((await checkpoints(leases)).get('0')).toBe(10);
    expect(handle.inFlightChanges).toBe(0);
    await context!.checkpoint(); // outside a call: the last call that succeeded
    expect((await checkpoints(leases)).get('0')).toBe(30);
  });

  it('rejects handlers without processChanges and bad checkpoint options', () => {
    const base = { source: new MemorySource<Doc>(), leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'a.' };
    expect(() => processChanges(base, {} as ChangeHandlers<Doc>)).toThrow(InvalidOptionsError);
    expect(() => processChanges({ ...base, checkpoint: { count: 0 } }, { processChanges: () => undefined })).toThrow(/count/);
    expect(() => processChanges({ ...base, onFailure: {} as never }, { processChanges: () => undefined })).toThrow(/onFailure/);
  });
});

describe('processChanges under the Rx form scenarios', () => {
  it('crash: a host whose lease writes never return stops at its local deadline; another takes over from its checkpoint, nothing lost', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const store = new MemoryLeaseStore();
    const crashable = new CrashableLeaseStore(store);
    const a = new Recorder();
    const crashed = start(source, crashable, 'a', a);
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(new Set(a.processed).size).toBe(20);
    crashable.crash();
    handles.splice(handles.indexOf(crashed), 1); // a crashed process is never closed
    for (let i = 20; i < 40; i++) source.write({ id: `d${i}`, n: i });
    const b = new Recorder();
    start(source, store, 'b', b);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(new Set([...a.processed, ...b.processed]).size).toBe(40);
    expect(b.processed.length).toBeGreaterThan(0);
    expect(await checkpoints(store)).toEqual(latest(source));
    expect(a.closes.every(([, reason]) => reason === 'LeaseLost')).toBe(true);
  });

  it('steal: a second host gets its share; the first closes the handed-over partitions with Rebalanced; nothing lost', async () => {
    const source = new MemorySource<Doc>({ partitions: 4 });
    const leases = new MemoryLeaseStore();
    const a = new Recorder();
    start(source, leases, 'a', a);
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(1_000);
    const b = new Recorder();
    start(source, leases, 'b', b);
    await vi.advanceTimersByTimeAsync(3_000);
    for (let i = 40; i < 80; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(3_000);
    const owners = (await leases.list('h.')).leases.filter((l) => l.leaseToken).map((l) => l.owner);
    expect(owners.filter((o) => o === 'b')).toHaveLength(2);
    expect(a.closes.map(([, reason]) => reason)).toEqual(['Rebalanced', 'Rebalanced']);
    expect(new Set([...a.processed, ...b.processed]).size).toBe(80);
    expect(await checkpoints(leases)).toEqual(latest(source));
  });

  it('split: the parent closes with PartitionGone, its children are processed from its position', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    const r = new Recorder();
    start(source, leases, 'a', r);
    for (let i = 0; i < 10; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(1_000);
    source.split('0');
    for (let i = 10; i < 30; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(r.closes).toContainEqual(['0', 'PartitionGone']);
    expect(new Set(r.processed).size).toBe(30);
    const children = source.partitions().map((p) => p.id);
    expect(children).not.toContain('0');
    for (const child of children) expect(r.log).toContain(`init ${child}`);
  });

  it('slow handler: reading stays within maxInFlightChanges while calls are slow, and everything is processed', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    for (let i = 0; i < 100; i++) source.write({ id: `d${i}`, n: i });
    const r = new Recorder();
    r.delayMs = 500;
    const handle = start(source, leases, 'a', r, { maxInFlightChanges: 10 });
    let most = 0;
    for (let t = 0; t < 40_000; t += 100) {
      await vi.advanceTimersByTimeAsync(100);
      most = Math.max(most, handle.inFlightChanges);
    }
    expect(most).toBeLessThanOrEqual(10);
    expect(new Set(r.processed).size).toBe(100);
    expect(r.maxPerPartition).toBe(1);
  });

  it('poison: a call that always fails is retried, its changes dead-lettered, processError told, and the partition goes on', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}`, n: i });
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const r = new Recorder();
    r.fails = (c) => c.id === 'd4';
    start(source, leases, 'a', r, { onFailure: { retry: { attempts: 2, initialBackoffMs: 10 }, deadLetter } });
    await vi.advanceTimersByTimeAsync(3_000);
    const letters = await deadLetter.list();
    // The batch failed, then each change ran alone: only d4 failed on its own.
    expect(letters.map((l) => [l.documentId, l.attempts])).toEqual([['d4', 2]]);
    expect(new Set(r.processed).size).toBe(19);
    expect(r.errors.some(([e, lease]) => e instanceof HandlerError && lease === letters[0]!.leaseToken)).toBe(true);
    expect(await checkpoints(leases)).toEqual(latest(source));
  });

  it("halt: the partition closes with Halted before the change; the others go on", async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const r = new Recorder();
    r.fails = (c) => c.id === 'poison';
    start(source, leases, 'a', r, { onFailure: { retry: { attempts: 2, initialBackoffMs: 10 }, halt: true } });
    await vi.advanceTimersByTimeAsync(500);
    const poison = source.write({ id: 'poison', n: 0 });
    await vi.advanceTimersByTimeAsync(300);
    expect(r.closes).toContainEqual([poison.partition, 'Halted']);
    expect((await checkpoints(leases)).get(poison.partition)).toBeLessThan(poison.lsn);
    let i = 0;
    while (source.partitionFor(`x${i}`) === poison.partition) i++;
    source.write({ id: `x${i}`, n: 1 });
    await vi.advanceTimersByTimeAsync(300);
    expect(r.processed).toContain(`x${i}`);
  });
});
