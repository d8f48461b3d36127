import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Partition, Position } from '../../src/core/Partition.js';
import { ResourceGoneError, TransientError } from '../../src/errors/index.js';
import { estimateLag, lag$, UNKNOWN_LAG, type LeaseLag } from '../../src/estimator/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import type { Source } from '../../src/sources/Source.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { freshContainer, writeDocs, type Doc } from './helpers.js';

const PREFIX = 'app.';

async function addLease(store: MemoryLeaseStore, partition: Partition, continuation: Position | null, owner: string | null = 'host-1') {
  await store.createIfAbsent({
    id: `${PREFIX}${partition.id}`,
    leaseToken: partition.id,
    feedRange: partition.range,
    owner,
    continuation,
    timestampMs: 0,
    epoch: 1,
    mode: 'latestVersion',
    properties: {},
  });
}

/** Position after the first `n` changes of a partition (read from the beginning). */
async function positionAfter<T>(source: Source<T>, partition: Partition, n: number): Promise<Position> {
  const page = await source.read({ partition, from: 'beginning', maxItemCount: n });
  expect(page.changes.length).toBe(n);
  return page.position;
}

describe('estimateLag (memory source)', () => {
  it('counts changes after the checkpoint, the age of the oldest, and the whole backlog of a lease that never checkpointed', async () => {
    let nowMs = 1_000_000;
    const source = new MemorySource<{ id: string }>({ partitions: 4, now: () => nowMs });
    const [p0, p1, p2, p3] = source.partitions() as Partition[];
    for (let i = 0; i < 400; i++) {
      source.write({ id: `d${i}` });
      nowMs += 10;
    }
    const store = new MemoryLeaseStore();
    await addLease(store, p0!, await positionAfter(source, p0!, 5));
    await addLease(store, p1!, null, null);
    const end = await source.read({ partition: p2!, from: 'now', maxItemCount: 10 });
    await addLease(store, p2!, end.position);
    await addLease(store, p3!, await positionAfter(source, p3!, 1), 'host-2');
    // The coordinator's bootstrap marker lives under the same prefix and is not a lease.
    await addLease(store, { id: '.info', range: { minInclusive: '', maxExclusive: '' } }, null);
    const oldestP0 = (await source.read({ partition: p0!, from: 'beginning', maxItemCount: 6 })).changes[5]!;

    const lags = await estimateLag({ source, leases: store, leasePrefix: PREFIX, now: () => nowMs });
    const by = new Map(lags.map((l) => [l.leaseToken, l]));
    expect(lags.map((l) => l.leaseToken)).toEqual([p0!.id, p1!.id, p2!.id, p3!.id].sort((a, b) => a.localeCompare(b, 'en', { numeric: true })));
    expect(by.get(p0!.id)).toMatchObject({ estimatedLag: source.latestLsn(p0!.id) - 5, timeLagMs: nowMs - oldestP0.timestampMs, owner: 'host-1' });
    // Never checkpointed, started from the beginning (the default): the whole partition is its real backlog.
    const firstP1 = (await source.read({ partition: p1!, from: 'beginning', maxItemCount: 1 })).changes[0]!;
    expect(by.get(p1!.id)).toEqual({
      leaseToken: p1!.id,
      owner: null,
      estimatedLag: source.latestLsn(p1!.id) - firstP1.lsn + 1,
      timeLagMs: nowMs - firstP1.timestampMs,
      lastCheckpoint: null,
    });
    expect(by.get(p1!.id)!.estimatedLag).toBeGreaterThan(50);
    // Started from anything else, it cannot be counted: the sentinel, as the .NET estimator.
    const fromNow = await estimateLag({ source, leases: store, leasePrefix: PREFIX, now: () => nowMs, startFrom: 'now' });
    expect(fromNow.find((l) => l.leaseToken === p1!.id)).toEqual({ leaseToken: p1!.id, owner: null, estimatedLag: UNKNOWN_LAG, timeLagMs: undefined, lastCheckpoint: null });
    expect(by.get(p2!.id)).toMatchObject({ estimatedLag: 0, timeLagMs: 0, lastCheckpoint: end.position });
    expect(by.get(p3!.id)).toMatchObject({ estimatedLag: source.latestLsn(p3!.id) - 1, owner: 'host-2' });
  });

  it('reports the sentinel for the lease of a split partition until child leases replace it', async () => {
    const source = new MemorySource<{ id: string }>({ partitions: 2 });
    for (let i = 0; i < 50; i++) source.write({ id: `d${i}` });
    const [p0] = source.partitions() as Partition[];
    const store = new MemoryLeaseStore();
    await addLease(store, p0!, await positionAfter(source, p0!, 2));
    source.split(p0!.id);
    const [lag] = await estimateLag({ source, leases: store, leasePrefix: PREFIX });
    expect(lag).toMatchObject({ leaseToken: p0!.id, estimatedLag: UNKNOWN_LAG, timeLagMs: undefined });
  });

  it('reads leases in the .NET layout (leaseScheme: dotnet) and never counts its .info / .lock markers', async () => {
    const source = new MemorySource<{ id: string }>({ partitions: 3 });
    for (let i = 0; i < 90; i++) source.write({ id: `d${i}` });
    const partitions = source.partitions() as Partition[];
    const NET = 'orders-viewshop.documents.azure.com_AbCdAA==_AbCdAKl9dQA=';
    const store = new MemoryLeaseStore();
    const base = { owner: null, timestampMs: 0, epoch: 0, mode: 'latestVersion' as const, properties: {} };
    for (const p of partitions) {
      await store.createIfAbsent({ ...base, id: `${NET}..${p.id}`, leaseToken: p.id, feedRange: p.range, continuation: await positionAfter(source, p, 2) });
    }
    // .NET's `{ id }` marker and `{ id, ttl }` lock read as documents with an empty token
    for (const id of [`${NET}.info`, `${NET}.lock`]) await store.createIfAbsent({ ...base, id, leaseToken: '', feedRange: undefined, continuation: null });
    const lags = await estimateLag({ source, leases: store, leasePrefix: NET, leaseScheme: 'dotnet' });
    expect(lags.map((l) => [l.leaseToken, l.estimatedLag])).toEqual(partitions.map((p) => [p.id, source.latestLsn(p.id) - 2]));

    await expect(estimateLag({ source, leases: store, leaseScheme: 'dotnet' })).rejects.toThrow(/pass leasePrefix: await dotnetLeasePrefix/);
    await expect(estimateLag({ source, leases: store, leasePrefix: `${NET}..`, leaseScheme: 'dotnet' })).rejects.toThrow(/without the '\.\.' separator/);
    expect(() => lag$({ source, leases: store, leasePrefix: NET, leaseScheme: 'DotNet' as never })).toThrow(/must be 'rxfeed' or 'dotnet'/);
  });

  it('refuses bad options with a message that names them', async () => {
    const source = new MemorySource({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    await expect(estimateLag({ source, leases, concurrency: 0 })).rejects.toThrow(/concurrency/);
    await expect(estimateLag({ source: {} as never, leases })).rejects.toThrow(/source/);
    expect(() => lag$({ source, leases }, { intervalMs: 0 })).toThrow(/intervalMs/);
  });
});

describe('lag$', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('polls every intervalMs, skips a throttled poll, and ends on a fatal error', async () => {
    vi.useFakeTimers();
    const source = new MemorySource<{ id: string }>({ partitions: 1 });
    const [p0] = source.partitions() as Partition[];
    const store = new MemoryLeaseStore();
    await addLease(store, p0!, (await source.read({ partition: p0!, from: 'now', maxItemCount: 1 })).position);
    const seen: number[] = [];
    let failure: unknown;
    const sub = lag$({ source, leases: store, leasePrefix: PREFIX }, { intervalMs: 1000 }).subscribe({
      next: (lags: LeaseLag[]) => seen.push(lags[0]!.estimatedLag),
      error: (err: unknown) => (failure = err),
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(seen).toEqual([0]);
    source.write({ id: 'a' });
    source.write({ id: 'b' });
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen).toEqual([0, 2]);
    source.faults.add({ kind: 'throttle', retryAfterMs: 5 });
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen).toEqual([0, 2]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen).toEqual([0, 2, 2]);
    source.faults.add({ kind: 'error', error: new ResourceGoneError('memory') });
    await vi.advanceTimersByTimeAsync(1000);
    expect(failure).toBeInstanceOf(ResourceGoneError);
    expect(failure).not.toBeInstanceOf(TransientError);
    expect(sub.closed).toBe(true);
  });
});

describe('estimateLag on Cosmos DB (emulator or COSMOS_ENDPOINT)', () => {
  let cosmos: TestCosmos;
  beforeAll(async () => {
    cosmos = await startTestCosmos({ initialRangeCount: 4 });
  });
  afterAll(async () => {
    await cosmos.stop();
  });

  it('lag = writes after the checkpoint (one transaction each), from the session token LSN', async () => {
    const container = await freshContainer(cosmos.client, 'lag');
    const source = new CosmosSource<Doc>(container);
    const partitions = await source.listPartitions();
    const store = new MemoryLeaseStore();
    const start = new Map<string, Position>();
    for (const p of partitions) start.set(p.id, (await source.read({ partition: p, from: 'now', maxItemCount: 1 })).position);
    for (const p of partitions) await addLease(store, p, start.get(p.id)!);
    await writeDocs(container, 120);
    // Each partition's waiting count is the changes a reader from the checkpoint would get.
    const expected = new Map<string, number>();
    for (const p of partitions) {
      let n = 0;
      let from: Position = start.get(p.id)!;
      for (;;) {
        const page = await source.read({ partition: p, from: { position: from }, maxItemCount: 50 });
        n += page.changes.length;
        from = page.position;
        if (page.changes.length === 0) break;
      }
      expected.set(p.id, n);
    }
    const estimator = new CosmosSource<Doc>(cosmos.newClient().database('db').container(container.id));
    const lags = await estimateLag({ source: estimator, leases: store, leasePrefix: PREFIX });
    expect(lags.length).toBe(partitions.length);
    for (const l of lags) {
      expect(l.estimatedLag).toBe(expected.get(l.leaseToken));
      if (l.estimatedLag > 0) expect(l.timeLagMs).toBeGreaterThanOrEqual(0);
    }
    expect(lags.reduce((n, l) => n + l.estimatedLag, 0)).toBe(120);
  });
});
