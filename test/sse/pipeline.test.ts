import type { Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { createSseHub } from '../../src/sse/index.js';
import { advanceUntil, lsnOfPosition } from '../support/memory.js';
import { FakeResponse } from './fakeResponse.js';

interface Doc {
  id: string;
  blob: string;
}

describe('hub.broadcast() in a change feed pipeline', () => {
  let subscription: Subscription | undefined;
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => {
    subscription?.unsubscribe();
    vi.useRealTimers();
  });

  it('checkpoints reach the end of every partition while one client stalls; the others get every change once', async () => {
    const source = new MemorySource<Doc>({ partitions: 3 });
    const leases = new MemoryLeaseStore();
    const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'web-1', leasePrefix: 'sse.', pollIntervalMs: 50, maxInFlightChanges: 100 });
    const hub = createSseHub<Doc>({ maxBufferedBytes: 4_096, replayLimit: 50, project: (c) => c.document });
    const readers = [new FakeResponse(), new FakeResponse()];
    const stalled = new FakeResponse();
    stalled.stalled = true;
    for (const res of [...readers, stalled]) hub.connect(res);
    subscription = feed.changes$.pipe(hub.broadcast(), checkpointEvery({ count: 50, ms: 100 })).subscribe();
    // Many more changes than the credit budget: they only all get through if checkpoints keep moving.
    for (let i = 0; i < 1_000; i++) source.write({ id: `d${i}`, blob: 'x'.repeat(100) });
    const checkpointed = async () => {
      const { leases: all } = await leases.list('sse.');
      return all.filter((l) => !l.leaseToken.startsWith('.')).every((l) => lsnOfPosition(l.continuation) === source.latestLsn(l.leaseToken));
    };
    let done = false;
    await advanceUntil(() => done || (void checkpointed().then((ok) => (done = ok)), false), { stepMs: 50 });
    for (const res of readers) {
      const ids = res.changes().map((c) => c.id);
      expect(ids).toHaveLength(1_000);
      expect(new Set(ids).size).toBe(1_000);
    }
    expect(stalled.ended).toBe(true);
    expect(stalled.unsent).toBeLessThan(4_096 + 1_024);
    expect(hub.stats()).toMatchObject({ clients: 2, head: 1_000, replayable: 50, dropped: { 'slow-client': 1 } });
    hub.close();
  });
});
