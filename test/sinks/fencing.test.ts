import { describe, expect, it, vi } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { createChangeFeed } from '../../src/feed/index.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import type { ViewMode, ViewStore, ViewWrite, ViewWriteResult } from '../../src/sinks/ViewStore.js';
import { alignLeasesWithView } from '../../src/sinks/alignLeasesWithView.js';
import { materializeToView } from '../../src/sinks/materializeToView.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { CrashableLeaseStore, advanceUntil } from '../support/memory.js';
import { withFakeTimers } from '../support/fakeTimers.js';

/*
 * Fencing and exactly-once through a running processor (MemorySource, MemoryLeaseStore, fake time): what a
 * sink does with the batches of an ownership that ended, and what a split does to the exactly-once mark.
 */

interface Doc {
  readonly id: string;
  readonly n: number;
  readonly group?: string;
  readonly from?: string;
}
type Row = { n: number; from?: string };

const PREFIX = 'f.';
const timings = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000 };

/** One host's connection to a shared view: while held, its writes (those of `partition`, if given) wait (a slow transaction). */
function heldView(inner: MemoryViewStore<Row>) {
  let gate: { promise: Promise<void>; open: () => void; partition: string | undefined } | undefined;
  const view: ViewStore<Row> = {
    description: 'held view',
    async write(write: ViewWrite<Row>): Promise<ViewWriteResult> {
      if (gate && (gate.partition === undefined || write.partitions.some((p) => p.partition === gate!.partition))) await gate.promise;
      return inner.write(write);
    },
    get: (key) => inner.get(key),
    rows: () => inner.rows(),
    positions: () => inner.positions(),
    pruneTombstones: (before) => inner.pruneTombstones(before),
    clearPositions: () => inner.clearPositions(),
    close: async () => undefined,
  };
  return {
    view,
    hold(partition?: string) {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = { promise, open, partition };
    },
    open() {
      gate?.open();
      gate = undefined;
    },
  };
}

describe('fencing through a running processor', () => {
  const subscriptions = withFakeTimers();

  function host(
    source: MemorySource<Doc>,
    leases: LeaseStore,
    view: ViewStore<Row>,
    name: string,
    { mode = 'guarded', ...options }: { maxInFlightChanges?: number; drainTimeoutMs?: number; mode?: ViewMode } = {},
  ) {
    const events: FeedEvent[] = [];
    const feed = createChangeFeed<Doc>({
      source,
      leases,
      instanceName: name,
      leasePrefix: PREFIX,
      maxItemCount: 10,
      ...timings,
      ...options,
      events: (e) => events.push(e),
    });
    subscriptions.push(
      feed.changes$.pipe(materializeToView(view, { project: (c) => ({ n: c.document!.n }), mode }), checkpointEvery({ count: 1, ms: 10 })).subscribe(),
    );
    return { feed, events };
  }

  it('a batch dropped by a fenced view write returns its credit, and the host reads again once it owns the lease again', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const shared = new MemoryLeaseStore();
    const view = new MemoryViewStore<Row>();
    const pathA = new CrashableLeaseStore(shared);
    const a = heldView(view);
    // A's whole budget is one page: a leaked batch would stop it for good.
    const hostA = host(source, pathA, a.view, 'A', { maxInFlightChanges: 10 });
    await vi.advanceTimersByTimeAsync(500);

    const checkpointsBefore = hostA.events.filter((e) => e.type === 'checkpoint').length;
    a.hold(); // A's next view write hangs ...
    for (let i = 0; i < 10; i++) source.upsert({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(100);
    expect(hostA.feed.inFlightChanges).toBe(10);

    pathA.cut = true; // ... while A cannot renew: its lease expires and B takes it (epoch 2) and writes.
    const hostB = host(source, shared, view, 'B');
    await advanceUntil(() => hostB.events.some((e) => e.type === 'checkpoint'));
    expect((await view.positions()).get('0')?.epoch).toBe(2);

    a.open(); // A's write now arrives at epoch 1: fenced, its batch dropped.
    pathA.cut = false;
    const fenced = () => hostA.events.some((e) => e.type === 'error' && e.error.name === 'ViewFencedError');
    await advanceUntil(() => fenced() && hostA.events.some((e) => e.type === 'leaseLost'));
    expect(hostA.feed.inFlightChanges).toBe(0);
    expect(hostA.events.filter((e) => e.type === 'checkpoint').length).toBe(checkpointsBefore);

    // B leaves cleanly; A owns the partition again and, with its credit back, reads what is written next.
    let stopped = false;
    void hostB.feed.stop().then(() => (stopped = true));
    await advanceUntil(() => stopped);
    await advanceUntil(() => hostA.events.filter((e) => e.type === 'leaseAcquired').length === 2);
    source.upsert({ id: 'after', n: 42 });
    const checkpoints = hostA.events.filter((e) => e.type === 'checkpoint').length;
    await advanceUntil(() => hostA.events.filter((e) => e.type === 'checkpoint').length > checkpoints, { limitMs: 30_000 });
    expect((await view.get('after'))?.row).toEqual({ n: 42 });
    expect(hostA.events.filter((e) => e.type === 'stall')).toEqual([]);
  });

  for (const mode of ['guarded', 'exactlyOnce'] as const) {
    it(`${mode}: a split parent's view write that lands after its child wrote is refused, and the row stays the child's`, async () => {
      const source = new MemorySource<Doc>({ partitions: 1 });
      const view = new MemoryViewStore<Row>();
      const a = heldView(view);
      const hostA = host(source, new MemoryLeaseStore(), a.view, 'A', { mode, drainTimeoutMs: 500 });
      await vi.advanceTimersByTimeAsync(500);
      a.hold('0'); // the parent's next write hangs (a slow transaction) ...
      source.upsert({ id: 'x', n: 1 });
      await vi.advanceTimersByTimeAsync(200);
      // ... while the parent splits: its drain times out, A takes the children and one of them writes x = 2.
      source.split('0');
      source.upsert({ id: 'x', n: 2 });
      await advanceUntil(() => hostA.events.some((e) => e.type === 'partitionSplit'));
      await vi.advanceTimersByTimeAsync(5_000);
      expect((await view.get('x'))?.row).toEqual({ n: 2 });
      a.open(); // the parent's write (partition 0, its lower epoch) finally arrives: refused over its range
      await advanceUntil(() => hostA.events.some((e) => e.type === 'error' && e.error.name === 'ViewFencedError'));
      await vi.advanceTimersByTimeAsync(1_000);
      expect((await view.get('x'))?.row).toEqual({ n: 2 });
      expect(hostA.feed.inFlightChanges).toBe(0);
    });

    it(`${mode}: a paused owner's write of the parent, landing after another host's children wrote, is refused`, async () => {
      const source = new MemorySource<Doc>({ partitions: 1 });
      const shared = new MemoryLeaseStore();
      const view = new MemoryViewStore<Row>();
      const pathA = new CrashableLeaseStore(shared);
      const a = heldView(view);
      const hostA = host(source, pathA, a.view, 'A', { mode });
      await vi.advanceTimersByTimeAsync(500);
      a.hold(); // A stops making progress (a long pause) with a write of x = 1 in flight ...
      source.upsert({ id: 'x', n: 1 });
      await vi.advanceTimersByTimeAsync(100);
      pathA.cut = true; // ... and renews nothing: its lease expires.
      source.split('0');
      source.upsert({ id: 'x', n: 2 });
      // B takes the parent over, hands it to its children, and a child writes x = 2 (x = 1 replayed before it).
      const hostB = host(source, shared, view, 'B', { mode });
      await advanceUntil(() => hostB.events.some((e) => e.type === 'partitionSplit'));
      await advanceUntil(() => hostB.events.filter((e) => e.type === 'checkpoint').length > 0);
      await vi.advanceTimersByTimeAsync(2_000);
      expect((await view.get('x'))?.row).toEqual({ n: 2 });
      a.open(); // A wakes up: its write of the parent lands last, and is refused.
      pathA.cut = false;
      await advanceUntil(() => hostA.events.some((e) => e.type === 'error' && e.error.name === 'ViewFencedError'));
      await vi.advanceTimersByTimeAsync(1_000);
      expect((await view.get('x'))?.row).toEqual({ n: 2 });
      expect(hostA.feed.inFlightChanges).toBe(0);
    });
  }

  for (const aligned of [false, true]) {
    it(`exactly-once rows fed by two partitions survive a crash and a split${aligned ? ' (leases aligned with the view)' : ''}`, async () => {
      // P and Q both feed rows g0..g4 (key = group); the newest change of every row comes from Q.
      const source = new MemorySource<Doc>({ partitions: 2, mode: 'allVersionsAndDeletes' });
      const [P, Q] = source.partitions().map((p) => p.id) as [string, string];
      const keysIn = (partition: string, count: number) => {
        const keys: string[] = [];
        for (let i = 0; keys.length < count; i++) if (source.partitionFor(`k${i}`) === partition) keys.push(`k${i}`);
        return keys;
      };
      const view = new MemoryViewStore<Row>();
      const base = new MemoryLeaseStore();
      const crashable = new CrashableLeaseStore(base);
      /** Changes the view applied (written or deleted rows), per write. */
      const applied: number[] = [];
      const run = (leases: LeaseStore, name: string, checkpoint: { count: number; ms: number }) => {
        const feed = createChangeFeed<Doc>({ source, leases, instanceName: name, leasePrefix: PREFIX, maxItemCount: 4, ...timings });
        const sub = feed.changes$
          .pipe(
            materializeToView(view, { project: (c) => ({ n: c.document!.n, from: c.document!.from }), key: (c) => c.document?.group ?? c.id, mode: 'exactlyOnce' }),
            checkpointEvery(checkpoint),
          )
          .subscribe();
        subscriptions.push(sub);
        return sub;
      };
      const write = view.write.bind(view);
      view.write = async (w) => {
        const result = await write(w);
        applied.push(result.written + result.deleted);
        return result;
      };

      // Host A pins the start positions, then never checkpoints again (its leases lag behind the view).
      const first = run(crashable, 'A', { count: 1_000_000, ms: 3_600_000 });
      await vi.advanceTimersByTimeAsync(500);
      const pKeys = keysIn(P, 15);
      let n = 0;
      for (let round = 0; round < 3; round++) for (let g = 0; g < 5; g++) source.upsert({ id: pKeys[round * 5 + g]!, n: ++n, group: `g${g}`, from: 'P' });
      await vi.advanceTimersByTimeAsync(1_000);
      const qKeys = keysIn(Q, 5);
      for (let g = 0; g < 5; g++) source.upsert({ id: qKeys[g]!, n: ++n, group: `g${g}`, from: 'Q' });
      await vi.advanceTimersByTimeAsync(1_000);
      const before = Object.fromEntries((await view.rows()).map((r) => [r.key, r.row.from]));
      expect(before).toEqual({ g0: 'Q', g1: 'Q', g2: 'Q', g3: 'Q', g4: 'Q' });
      const writesBefore = applied.length;

      // A crashes; P splits; B hands P over to its children from P's (old) lease checkpoint.
      crashable.crash();
      first.unsubscribe();
      const [left] = source.split(P);
      if (aligned) await alignLeasesWithView(view, base, { prefix: PREFIX });
      run(base, 'B', { count: 5, ms: 200 });
      await vi.advanceTimersByTimeAsync(5_000);

      const after = Object.fromEntries((await view.rows()).map((r) => [r.key, r.row.from]));
      expect(after).toEqual(before);
      // Unaligned, the children and Q replay from old checkpoints (aligned, from the view's positions), and
      // apply nothing again.
      if (!aligned) expect(applied.length).toBeGreaterThan(writesBefore);
      expect(applied.slice(writesBefore).reduce((a, b) => a + b, 0)).toBe(0);
      // New changes in the children's ranges still arrive.
      const late = keysIn(left.id, 1)[0]!;
      source.upsert({ id: late, n: ++n, group: 'g0', from: 'child' });
      await vi.advanceTimersByTimeAsync(2_000);
      expect((await view.get('g0'))?.row.from).toBe('child');
    });
  }
});
