import { tap } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { ChangeFeedProcessor } from '../../src/feed/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { LEASE_DEFAULTS } from '../../src/leases/createLeaseCoordinator.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { withFakeTimers } from '../support/fakeTimers.js';
import { CountingSource } from '../support/memory.js';

interface Doc {
  id: string;
  n: number;
}

describe('graceful scale-in, end to end (virtual time, default lease timings)', () => {
  const subscriptions = withFakeTimers();

  it('a host of 3 stops while changes flow: survivors read each of its partitions within a tenth of the acquire interval, nothing delivered twice', async () => {
    const memory = new MemorySource<Doc>({ partitions: 12 });
    const leases = new MemoryLeaseStore();
    /** How many times each change was delivered to a sink (over all hosts). */
    const delivered = new Map<string, number>();
    /** Reads per host: partition id → times (virtual ms) it was read by that host. */
    const reads = new Map<string, { partition: string; at: number }[]>();
    const start = (name: string): ChangeFeedProcessor<Doc> => {
      const source = new CountingSource(memory);
      const log: { partition: string; at: number }[] = [];
      reads.set(name, log);
      source.onPage = (_page, request) => log.push({ partition: request.partition.id, at: Date.now() });
      const feed = createChangeFeed<Doc>({ source, leases, leasePrefix: 'test.', instanceName: name, pollIntervalMs: 1_000 });
      subscriptions.push(
        feed.changes$
          .pipe(
            tap((b: ChangeBatch<Doc>) => {
              for (const c of b) delivered.set(c.id, (delivered.get(c.id) ?? 0) + 1);
            }),
            checkpointEvery({ count: 50, ms: 500 }),
          )
          .subscribe(),
      );
      return feed;
    };
    let written = 0;
    const run = async (ms: number) => {
      for (let t = 0; t < ms; t += 100) {
        for (let i = 0; i < 24; i++) memory.write({ id: `d${written}`, n: written++ });
        await vi.advanceTimersByTimeAsync(100);
      }
    };
    const feeds = ['a', 'b', 'c'].map(start);
    const owned = new Map<string, Set<string>>(feeds.map((f) => [f.owner, new Set<string>()]));
    for (const f of feeds) {
      f.events$.subscribe((e) => {
        if (e.type === 'leaseAcquired') owned.get(f.owner)!.add(e.lease);
        if (e.type === 'leaseReleased' || e.type === 'leaseLost') owned.get(f.owner)!.delete(e.lease);
      });
    }
    await run(3 * LEASE_DEFAULTS.leaseExpirationMs);
    expect([...owned.values()].map((s) => s.size)).toEqual([4, 4, 4]);

    const leaving = feeds[2]!;
    const itsPartitions = [...owned.get('c')!];
    const stoppedAt = Date.now();
    let stopped = false;
    void leaving.stop().then(() => (stopped = true));
    await run(2 * LEASE_DEFAULTS.leaseAcquireIntervalMs);
    expect(stopped).toBe(true);

    for (const partition of itsPartitions) {
      const firstBySurvivor = Math.min(
        ...['a', 'b'].flatMap((h) => reads.get(h)!.filter((r) => r.partition === partition && r.at >= stoppedAt).map((r) => r.at)),
      );
      expect(firstBySurvivor - stoppedAt, `partition ${partition}`).toBeLessThanOrEqual(0.1 * LEASE_DEFAULTS.leaseAcquireIntervalMs);
    }
    // Let the survivors catch up, then: every change delivered, none twice (the leaving host drained and
    // checkpointed before it released).
    const total = written;
    for (let t = 0; [...Array(total).keys()].some((n) => !delivered.has(`d${n}`)) && t < 60_000; t += 100) await vi.advanceTimersByTimeAsync(100);
    expect([...Array(total).keys()].filter((n) => !delivered.has(`d${n}`))).toEqual([]);
    expect([...delivered].filter(([, times]) => times > 1)).toEqual([]);
  });
});
