import { concatMap, filter, map, timer, bufferTime, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import { HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { changeFeed, createChangeFeed, partitionFeeds } from '../../src/feed/index.js';
import type { ChangeFeedOptions } from '../../src/feed/options.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { eachBatch } from '../../src/operators/eachBatch.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { advanceUntil, idsOf, lsnOfPosition, memoryFeed } from '../support/memory.js';
import { withReplace } from '../support/replacing.js';

interface Doc {
  id: string;
  n: number;
}

const PREFIX = 'test.';

function setup(partitions = 3, options: Partial<ChangeFeedOptions<Doc>> = {}) {
  return memoryFeed<Doc>({ partitions, mode: 'allVersionsAndDeletes', prefix: PREFIX, options });
}

describe('createChangeFeed', () => {
  let subscription: Subscription | undefined;
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    subscription?.unsubscribe();
    subscription = undefined;
    vi.useRealTimers();
  });

  it('delivers every change of every partition in per-partition order, and stop() completes it cleanly', async () => {
    const { source, feed, events, checkpoints } = setup(3);
    for (let i = 0; i < 500; i++) source.write({ id: `d${i}`, n: i });
    const seen: ChangeBatch<Doc>[] = [];
    let completed = false;
    subscription = feed.changes$.pipe(checkpointEvery({ count: 50, ms: 1_000 })).subscribe({
      next: (b) => seen.push(b as ChangeBatch<Doc>),
      complete: () => (completed = true),
    });
    await advanceUntil(() => idsOf(seen).length >= 500);
    for (let i = 500; i < 600; i++) source.write({ id: `d${i}`, n: i });
    await advanceUntil(() => idsOf(seen).length >= 600);
    expect(new Set(idsOf(seen)).size).toBe(600);
    for (const p of source.partitions()) {
      const lsns = seen.filter((b) => b.partition === p.id).flatMap((b) => b.changes.map((c) => c.lsn));
      expect(lsns).toEqual([...lsns].sort((a, b) => a - b));
    }
    let stopped = false;
    void feed.stop().then(() => (stopped = true));
    await advanceUntil(() => stopped);
    expect(completed).toBe(true);
    const stored = await checkpoints();
    for (const p of source.partitions()) expect(stored.get(p.id)).toBe(source.latestLsn(p.id));
    expect(events.filter((e) => e.type === 'leaseReleased')).toHaveLength(3);
    const checkpointed = events.flatMap((e) => (e.type === 'checkpoint' ? [e.changes] : []));
    expect(checkpointed.reduce((a, b) => a + b, 0)).toBe(600);
  });

  it('a pipeline that filters out 100% of changes still moves every checkpoint to the end', async () => {
    const { source, feed, checkpoints } = setup(4);
    for (let i = 0; i < 1_000; i++) source.write({ id: `d${i}`, n: i });
    let delivered = 0;
    subscription = feed.changes$
      .pipe(
        map((b) => b.filter(() => false)),
        checkpointEvery({ count: 100, ms: 500 }),
      )
      .subscribe((b) => (delivered += b.size));
    const atEnd = async () => {
      const stored = await checkpoints();
      return source.partitions().every((p) => stored.get(p.id) === source.latestLsn(p.id));
    };
    let done = false;
    await advanceUntil(() => {
      void atEnd().then((v) => (done = v));
      return done;
    });
    expect(delivered).toBe(0);
  });

  it('split during processing: nothing lost, children continue from the parent position', async () => {
    const { source, feed, events, leases } = setup(2, { maxItemCount: 20 });
    for (let i = 0; i < 400; i++) source.write({ id: `d${i}`, n: i });
    const seen: ChangeBatch<Doc>[] = [];
    subscription = feed.changes$
      .pipe(
        concatMap((b) => timer(5).pipe(map(() => b))),
        checkpointEvery({ count: 20, ms: 200 }),
      )
      .subscribe((b) => seen.push(b as ChangeBatch<Doc>));
    await advanceUntil(() => idsOf(seen).length >= 100);
    const [left, right] = source.split('0');
    for (let i = 400; i < 600; i++) source.write({ id: `d${i}`, n: i });
    await advanceUntil(() => new Set(idsOf(seen)).size >= 600, { limitMs: 120_000 });
    expect(events.some((e) => e.type === 'partitionSplit' && e.lease === '0')).toBe(true);
    const ids = idsOf(seen);
    expect(new Set(ids).size).toBe(600);
    // the parent waited for its batches to be acknowledged and handed over exactly that position
    expect(ids.length).toBe(600);
    const childTokens = new Set(seen.map((b) => b.partition));
    expect(childTokens.has(left.id) && childTokens.has(right.id)).toBe(true);
    const stored = (await leases.list(PREFIX)).leases.map((l) => l.leaseToken);
    expect(stored).not.toContain('0');
  });

  it('unsubscribing stops reading, persists what was acknowledged and releases the leases', async () => {
    const { source, feed, leases, checkpoints } = setup(2);
    for (let i = 0; i < 30; i++) source.write({ id: `d${i}`, n: i });
    let seen = 0;
    subscription = feed.changes$.pipe(checkpointEvery(1_000)).subscribe((b) => (seen += b.size));
    await advanceUntil(() => seen === 30);
    await vi.advanceTimersByTimeAsync(500);
    const owners = async () => (await leases.list(PREFIX)).leases.filter((l) => !l.leaseToken.startsWith('.')).map((l) => l.owner);
    expect(await owners()).toEqual(['host-a', 'host-a']);
    expect([...(await checkpoints()).values()]).toEqual([0, 0]); // count 1000 not reached: nothing written yet
    subscription.unsubscribe();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await owners()).toEqual([null, null]);
    const stored = await checkpoints();
    expect(source.partitions().map((p) => stored.get(p.id))).toEqual(source.partitions().map((p) => source.latestLsn(p.id)));
    source.write({ id: 'late', n: 0 });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(seen).toBe(30); // nothing read after unsubscribing
  });

  it('refuses to read leases created for the other feed mode, and stops with an error saying what to do', async () => {
    const { source, feed, leases } = setup(2);
    source.write({ id: 'a', n: 1 });
    let seen = 0;
    subscription = feed.changes$.pipe(checkpointEvery(1)).subscribe((b) => (seen += b.size));
    await advanceUntil(() => seen === 1);
    await feed.stop();
    subscription.unsubscribe();
    // Same lease prefix, but the source now reads the latest version only.
    const latest = new MemorySource<Doc>({ partitions: 2, mode: 'latestVersion' });
    const events: FeedEvent[] = [];
    const other = createChangeFeed<Doc>({ source: latest, leases, instanceName: 'host-b', leasePrefix: PREFIX, events: (e) => events.push(e) });
    let failure: unknown;
    subscription = other.changes$.subscribe({ error: (e) => (failure = e) });
    await advanceUntil(() => failure !== undefined);
    expect(failure).toBeInstanceOf(InvalidOptionsError);
    expect(String((failure as Error).message)).toMatch(/allVersionsAndDeletes.*latestVersion.*leasePrefix/);
    expect(events.some((e) => e.type === 'error' && e.error instanceof InvalidOptionsError)).toBe(true);
  });

  it('changeFeed() and partitionFeeds() expose the same engine', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    for (let i = 0; i < 10; i++) source.write({ id: `d${i}`, n: i });
    const base = { source, instanceName: 'x', leasePrefix: 'x.', pollIntervalMs: 100 };
    const merged: string[] = [];
    subscription = changeFeed({ ...base, leases: new MemoryLeaseStore() })
      .pipe(checkpointEvery(1))
      .subscribe((b) => merged.push(...idsOf([b])));
    const perPartition = new Map<string, number>();
    subscription.add(
      partitionFeeds({ ...base, leases: new MemoryLeaseStore() }).subscribe((pf) =>
        pf.pipe(checkpointEvery(1)).subscribe((b) => perPartition.set(pf.leaseToken, (perPartition.get(pf.leaseToken) ?? 0) + b.size)),
      ),
    );
    await advanceUntil(() => merged.length === 10 && [...perPartition.values()].reduce((a, b) => a + b, 0) === 10);
    expect([...perPartition.keys()].sort()).toEqual(['0', '1']);
  });

  it('reports a pipeline that drops batches (a sequence gap at the checkpoint) as a stall event', async () => {
    const { source, feed, events } = setup(1, { maxItemCount: 10 });
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}`, n: i });
    let index = 0;
    subscription = feed.changes$
      .pipe(
        filter(() => index++ % 2 === 0),
        checkpointEvery(1),
      )
      .subscribe();
    await vi.advanceTimersByTimeAsync(1_000);
    const stalls = events.filter((e) => e.type === 'stall');
    expect(stalls.length).toBeGreaterThan(0);
    expect(stalls[0]).toMatchObject({ lease: '0', message: expect.stringMatching(/batch 2 never reached checkpointEvery/) });
  });

  it('reports an exhausted budget with nothing reaching the checkpoint for stallTimeoutMs, but not a bufferTime shorter than it', async () => {
    const stuck = setup(1, { maxInFlightChanges: 100, maxItemCount: 10, stallTimeoutMs: 30_000 });
    for (let i = 0; i < 500; i++) stuck.source.write({ id: `d${i}`, n: i });
    subscription = stuck.feed.changes$.subscribe(); // no checkpointEvery: nothing is ever acknowledged
    await vi.advanceTimersByTimeAsync(29_000);
    expect(stuck.events.filter((e) => e.type === 'stall')).toEqual([]);
    await vi.advanceTimersByTimeAsync(2_000);
    const stalls = stuck.events.filter((e) => e.type === 'stall');
    expect(stalls).toHaveLength(1);
    expect(stalls[0]).toMatchObject({ message: expect.stringMatching(/End the pipeline with checkpointEvery/) });
    expect(stuck.feed.inFlightChanges).toBe(100);
    subscription.unsubscribe();

    const buffered = setup(1, { maxInFlightChanges: 1_000, stallTimeoutMs: 30_000 });
    for (let i = 0; i < 50; i++) buffered.source.write({ id: `d${i}`, n: i });
    subscription = buffered.feed.changes$.pipe(bufferTime(20_000), checkpointEvery(1)).subscribe();
    await vi.advanceTimersByTimeAsync(130_000);
    expect(buffered.events.filter((e) => e.type === 'stall')).toEqual([]);
    expect(buffered.events.some((e) => e.type === 'checkpoint')).toBe(true);
  });

  it('stop() resolves only after in-flight checkpoint writes and lease releases are done', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    for (let i = 0; i < 50; i++) source.write({ id: `d${i}`, n: i });
    const inner = new MemoryLeaseStore();
    let slow = false;
    // Lease writes take 2 s once `slow` is set: stop() must wait for them.
    const store = withReplace(inner, async (lease, replace) => {
      if (slow) await new Promise((r) => setTimeout(r, 2_000));
      return replace(lease);
    });
    const feed = createChangeFeed<Doc>({ source, leases: store, instanceName: 'a', leasePrefix: PREFIX, pollIntervalMs: 100 });
    let seen = 0;
    subscription = feed.changes$.pipe(checkpointEvery(1_000)).subscribe((b) => (seen += b.size));
    await advanceUntil(() => seen === 50);
    slow = true;
    let stopped = false;
    void feed.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(1_900);
    expect(stopped).toBe(false);
    await advanceUntil(() => stopped, { limitMs: 20_000 });
    const leases = (await inner.list(PREFIX)).leases.filter((l) => l.feedRange);
    expect(leases.map((l) => [l.owner, lsnOfPosition(l.continuation)])).toEqual(
      source.partitions().map((p) => [null, source.latestLsn(p.id)]),
    );
  });

  it('a second host takes over half the leases; the first drains them, nothing is lost or read twice', async () => {
    const source = new MemorySource<Doc>({ partitions: 4 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const host = (name: string) =>
      createChangeFeed<Doc>({
        source,
        leases,
        instanceName: name,
        leasePrefix: PREFIX,
        pollIntervalMs: 100,
        leaseAcquireIntervalMs: 200,
        leaseRenewIntervalMs: 500,
        leaseExpirationMs: 2_000,
        events: (e) => events.push(e),
      });
    const seen = new Map<string, number>();
    const pipeline = (feed: ReturnType<typeof host>) =>
      feed.changes$
        .pipe(
          concatMap((b) => timer(2).pipe(map(() => b))),
          checkpointEvery({ count: 10, ms: 100 }),
        )
        .subscribe((b) => {
          for (const c of b as ChangeBatch<Doc>) seen.set(c.id, (seen.get(c.id) ?? 0) + 1);
        });
    let next = 0;
    const write = (n: number) => {
      for (let i = 0; i < n; i++, next++) source.write({ id: `d${next}`, n: next });
    };
    write(200);
    const a = host('host-a');
    subscription = pipeline(a);
    await advanceUntil(() => seen.size === 200);
    const b = host('host-b');
    subscription.add(pipeline(b));
    for (let t = 0; t < 50; t++) {
      write(4);
      await vi.advanceTimersByTimeAsync(100);
    }
    await advanceUntil(() => seen.size === next, { limitMs: 60_000 });
    const owners = (await leases.list(PREFIX)).leases.filter((l) => l.feedRange).map((l) => l.owner);
    expect(owners.filter((o) => o === 'host-a')).toHaveLength(2);
    expect(owners.filter((o) => o === 'host-b')).toHaveLength(2);
    expect(events.some((e) => e.type === 'leaseReleased' && e.reason === 'Rebalanced')).toBe(true);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    await Promise.all([a.stop(), b.stop(), vi.advanceTimersByTimeAsync(10_000)]);
  });

  it("a handler that throws on one change, under onFailure 'skip', surfaces as an error event with the partition and the change", async () => {
    const { source, feed, events } = setup(2);
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}`, n: i });
    const poison = source.partitionFor('d7');
    let delivered = 0;
    subscription = feed.changes$
      .pipe(
        mapChanges((c) => {
          if (c.id === 'd7') throw new Error('cannot handle d7');
          return c;
        }, { onFailure: { retry: { attempts: 1 }, skip: true } }),
        checkpointEvery(1),
      )
      .subscribe((b) => (delivered += b.size));
    await advanceUntil(() => delivered === 19);
    const errors = events.filter((e) => e.type === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ lease: poison, change: { id: 'd7' } });
    expect((errors[0] as { error: Error }).error).toBeInstanceOf(HandlerError);
  });

  it('a slow partition is reported as a stall by its lease while other partitions keep reaching the checkpoint; they never are', async () => {
    const { source, feed, events } = setup(2, { maxInFlightChanges: 200, maxItemCount: 50, stallTimeoutMs: 30_000 });
    let next = 0;
    const write = (n: number) => {
      for (let i = 0; i < n; i++, next++) source.write({ id: `d${next}`, n: next });
    };
    write(1_000);
    let acked = 0;
    subscription = feed.changes$
      .pipe(
        // partition 0's sink hangs for 100 s per batch; partition 1's is quick
        eachBatch((b) => timer(b.partition === '0' ? 100_000 : 10), { concurrency: 2 }),
        checkpointEvery(50),
      )
      .subscribe((b) => (acked += b.size));
    for (let t = 0; t < 90; t++) {
      write(20); // keeps partition 1 busy
      await vi.advanceTimersByTimeAsync(1_000);
    }
    expect(acked).toBeGreaterThan(1_000);
    const stalls = events.filter((e) => e.type === 'stall');
    expect(stalls.map((e) => e.lease)).toEqual(['0']);
    expect(stalls[0]!.message).toMatch(/partition 0: \d+ batches \(\d+ changes\) read 30 s ago .*Other partitions of this host keep reaching the checkpoint/);
  });

  it('a partition whose batches are all dropped by the pipeline is reported once, by lease, while others progress (issue 25, item 5)', async () => {
    const { source, feed, events } = setup(2, { maxInFlightChanges: 100, maxItemCount: 10, stallTimeoutMs: 30_000 });
    const dropped = source.partitionFor('d0');
    let next = 0;
    subscription = feed.changes$
      .pipe(
        filter((b) => b.partition !== dropped), // the mistake: a plain filter on batches
        checkpointEvery({ count: 10, ms: 500 }),
      )
      .subscribe();
    for (let t = 0; t < 120; t++) {
      for (let i = 0; i < 10; i++, next++) source.write({ id: `d${next}`, n: next });
      await vi.advanceTimersByTimeAsync(1_000);
    }
    const stalls = events.filter((e) => e.type === 'stall');
    expect(stalls.map((e) => e.lease)).toEqual([dropped]);
    expect(stalls[0]!.message).toMatch(/never drop batches \(use filterChanges instead of filter\)/);
  });

  it.each([
    [{ source: undefined }, 'source'],
    [{ leases: {} }, 'leases'],
    [{ instanceName: '' }, 'instanceName'],
    [{ maxItemCount: 0 }, 'maxItemCount'],
    [{ maxItemCount: 2.5 }, 'maxItemCount'],
    [{ pollIntervalMs: -1 }, 'pollIntervalMs'],
    [{ pollIntervalMs: Number.NaN }, 'pollIntervalMs'],
    [{ maxInFlightChanges: 0 }, 'maxInFlightChanges'],
    [{ maxInFlightChanges: 10, maxItemCount: 100 }, 'maxInFlightChanges'],
    [{ stallTimeoutMs: 0 }, 'stallTimeoutMs'],
    [{ startFrom: 'yesterday' }, 'startFrom'],
    [{ startFrom: new Date('nope') }, 'startFrom'],
    [{ leaseRenewIntervalMs: 60_000, leaseExpirationMs: 30_000 }, 'leaseRenewIntervalMs'],
    [{ scheduler: {} }, 'scheduler'],
    [{ leasePrefix: 3 }, 'leasePrefix'],
    [{ maxLeases: -1 }, 'maxLeases'],
    [{ minLeases: 4, maxLeases: 2 }, 'minLeases'],
    [{ leaseAcquireIntervalMs: 120_000 }, 'leaseAcquireIntervalMs'],
  ])('rejects invalid options at construction: %o', (bad, option) => {
    const good = { source: new MemorySource(), leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'a.' };
    const attempt = () => createChangeFeed({ ...good, ...(bad as object) } as ChangeFeedOptions<unknown>);
    expect(attempt).toThrow(InvalidOptionsError);
    try {
      attempt();
    } catch (error) {
      expect((error as InvalidOptionsError).option).toBe(option);
      expect((error as Error).message).toMatch(new RegExp(`invalid option ${option}: .{10,}`));
    }
  });
});
