/** `startFrom: 'now'` means the moment the processor started (issue 25, item 1), on MemorySource. */
import { describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import type { FeedMode, StartFrom } from '../../src/core/Partition.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { idsOf } from '../support/memory.js';
import { withFakeTimers } from '../support/fakeTimers.js';
import { FaultEnv, faultyLeaseStore } from '../support/faults/index.js';
import { asyncScheduler } from 'rxjs';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';

interface Doc {
  id: string;
}

const subscriptions = withFakeTimers();

function write(source: MemorySource<Doc>, prefix: string, count: number): string[] {
  const ids = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  for (const id of ids) source.write({ id });
  return ids;
}

function start(source: MemorySource<Doc>, leases: LeaseStore, startFrom: StartFrom | (() => StartFrom), instanceName = 'a') {
  const events: FeedEvent[] = [];
  const seen: ChangeBatch<Doc>[] = [];
  const feed = createChangeFeed<Doc>({
    source,
    leases,
    instanceName,
    leasePrefix: 'now.',
    startFrom,
    pollIntervalMs: 50,
    leaseAcquireIntervalMs: 100,
    events: (e) => events.push(e),
  });
  subscriptions.push(feed.changes$.pipe(checkpointEvery({ count: 1, ms: 10 })).subscribe((b) => seen.push(b)));
  return { feed, events, seen };
}

describe.each(['latestVersion', 'allVersionsAndDeletes'] as const)("startFrom: 'now' (%s)", (mode: FeedMode) => {
  it('delivers every change written right after subscribing and right after the first leaseAcquired event, and none before', async () => {
    const source = new MemorySource<Doc>({ partitions: 4, mode });
    const before = write(source, 'before-', 50);
    await vi.advanceTimersByTimeAsync(1);
    const { events, seen } = start(source, new MemoryLeaseStore(), 'now');
    const afterSubscribe = write(source, 'after-subscribe-', 200);
    while (!events.some((e) => e.type === 'leaseAcquired')) await vi.advanceTimersByTimeAsync(1);
    const afterAcquired = write(source, 'after-acquired-', 200);
    await vi.advanceTimersByTimeAsync(2_000);
    const delivered = new Set(idsOf(seen));
    expect([...afterSubscribe, ...afterAcquired].filter((id) => !delivered.has(id))).toEqual([]);
    expect(before.filter((id) => delivered.has(id))).toEqual([]);
  });

  it('a host that takes over a lease nobody read yet starts where the first host pinned it, not at its own "now"', async () => {
    const source = new MemorySource<Doc>({ partitions: 2, mode });
    const leases = new MemoryLeaseStore();
    const first = start(source, leases, () => 'now');
    await vi.advanceTimersByTimeAsync(1);
    await first.feed.stop();
    const whileNobodyReads = write(source, 'gap-', 50);
    const second = start(source, leases, 'now', 'b');
    await vi.advanceTimersByTimeAsync(2_000);
    const delivered = new Set(idsOf(second.seen));
    expect(whileNobodyReads.filter((id) => !delivered.has(id))).toEqual([]);
  });

  // Found by the simulation's SDK mode: `npm run sim -- --seed 22 --faults lease,source,view,host,sink,hang
  // --hosts 2-4 --chaos-ms 10000 --source sdk` (21 changes never delivered).
  it("a bootstrap that finds a split parent's lease left by an unfinished bootstrap leaves the children to it, so they start at its checkpoint, not at this host's 'now'", async () => {
    const source = new MemorySource<Doc>({ partitions: 1, mode });
    const leases = new MemoryLeaseStore();
    // The first host's bootstrap creates its lease, but the write marking the bootstrap done (`.info`) fails.
    const env = new FaultEnv({ scheduler: asyncScheduler });
    const first = start(source, faultyLeaseStore(leases, { createIfAbsent: [{ kind: 'transient', count: 1, key: 'now..info' }] }, env), 'now');
    await vi.advanceTimersByTimeAsync(1);
    await first.feed.stop();
    expect(await leases.read('now..info')).toBeUndefined();
    expect((await leases.read('now.0'))?.continuation).not.toBeNull();
    const beforeSplit = write(source, 'before-split-', 30);
    source.split('0');
    const afterSplit = write(source, 'after-split-', 30);
    await vi.advanceTimersByTimeAsync(1);
    // The next host bootstraps again (no `.info`) over the children.
    const second = start(source, leases, 'now', 'b');
    await vi.advanceTimersByTimeAsync(3_000);
    const delivered = new Set(idsOf(second.seen));
    expect([...beforeSplit, ...afterSplit].filter((id) => !delivered.has(id))).toEqual([]);
  });
});
