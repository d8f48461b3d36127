/** `stop()` fits a Kubernetes grace period (30 s) when batches were dropped (issue 26, item 7). */
import { filter } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { createChangeFeed } from '../../src/feed/index.js';
import type { ChangeFeedOptions } from '../../src/feed/options.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { withFakeTimers } from '../support/fakeTimers.js';

interface Doc {
  id: string;
}

const GRACE_MS = 30_000;
const subscriptions = withFakeTimers();

/** A processor over two partitions whose pipeline drops every batch of the partition holding `d0`. */
function droppingOne(options: Partial<ChangeFeedOptions<Doc>> = {}) {
  const source = new MemorySource<Doc>({ partitions: 2 });
  const leases = new MemoryLeaseStore();
  const events: FeedEvent[] = [];
  const dropped = source.partitionFor('d0');
  const feed = createChangeFeed<Doc>({
    source,
    leases,
    instanceName: 'a',
    leasePrefix: 'grace.',
    pollIntervalMs: 100,
    leaseAcquireIntervalMs: 100,
    events: (e) => events.push(e),
    ...options,
  });
  subscriptions.push(
    feed.changes$
      .pipe(
        filter((b) => b.partition !== dropped), // the mistake: a plain filter on batches
        checkpointEvery({ count: 1, ms: 100 }),
      )
      .subscribe(),
  );
  return { source, leases, events, feed, dropped };
}

/** Virtual time (ms) `stop()` takes to resolve. */
async function timeToStop(stop: () => Promise<void>): Promise<number> {
  let done = false;
  const stopping = stop().then(() => (done = true));
  const started = Date.now();
  while (!done && Date.now() - started < 120_000) await vi.advanceTimersByTimeAsync(100);
  await stopping;
  return Date.now() - started;
}

describe('stop() with dropped batches', () => {
  it('by default, waits at most 10 s for a batch dropped just before, says which partition and how much is left, and releases every lease well within 30 s', async () => {
    const { source, leases, events, feed, dropped } = droppingOne();
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}` });
    await vi.advanceTimersByTimeAsync(1_000);
    const tookMs = await timeToStop(() => feed.stop());
    expect(tookMs).toBeLessThanOrEqual(10_000 + 1_000);
    expect(tookMs).toBeLessThan(GRACE_MS / 2);
    const stall = events.find((e) => e.type === 'stall');
    expect(stall).toMatchObject({ lease: dropped });
    expect(stall!.message).toMatch(new RegExp(`partition ${dropped}: \\d+ batches \\(\\d+ changes\\) did not reach checkpointEvery within drainTimeoutMs \\(10000 ms\\)`));
    const owned = (await leases.list('grace.')).leases.filter((l) => l.feedRange && l.owner !== null);
    expect(owned).toEqual([]);
  });

  it('does not wait at all for a partition already in a reported stall, and says so at once', async () => {
    const { source, events, feed, dropped } = droppingOne({ stallTimeoutMs: 5_000, drainTimeoutMs: 20_000 });
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}` });
    await vi.advanceTimersByTimeAsync(6_000);
    expect(events.filter((e) => e.type === 'stall').map((e) => e.lease)).toEqual([dropped]);
    const tookMs = await timeToStop(() => feed.stop());
    expect(tookMs).toBeLessThan(1_000);
    const notWaited = events.filter((e) => e.type === 'stall').at(-1)!;
    expect(notWaited).toMatchObject({ lease: dropped });
    expect(notWaited.message).toMatch(/batches \(\d+ changes\) did not reach checkpointEvery for \d+ s \(stalled\); not waiting for them/);
  });
});
