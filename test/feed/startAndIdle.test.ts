/** Per-partition start positions (`startFrom` as a function) and idle batches (`maxWaitTimeMs`). */
import { describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Partition, StartFrom } from '../../src/core/Partition.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import type { ChangeFeedOptions } from '../../src/feed/options.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { FAST_TIMINGS, idsOf } from '../support/memory.js';
import { withFakeTimers } from '../support/fakeTimers.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { ...FAST_TIMINGS, leasePrefix: 's.' } as const;

const subscriptions = withFakeTimers();

function run(source: MemorySource<Doc>, leases: MemoryLeaseStore, options: Partial<ChangeFeedOptions<Doc>>) {
  const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'a', ...FAST, ...options });
  const seen: ChangeBatch<Doc>[] = [];
  const errors: unknown[] = [];
  subscriptions.push(feed.changes$.pipe(checkpointEvery({ count: 1, ms: 10 })).subscribe({ next: (b) => seen.push(b), error: (e) => errors.push(e) }));
  return { feed, seen, errors };
}

/** A document id that lands in partition `id`. */
function keyIn(source: MemorySource<Doc>, id: string, prefix: string): string {
  let i = 0;
  while (source.partitionFor(`${prefix}${i}`) !== id) i++;
  return `${prefix}${i}`;
}

describe('startFrom as a function of the partition', () => {
  it('gives each partition its own start, and is ignored once a lease has a checkpoint', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const old0 = keyIn(source, '0', 'old');
    const old1 = keyIn(source, '1', 'old');
    source.write({ id: old0, n: 0 });
    source.write({ id: old1, n: 1 });
    const asked: string[] = [];
    const startFrom = (p: Partition): StartFrom => {
      asked.push(p.id);
      return p.id === '0' ? 'beginning' : 'now';
    };
    // 'now' is the moment the processor starts (a time in latestVersion mode): a change made in the same
    // millisecond counts as made at it, so the start comes a millisecond after the old writes.
    await vi.advanceTimersByTimeAsync(1);
    const first = run(source, leases, { startFrom });
    await vi.advanceTimersByTimeAsync(500);
    const new1 = keyIn(source, '1', 'new');
    source.write({ id: new1, n: 2 });
    await vi.advanceTimersByTimeAsync(500);
    expect(idsOf(first.seen).sort()).toEqual([new1, old0].sort());
    expect(asked.sort()).toEqual(['0', '1']);
    await first.feed.stop();
    subscriptions.splice(0).forEach((s) => s.unsubscribe());

    // Both leases have checkpoints now: the function is not asked again, nothing is read twice.
    const later = keyIn(source, '0', 'later');
    source.write({ id: later, n: 3 });
    asked.length = 0;
    const second = run(source, leases, { startFrom: () => 'beginning' });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(idsOf(second.seen)).toEqual([later]);
    expect(asked).toEqual([]);
  });

  it('a function that returns something invalid stops the processor with an InvalidOptionsError naming startFrom', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const { errors } = run(source, new MemoryLeaseStore(), { startFrom: () => 'yesterday' as never });
    await vi.advanceTimersByTimeAsync(500);
    expect(errors[0]).toBeInstanceOf(InvalidOptionsError);
    expect(String(errors[0])).toMatch(/startFrom.*yesterday.*partition 0/);
  });

  it('rejects a startFrom that is neither a start nor a function, and a bad maxWaitTimeMs', () => {
    const base = { source: new MemorySource<Doc>(), leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'a.' };
    expect(() => createChangeFeed({ ...base, startFrom: 42 as never })).toThrow(/startFrom.*function/);
    expect(() => createChangeFeed({ ...base, maxWaitTimeMs: 0 })).toThrow(/maxWaitTimeMs/);
  });
});

describe('idle batches (maxWaitTimeMs)', () => {
  it('arrive empty, position unchanged, on a quiet partition, and never on a busy one', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const busy = keyIn(source, '0', 'b');
    const { seen } = run(source, leases, { maxWaitTimeMs: 1_000, pollIntervalMs: 300 });
    source.write({ id: keyIn(source, '1', 'q'), n: 0 });
    for (let t = 0; t < 50; t++) {
      source.write({ id: busy, n: t }); // a change every 200 ms on partition 0
      await vi.advanceTimersByTimeAsync(200);
    }
    const quiet = seen.filter((b) => b.partition === '1');
    const idle = quiet.filter((b) => b.isEmpty);
    // 10 s quiet after the first read: one idle batch per second (give or take the first).
    expect(idle.length).toBeGreaterThanOrEqual(8);
    expect(idle.length).toBeLessThanOrEqual(10);
    expect(new Set(idle.map((b) => b.position))).toEqual(new Set([quiet[0]!.position]));
    expect(seen.filter((b) => b.partition === '0' && b.isEmpty)).toEqual([]);
  });

  it('are off by default', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    source.write({ id: 'x', n: 0 });
    const { seen } = run(source, new MemoryLeaseStore(), {});
    await vi.advanceTimersByTimeAsync(10_000);
    expect(seen.filter((b) => b.isEmpty)).toEqual([]);
  });
});

describe('idlePollIntervalMs', () => {
  /** Counts reads per partition. */
  function countingReads(source: MemorySource<Doc>): Map<string, number[]> {
    const reads = new Map<string, number[]>();
    const read = source.read.bind(source);
    source.read = (request) => {
      reads.set(request.partition.id, [...(reads.get(request.partition.id) ?? []), Date.now()]);
      return read(request);
    };
    return reads;
  }

  it('doubles the wait of a quiet partition up to the bound, and a busy one polls at pollIntervalMs', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const reads = countingReads(source);
    const { seen } = run(source, new MemoryLeaseStore(), { pollIntervalMs: 100, idlePollIntervalMs: 800 });
    const busy = keyIn(source, '1', 'busy');
    // Partition 1 gets a change every 100 ms; partition 0 stays quiet.
    for (let t = 0; t < 40; t++) {
      source.write({ id: busy, n: t });
      await vi.advanceTimersByTimeAsync(100);
    }
    const gaps = (id: string) => {
      const at = reads.get(id) ?? [];
      return at.slice(1).map((t, i) => t - at[i]!);
    };
    // Quiet: 100, then 200, 400, 800 (each up to a quarter shorter, by the partition's own share), then the
    // same from there on.
    const quiet = gaps('0').slice(0, 6);
    expect(quiet[0]).toBe(100);
    [200, 400, 800, 800, 800].forEach((nominal, i) => {
      expect(quiet[i + 1]).toBeGreaterThanOrEqual(0.75 * nominal);
      expect(quiet[i + 1]).toBeLessThanOrEqual(nominal);
    });
    expect(new Set(quiet.slice(3)).size).toBe(1);
    // Busy: never more than pollIntervalMs between reads.
    expect(Math.max(...gaps('1'))).toBeLessThanOrEqual(100);
    expect(seen.filter((b) => b.partition === '1').reduce((n, b) => n + b.size, 0)).toBe(40);
  });

  it('goes back to pollIntervalMs as soon as a quiet partition finds changes', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const reads = countingReads(source);
    const { seen } = run(source, new MemoryLeaseStore(), { pollIntervalMs: 100, idlePollIntervalMs: 1_600 });
    await vi.advanceTimersByTimeAsync(5_000);
    source.write({ id: 'x', n: 1 });
    await vi.advanceTimersByTimeAsync(1_600);
    expect(seen.reduce((n, b) => n + b.size, 0)).toBe(1);
    const after = (reads.get('0') ?? []).filter((t) => t >= Date.now() - 1_600);
    const found = after.findIndex((t, i) => i > 0 && t - after[i - 1]! === 100);
    expect(found).toBeGreaterThan(0);
  });

  it('spreads the polls of partitions that fell quiet together over the interval, instead of one burst', async () => {
    const partitions = 32;
    const source = new MemorySource<Doc>({ partitions });
    const reads = countingReads(source);
    run(source, new MemoryLeaseStore(), { pollIntervalMs: 100, idlePollIntervalMs: 1_600 });
    // Every reader starts in the same round and finds nothing, so without a share of their own they would
    // all poll at the same instants forever.
    await vi.advanceTimersByTimeAsync(30_000);
    const lastRound = [...reads.values()].map((at) => at.at(-1)!);
    expect(lastRound).toHaveLength(partitions);
    expect(new Set(lastRound).size).toBeGreaterThanOrEqual(partitions * 0.75);
    // No tenth of the interval holds more than a quarter of them.
    const slots = new Map<number, number>();
    for (const t of lastRound) slots.set(Math.floor((t % 1_600) / 160), (slots.get(Math.floor((t % 1_600) / 160)) ?? 0) + 1);
    expect(Math.max(...slots.values())).toBeLessThanOrEqual(partitions / 4);
    // Never more often than pollIntervalMs, never less often than idlePollIntervalMs.
    for (const at of reads.values()) {
      const gaps = at.slice(1).map((t, i) => t - at[i]!);
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(100);
      expect(Math.max(...gaps)).toBeLessThanOrEqual(1_600);
    }
  });

  it('must not be smaller than pollIntervalMs', () => {
    expect(() => createChangeFeed<Doc>({ source: new MemorySource<Doc>(), leases: new MemoryLeaseStore(), leasePrefix: 'test.', instanceName: 'a', pollIntervalMs: 1_000, idlePollIntervalMs: 500 })).toThrow(
      InvalidOptionsError,
    );
  });
});
