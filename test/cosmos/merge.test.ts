import type { Container } from '@azure/cosmos';
import type { Subscription } from 'rxjs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import type { Partition } from '../../src/core/Partition.js';
import { effectivePartitionKey } from '../../src/emulator/index.js';
import { PartitionGoneError } from '../../src/errors/index.js';
import { estimateLag, UNKNOWN_LAG } from '../../src/estimator/index.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../../src/feed/index.js';
import type { Lease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { needsEmulator, startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { drainPartition, freshContainer, writeDocs, type Doc } from './helpers.js';

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

const PK = { paths: ['/pk'], version: 2 as const };
const epkOf = (i: number): string => effectivePartitionKey([`k${i}`], PK);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `done` every 50 ms for up to `ms` (real time: the emulator runs for real). */
async function eventually(done: () => boolean, ms = 15_000): Promise<void> {
  for (let waited = 0; !done() && waited < ms; waited += 50) await sleep(50);
}

/** One running processor over CosmosSource, with short timings, recording what it delivers. */
function startProcessor(container: Container, leases: LeaseStore, prefix: string) {
  const events: FeedEvent[] = [];
  const seen = new Set<string>();
  const feed: ChangeFeedProcessor<Doc> = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases,
    instanceName: 'host-1',
    leasePrefix: prefix,
    startFrom: 'beginning',
    pollIntervalMs: 50,
    leaseAcquireIntervalMs: 200,
    leaseRenewIntervalMs: 1_000,
    leaseExpirationMs: 3_000,
    events: (e) => events.push(e),
  });
  const sub: Subscription = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((batch) => {
    for (const c of batch.changes) seen.add(c.id);
  });
  return { feed, sub, events, seen };
}

let running: ReturnType<typeof startProcessor> | undefined;
afterEach(async () => {
  await running?.feed.stop();
  running?.sub.unsubscribe();
  running = undefined;
});

const errorsOf = (events: readonly FeedEvent[]): string[] =>
  events.flatMap((e) => (e.type === 'error' ? [`${e.lease ?? '*'}: ${e.error.message}`] : []));

/** The leases under `prefix`, markers left out. */
async function leasesOf(store: LeaseStore, prefix: string): Promise<Lease[]> {
  return (await store.list(prefix)).leases.filter((l) => !l.leaseToken.startsWith('.'));
}

describe.each([
  ['MemoryLeaseStore', () => new MemoryLeaseStore()],
  ['CosmosLeaseStore', () => new CosmosLeaseStore({ container: cosmos.client.database('db').container('merge-leases'), createIfMissing: true })],
])('a merge through the processor (CosmosSource, %s)', (_name, newStore) => {
  it('delivers every change written before and after the merge, and the EPK leases checkpoint in the merged range', async (ctx) => {
    needsEmulator(cosmos, 'merging ranges', ctx);
    const container = await freshContainer(cosmos.client, 'merge-feed');
    const store = newStore();
    const prefix = `m${Date.now()}.`;
    const before = await writeDocs(container, 100);
    running = startProcessor(container, store, prefix);
    const { seen, events } = running;
    await eventually(() => seen.size >= 100);
    expect(seen.size).toBe(100);

    const source = new CosmosSource<Doc>(container);
    const [, p1, p2] = await source.listPartitions();
    const merged = cosmos.emulator!.merge('db', container.id, p1!.id, p2!.id);
    const after = await writeDocs(container, 100, 'd', 100);
    await eventually(() => seen.size >= 200);
    expect(errorsOf(events)).toEqual([]);
    expect([...seen].sort()).toEqual([...before, ...after].sort());

    // Each parent lease was replaced by an EPK lease for its own part of the merged range…
    const epkTokens = [p1!, p2!].map((p) => `${p.range.minInclusive}-${p.range.maxExclusive}`);
    const splits = events.flatMap((e) => (e.type === 'partitionSplit' ? [[e.lease, e.children]] : []));
    expect(splits).toEqual(expect.arrayContaining([[p1!.id, [epkTokens[0]]], [p2!.id, [epkTokens[1]]]]));
    // …and its checkpoint reached the end of that part (a read from it finds nothing new).
    await eventually(() => false, 300); // let the last checkpoint land
    const leases = await leasesOf(store, prefix);
    expect(leases.map((l) => l.leaseToken).sort()).toEqual(expect.arrayContaining(epkTokens));
    expect(leases.map((l) => l.leaseToken)).not.toContain(merged.id);
    for (const [token, parent] of [[epkTokens[0]!, p1!], [epkTokens[1]!, p2!]] as const) {
      const lease = leases.find((l) => l.leaseToken === token)!;
      expect(lease.feedRange).toEqual(parent.range);
      expect(lease.continuation).not.toBeNull();
      const partition: Partition = { id: token, range: lease.feedRange! };
      const rest = await source.read({ partition, from: { position: lease.continuation! }, maxItemCount: 100 });
      expect(rest.changes).toEqual([]);
    }
  });
});

describe('EPK-range leases over a merged range (CosmosSource)', () => {
  it("reads exactly its own keys of the merged range, while the parent's own id is gone", async (ctx) => {
    needsEmulator(cosmos, 'merging ranges', ctx);
    const container = await freshContainer(cosmos.client, 'merge-epk');
    await writeDocs(container, 120);
    const source = new CosmosSource<Doc>(container);
    const [, p1, p2] = await source.listPartitions();
    const own = await drainPartition(source, p1!, 'beginning', 25);
    cosmos.emulator!.merge('db', container.id, p1!.id, p2!.id);
    await expect(source.read({ partition: p1!, from: { position: own.position }, maxItemCount: 10 })).rejects.toThrow(PartitionGoneError);

    const epk: Partition = { id: `${p1!.range.minInclusive}-${p1!.range.maxExclusive}`, range: p1!.range };
    const fromStart = await drainPartition(source, epk, 'beginning', 25);
    expect(fromStart.changes.map((c) => c.id).sort()).toEqual(own.changes.map((c) => c.id).sort());
    // Written after the merge: only the keys inside the EPK range come back, from the parent's position.
    const written = await writeDocs(container, 60, 'late', 1000);
    const inside = written.filter((_, i) => epkOf(1000 + i) >= p1!.range.minInclusive && epkOf(1000 + i) < p1!.range.maxExclusive);
    expect(inside.length).toBeGreaterThan(0);
    const fromParent = await drainPartition(source, epk, { position: own.position }, 7);
    expect(fromParent.changes.map((c) => c.id).sort()).toEqual([...inside].sort());
  });

  it('starts from a point in time too (a lease that never checkpointed before the merge)', async (ctx) => {
    needsEmulator(cosmos, 'merging ranges', ctx);
    const container = await freshContainer(cosmos.client, 'merge-time');
    await writeDocs(container, 60);
    const source = new CosmosSource<Doc>(container);
    const [, p1, p2] = await source.listPartitions();
    const own = await drainPartition(source, p1!, 'beginning');
    cosmos.emulator!.merge('db', container.id, p1!.id, p2!.id);
    const epk: Partition = { id: `${p1!.range.minInclusive}-${p1!.range.maxExclusive}`, range: p1!.range };
    const sinceEver = await drainPartition(source, epk, new Date(Date.now() - 3_600_000));
    expect(sinceEver.changes.map((c) => c.id).sort()).toEqual(own.changes.map((c) => c.id).sort());
    const future = await source.read({ partition: epk, from: new Date(Date.now() + 3_600_000), maxItemCount: 10 });
    expect(future.changes).toEqual([]);
  });

  it('a split of the merged range inside a lease\'s range replaces that lease through the processor; nothing is lost', async (ctx) => {
    needsEmulator(cosmos, 'merging and splitting ranges', ctx);
    const container = await freshContainer(cosmos.client, 'merge-split');
    const store = new MemoryLeaseStore();
    const written = await writeDocs(container, 100);
    running = startProcessor(container, store, 'ms.');
    const { seen, events } = running;
    const source = new CosmosSource<Doc>(container);
    const [, p1, p2] = await source.listPartitions();
    await eventually(() => seen.size >= 100);
    const merged = cosmos.emulator!.merge('db', container.id, p1!.id, p2!.id);
    written.push(...(await writeDocs(container, 50, 'd', 100)));
    await eventually(() => seen.size >= 150);
    expect(seen.size).toBe(150);

    // Split the merged range in the middle of p1's part: that EPK lease now spans two physical ranges.
    const lo = BigInt(`0x${p1!.range.minInclusive.padEnd(32, '0')}`);
    const hi = BigInt(`0x${p1!.range.maxExclusive.padEnd(32, '0')}`);
    const boundary = ((lo + hi) / 2n).toString(16).toUpperCase().padStart(32, '0');
    const [left, right] = cosmos.emulator!.split('db', container.id, merged.id, { boundary });
    written.push(...(await writeDocs(container, 100, 'd', 150)));
    await eventually(() => seen.size >= 250);
    expect(errorsOf(events)).toEqual([]);
    expect([...seen].sort()).toEqual([...written].sort());

    const epk1 = `${p1!.range.minInclusive}-${p1!.range.maxExclusive}`;
    const epk2 = `${p2!.range.minInclusive}-${p2!.range.maxExclusive}`;
    const tokens = (await leasesOf(store, 'ms.')).map((l) => l.leaseToken);
    // p1's part is replaced by the left child (wholly inside it) and the EPK lease for the rest of it;
    // p2's part lies inside the right child and keeps its EPK lease.
    expect(tokens).toEqual(expect.arrayContaining([left.id, `${boundary}-${p1!.range.maxExclusive}`, epk2]));
    expect(tokens).not.toContain(epk1);
    expect(tokens).not.toContain(right.id);
  });
});

describe('estimateLag for an EPK-range lease', () => {
  it('reports the backlog of its part of the merged range, not the sentinel', async (ctx) => {
    needsEmulator(cosmos, 'merging ranges', ctx);
    const container = await freshContainer(cosmos.client, 'merge-lag');
    await writeDocs(container, 80);
    const source = new CosmosSource<Doc>(container);
    const [, p1, p2] = await source.listPartitions();
    cosmos.emulator!.merge('db', container.id, p1!.id, p2!.id);
    const epk: Partition = { id: `${p1!.range.minInclusive}-${p1!.range.maxExclusive}`, range: p1!.range };
    const caughtUp = await drainPartition(source, epk, 'beginning');
    const store = new MemoryLeaseStore();
    await store.createIfAbsent({
      id: `lag.${epk.id}`,
      leaseToken: epk.id,
      feedRange: epk.range,
      owner: 'host-1',
      continuation: caughtUp.position,
      timestampMs: 0,
      epoch: 1,
      mode: 'latestVersion',
      properties: {},
    });
    expect((await estimateLag({ source, leases: store, leasePrefix: 'lag.' }))[0]).toMatchObject({ estimatedLag: 0, timeLagMs: 0 });

    // Seven writes inside the lease's range, one transaction each.
    let written = 0;
    for (let i = 2000; written < 7; i++) {
      const key = epkOf(i);
      if (key < epk.range.minInclusive || key >= epk.range.maxExclusive) continue;
      await container.items.create<Doc>({ id: `lag${i}`, pk: `k${i}`, v: i });
      written++;
    }
    const [lag] = await estimateLag({ source, leases: store, leasePrefix: 'lag.' });
    expect(lag!.estimatedLag).not.toBe(UNKNOWN_LAG);
    expect(lag!.estimatedLag).toBe(7);
    expect(lag!.timeLagMs).toBeGreaterThanOrEqual(0);
  });
});
