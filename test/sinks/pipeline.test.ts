import { bufferTime } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import type { ViewMode, ViewWrite } from '../../src/sinks/ViewStore.js';
import { alignLeasesWithView } from '../../src/sinks/alignLeasesWithView.js';
import { materializeToView } from '../../src/sinks/materializeToView.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { CrashableLeaseStore, seededRandom } from '../support/memory.js';
import { withFakeTimers } from '../support/fakeTimers.js';

interface Doc {
  readonly id: string;
  readonly n: number;
  readonly hidden?: boolean;
}

const PREFIX = 'v.';
const timings = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000 };

/** A source with a random workload over 60 ids, and the state a correct view must show. */
function workload(seed: number) {
  const random = seededRandom(seed);
  const source = new MemorySource<Doc>({ partitions: 3, mode: 'allVersionsAndDeletes' });
  const expected = new Map<string, number>();
  let n = 0;
  const step = (count: number) => {
    for (let i = 0; i < count; i++) {
      const id = `d${Math.floor(random() * 60)}`;
      const r = random();
      if (expected.has(id) && r < 0.15) {
        source.delete(id);
        expected.delete(id);
      } else if (r < 0.25) {
        source.upsert({ id, n: ++n, hidden: true }); // soft delete
        expected.delete(id);
      } else {
        source.upsert({ id, n: ++n });
        expected.set(id, n);
      }
    }
  };
  return { source, random, step, expected };
}

describe('materializeToView in a running processor (MemorySource, fake time)', () => {
  const subscriptions = withFakeTimers();

  function run(source: MemorySource<Doc>, leases: LeaseStore, view: MemoryViewStore<{ n: number }>, instanceName: string, mode: ViewMode) {
    const feed = createChangeFeed<Doc>({ source, leases, instanceName, leasePrefix: PREFIX, maxItemCount: 7, ...timings });
    const subscription = feed.changes$
      .pipe(
        bufferTime(40, null, 5),
        materializeToView(view, { project: (c) => ({ n: c.document!.n }), isDeleted: (c) => c.document?.hidden === true, mode }),
        // Rarely: a crash leaves most of the view ahead of the lease checkpoints.
        checkpointEvery({ count: 40, ms: 2_000 }),
      )
      .subscribe();
    subscriptions.push(subscription);
    return subscription;
  }

  async function settleInto(view: MemoryViewStore<{ n: number }>, expected: Map<string, number>) {
    const want = Object.fromEntries([...expected].sort(([a], [b]) => (a < b ? -1 : 1)));
    let got: Record<string, number> = {};
    for (let t = 0; t < 60_000; t += 200) {
      await vi.advanceTimersByTimeAsync(200);
      got = Object.fromEntries((await view.rows()).map((r) => [r.key, r.row.n]));
      if (JSON.stringify(got) === JSON.stringify(want)) break;
    }
    expect(got).toEqual(want);
  }

  for (const seed of [1, 2]) {
    it(`guarded: the view equals the source after a split, a crash and a take-over (seed ${seed})`, async () => {
      const { source, step, expected } = workload(seed);
      const view = new MemoryViewStore<{ n: number }>();
      const base = new MemoryLeaseStore();
      const crashable = new CrashableLeaseStore(base);
      step(150);
      const first = run(source, crashable, view, 'host-a', 'guarded');
      for (let t = 0; t < 1_500; t += 50) {
        step(3);
        if (t === 500) source.split(source.partitions()[0]!.id);
        await vi.advanceTimersByTimeAsync(50);
      }
      crashable.crash();
      first.unsubscribe();
      step(40);
      run(source, base, view, 'host-b', 'guarded');
      await settleInto(view, expected);
    });
  }

  it('exactly-once: after a crash, leases aligned with the view resume where the view committed; no change reaches the view twice', async () => {
    const { source, step, expected } = workload(3);
    const view = new MemoryViewStore<{ n: number }>();
    const delivered: string[] = [];
    const write = view.write.bind(view);
    view.write = (w: ViewWrite<{ n: number }>) => {
      delivered.push(...w.changes.map((c) => `${c.key}@${c.lsn}`));
      return write(w);
    };
    const base = new MemoryLeaseStore();
    const crashable = new CrashableLeaseStore(base);
    step(200);
    const first = run(source, crashable, view, 'host-a', 'exactlyOnce');
    for (let t = 0; t < 1_000; t += 50) {
      step(2);
      await vi.advanceTimersByTimeAsync(50);
    }
    crashable.crash();
    first.unsubscribe();
    const before = delivered.length;
    expect(before).toBeGreaterThan(100);

    const moved = await alignLeasesWithView(view, base, { prefix: PREFIX });
    expect(moved.length).toBeGreaterThan(0); // the view was ahead of the lease checkpoints
    step(30);
    run(source, base, view, 'host-b', 'exactlyOnce');
    await settleInto(view, expected);
    expect(delivered.length).toBeGreaterThan(before);
    expect(delivered.filter((d, i) => delivered.indexOf(d) !== i)).toEqual([]);
  });
});
