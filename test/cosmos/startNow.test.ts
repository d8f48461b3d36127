import { CosmosClient, type Container } from '@azure/cosmos';
import { filter, firstValueFrom, Subject, type Subscription } from 'rxjs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import type { FeedMode } from '../../src/core/Partition.js';
import { CosmosEmulator, effectivePartitionKey } from '../../src/emulator/index.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../../src/feed/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { freshContainer, sleep, writeDocs, type Doc } from './helpers.js';

/*
 * Issue 25, item 1: `startFrom: 'now'` was taken at each partition's first read, so changes written after the
 * processor started (and after its first lease was acquired) were skipped: 0 of 200 and 188 of 200 on four
 * ranges. The bootstrap now pins every lease's start when it creates it: in LatestVersion mode to the run's
 * start by the service's clock, in AllVersionsAndDeletes mode (which starts only from "now" or a position) to the range's
 * position at the moment the lease is created, before any lease is acquired.
 */

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

let running: { feed: ChangeFeedProcessor<Doc>; sub: Subscription } | undefined;
afterEach(async () => {
  await running?.feed.stop();
  running?.sub.unsubscribe();
  running = undefined;
});

/** A processor from 'now' on a fresh container with fresh leases; what it delivers goes to `seen`. */
async function startFromNow(mode: FeedMode) {
  const container: Container = await freshContainer(cosmos.client, `now-${mode}`);
  const seen = new Set<string>();
  const events = new Subject<FeedEvent>();
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container, { mode }),
    leases: new CosmosLeaseStore({ container: cosmos.client.database('db').container('now-leases'), createIfMissing: true }),
    instanceName: 'host-1',
    leasePrefix: `now.${mode}.${container.id}.`,
    startFrom: 'now',
    pollIntervalMs: 50,
    leaseAcquireIntervalMs: 200,
    events: (e) => events.next(e),
  });
  const acquired = firstValueFrom(events.pipe(filter((e) => e.type === 'leaseAcquired')));
  const errors: string[] = [];
  events.subscribe((e) => e.type === 'error' && errors.push(e.error.message));
  return { container, seen, feed, acquired, errors };
}

/** Waits (real time) until `ids` are all seen, or 15 s. */
async function untilSeen(seen: ReadonlySet<string>, ids: readonly string[]): Promise<void> {
  for (let waited = 0; waited < 15_000 && ids.some((id) => !seen.has(id)); waited += 50) await sleep(50);
}

describe.each(['latestVersion', 'allVersionsAndDeletes'] as const)("startFrom: 'now' on the emulator (%s, four ranges)", (mode) => {
  it('delivers all 200 documents written right after the first leaseAcquired event (issue 25, item 1)', async () => {
    const { container, seen, feed, acquired, errors } = await startFromNow(mode);
    const sub = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((b) => b.changes.forEach((c) => seen.add(c.id)));
    running = { feed, sub };
    await acquired;
    const ids = await writeDocs(container, 200, 'after-acquired-');
    await untilSeen(seen, ids);
    expect(ids.filter((id) => !seen.has(id))).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('delivers what was written before it started from the time it started, never what came before', async () => {
    const { container, seen, feed, acquired } = await startFromNow(mode);
    const before = await writeDocs(container, 20, 'before-');
    const sub = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((b) => b.changes.forEach((c) => seen.add(c.id)));
    running = { feed, sub };
    await acquired;
    const marker = await writeDocs(container, 4, 'marker-');
    await untilSeen(seen, marker);
    expect(marker.filter((id) => !seen.has(id))).toEqual([]);
    // LatestVersion starts at a time, which the service resolves to the second: only a change made in the
    // second the processor started can come along. Nothing older is ever delivered in either mode.
    if (mode === 'allVersionsAndDeletes') expect(before.filter((id) => seen.has(id))).toEqual([]);
  });
});

describe("startFrom: 'now' on the emulator, written right after subscribing (issue 25, item 1)", () => {
  it('latestVersion: delivers all 200 (now is the moment the processor started)', async () => {
    const { container, seen, feed } = await startFromNow('latestVersion');
    const sub = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((b) => b.changes.forEach((c) => seen.add(c.id)));
    running = { feed, sub };
    const ids = await writeDocs(container, 200, 'after-subscribe-');
    await untilSeen(seen, ids);
    expect(ids.filter((id) => !seen.has(id))).toEqual([]);
  });

  it('allVersionsAndDeletes: delivers every document written after its range was pinned, with no gap (now is the moment the lease was made)', async () => {
    const { container, seen, feed, acquired } = await startFromNow('allVersionsAndDeletes');
    const sub = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((b) => b.changes.forEach((c) => seen.add(c.id)));
    running = { feed, sub };
    // One at a time, so that "after" is well defined: within each range, what is delivered is every write
    // from some point on (the pin, taken before the lease exists), and everything after the first lease was acquired.
    const ids: string[] = [];
    let acquiredAt: number | undefined;
    void acquired.then(() => (acquiredAt = ids.length));
    for (let i = 0; i < 200; i++) ids.push(...(await writeDocs(container, 1, 'after-subscribe-', i)));
    await untilSeen(seen, ids.slice(acquiredAt ?? ids.length));
    const partitions = await new CosmosSource(container).listPartitions();
    const byRange = new Map<string, string[]>();
    for (const [i, id] of ids.entries()) {
      const epk = effectivePartitionKey([`k${i}`], { paths: ['/pk'], version: 2 });
      const range = partitions.find((p) => p.range.minInclusive <= epk && epk < p.range.maxExclusive)!.id;
      byRange.set(range, [...(byRange.get(range) ?? []), id]);
    }
    for (const written of byRange.values()) {
      const first = written.findIndex((id) => seen.has(id));
      expect(first === -1 ? [] : written.slice(first).filter((id) => !seen.has(id))).toEqual([]);
    }
    expect(acquiredAt).toBeDefined();
    expect(ids.slice(acquiredAt).filter((id) => !seen.has(id))).toEqual([]);
  });
});

/*
 * "Now" by the service's clock, never the host's: the bootstrap used to pin LatestVersion leases at this
 * host's time. A host 30 s ahead of the service pinned them in the future (what was written before the pin
 * was skipped); one 30 s behind pinned them in the past (what was written before it started came along).
 * The emulator's clock stands for the service's here, set apart from this host's.
 */
describe("startFrom: 'now' with this host's clock off the service's (LatestVersion, four ranges)", () => {
  let emulator: CosmosEmulator;
  let client: CosmosClient;
  /** How far the service's clock is from this host's, in ms. */
  let serviceOffsetMs = 0;
  /** The service's clock: this host's, off by `serviceOffsetMs`, unless a test stops it. */
  let serviceClock = () => Date.now() + serviceOffsetMs;

  beforeAll(async () => {
    emulator = await CosmosEmulator.start({ initialRangeCount: 4, now: () => serviceClock(), onWarning: () => {} });
    client = new CosmosClient({
      endpoint: emulator.endpoint,
      key: emulator.key,
      connectionPolicy: { requestTimeout: 5_000, retryOptions: { maxRetryAttemptCount: 3, fixedRetryIntervalInMilliseconds: 0, maxWaitTimeInSeconds: 5 } },
    });
  });
  afterAll(async () => {
    client.dispose();
    await emulator.stop();
  });

  async function start(container: Container, seen: Set<string>) {
    const feed = createChangeFeed<Doc>({
      source: new CosmosSource<Doc>(container),
      leases: new CosmosLeaseStore({ container: client.database('db').container('skew-leases'), createIfMissing: true }),
      instanceName: 'host-1',
      leasePrefix: `skew.${container.id}.`,
      startFrom: 'now',
      pollIntervalMs: 50,
      leaseAcquireIntervalMs: 200,
    });
    const sub = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((b) => b.changes.forEach((c) => seen.add(c.id)));
    running = { feed, sub };
  }

  it('the service tells its time: CosmosSource.currentTime is the Date header of its answer, by its clock', async () => {
    const container = await freshContainer(client, 'skew-time');
    serviceClock = () => Date.parse('2031-05-06T07:08:09.456Z');
    try {
      // To the second, as an HTTP date says it.
      expect(await new CosmosSource(container).currentTime()).toEqual(new Date('2031-05-06T07:08:09.000Z'));
    } finally {
      serviceClock = () => Date.now() + serviceOffsetMs;
    }
  });

  it('host 30 s ahead: delivers all 200 documents written right after subscribing', async () => {
    serviceOffsetMs = -30_000;
    const container = await freshContainer(client, 'skew-ahead');
    const seen = new Set<string>();
    await start(container, seen);
    const ids = await writeDocs(container, 200, 'after-subscribe-');
    await untilSeen(seen, ids);
    expect(ids.filter((id) => !seen.has(id))).toEqual([]);
  });

  it('host 30 s behind: delivers nothing written seconds before it started, and everything after', async () => {
    serviceOffsetMs = 30_000;
    const container = await freshContainer(client, 'skew-behind');
    const before = await writeDocs(container, 20, 'before-');
    serviceOffsetMs += 2_000; // two seconds pass on the service between those writes and the start
    const seen = new Set<string>();
    await start(container, seen);
    const after = await writeDocs(container, 20, 'after-');
    await untilSeen(seen, after);
    expect(after.filter((id) => !seen.has(id))).toEqual([]);
    expect(before.filter((id) => seen.has(id))).toEqual([]);
  });
});
