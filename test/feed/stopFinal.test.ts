/** While `stop()` runs no run starts (a pipeline's `retry` takes no lease behind it), and it waits for every run (sim seed 380). */
import { retry, throwError, mergeMap, of, timer } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { withFakeTimers } from '../support/fakeTimers.js';

interface Doc {
  id: string;
}

const subscriptions = withFakeTimers();

function processor() {
  const source = new MemorySource<Doc>({ partitions: 2 });
  const leases = new MemoryLeaseStore();
  const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'a', leasePrefix: 'final.', pollIntervalMs: 100, leaseAcquireIntervalMs: 100 });
  const owned = async () => (await leases.list('final.')).leases.filter((l) => l.owner !== null && l.feedRange !== undefined).length;
  return { source, leases, feed, owned };
}

describe('stop() and the runs of a processor', () => {
  it('a subscription while stop() runs completes at once and takes no lease; after it, one starts a fresh run', async () => {
    const { feed, owned } = processor();
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await owned()).toBe(2);
    const stopping = feed.stop();
    let completed = false;
    subscriptions.push(feed.changes$.subscribe({ complete: () => (completed = true) }));
    await Promise.all([stopping, vi.advanceTimersByTimeAsync(5_000)]);
    expect(completed).toBe(true);
    expect(await owned()).toBe(0);
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await owned()).toBe(2);
  });

  it("a pipeline's retry while stop() drains does not start a run behind it: nothing is owned once stop() resolved", async () => {
    const { source, feed, owned } = processor();
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}` });
    let failOnce = true;
    subscriptions.push(
      feed.changes$
        .pipe(
          // A sink that fails once stop() began (as a view write may): the pipeline restarts itself.
          mergeMap((batch) => (failOnce && stopping !== undefined ? ((failOnce = false), throwError(() => new Error('sink failed'))) : of(batch))),
          checkpointEvery(1),
          retry({ delay: () => timer(200) }),
        )
        .subscribe(),
    );
    await vi.advanceTimersByTimeAsync(1_000);
    let stopping: Promise<void> | undefined = feed.stop();
    let resolved = false;
    void stopping.then(() => (resolved = true));
    source.write({ id: 'late' });
    for (let i = 0; i < 100 && !resolved; i++) await vi.advanceTimersByTimeAsync(100);
    expect(resolved).toBe(true);
    expect(await owned()).toBe(0);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await owned()).toBe(0);
    stopping = undefined;
  });
});
