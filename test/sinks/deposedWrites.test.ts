/**
 * A view write whose leases all ended while it was in flight (lost, stolen, handed over) gives its slot back at
 * once: batches of live leases do not wait behind it, its own batches are dropped (credit returned), a store
 * that can cancel it does so through the write's signal, and one that cannot lets it land late or be fenced.
 * At most `concurrency` such writes are left running at once. Fake time, a fault-injecting view store.
 */
import { asyncScheduler, Subject } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { ChangeBatch, type BatchOrBatches } from '../../src/core/ChangeBatch.js';
import type { PartitionTracker } from '../../src/core/PartitionTracker.js';
import { ViewFencedError } from '../../src/errors/ViewFencedError.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import type { ViewStore } from '../../src/sinks/ViewStore.js';
import { allAborted, DetachedWrites } from '../../src/sinks/internal/detachedWrites.js';
import { materializeToView } from '../../src/sinks/materializeToView.js';
import { FaultEnv, faultyViewStore, type ViewFaultPlan } from '../support/faults/index.js';
import { fakeTracker } from '../support/fakeTracker.js';

interface Doc {
  readonly id: string;
  readonly n: number;
}
type Row = { n: number };

let lsn = 0;
const upsert = (id: string, n: number): Change<Doc> => ({ id, operation: 'upsert', document: { id, n }, lsn: ++lsn, timestampMs: 1_700_000_000_000 + lsn });
const batch = (partition: string, owner: PartitionTracker, epoch: number, changes: Change<Doc>[], sequence = 1) =>
  new ChangeBatch<Doc>({ partition, changes, position: `${partition}@${changes.at(-1)!.lsn}`, epoch, origin: { tracker: owner, sequence, readCount: changes.length } });

/** Writes of `slow` partitions take 10 s (once each); `cancels`: the store honours the write's signal. */
function setup(slow: readonly string[], { concurrency = 1, cancels = true }: { concurrency?: number; cancels?: boolean } = {}) {
  const rows = new MemoryViewStore<Row>();
  const env = new FaultEnv({ seed: 1, scheduler: asyncScheduler });
  const plan: ViewFaultPlan = { write: slow.map((key) => ({ kind: 'slow', count: 1, ms: 10_000, key })) };
  const faulty = faultyViewStore(rows, plan, env);
  // A store that cannot cancel a write in flight: the signal never reaches it.
  const view: ViewStore<Row> = cancels ? faulty : { ...faulty, description: faulty.description, write: (w) => faulty.write(w) };
  const input = new Subject<BatchOrBatches<Doc>>();
  const emitted: string[] = [];
  const errors: unknown[] = [];
  input.pipe(materializeToView(view, { project: (c) => ({ n: c.document!.n }), concurrency })).subscribe({
    next: (value) => emitted.push(...(value instanceof ChangeBatch ? [value] : value).map((b) => `${b.partition}@${b.epoch}`)),
    error: (e: unknown) => errors.push(e),
  });
  return { rows, input, emitted, errors };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a view write of leases that ended while it was in flight', () => {
  it('gives its slot back at once: a live lease queued behind it is written, and the store cancels it through its signal', async () => {
    const { rows, input, emitted, errors } = setup(['lost']);
    const lost = fakeTracker('lost');
    const live = fakeTracker('live');
    input.next(batch('lost', lost, 1, [upsert('a', 1)], 4));
    input.next(batch('live', live, 1, [upsert('b', 1)]));
    await vi.advanceTimersByTimeAsync(100);
    expect(emitted).toEqual([]); // one slot, held by the slow write of a lease still owned
    lost.end();
    await vi.advanceTimersByTimeAsync(0);
    expect(emitted).toEqual(['live@1']); // no fake time passed: it did not wait for the slow write
    expect(lost.drop.mock.calls).toEqual([[4, undefined]]); // its credit is returned, never checkpointed
    await vi.advanceTimersByTimeAsync(20_000);
    expect((await rows.rows()).map((r) => r.key)).toEqual(['b']); // cancelled: nothing of it was written
    expect(emitted).toEqual(['live@1']);
    expect(lost.reportError).not.toHaveBeenCalled();
    expect(errors).toEqual([]);
  });

  it('lets a write the store cannot cancel finish in the background, refused by the fence once the next owner wrote', async () => {
    const { rows, input, emitted, errors } = setup(['p'], { cancels: false });
    const old = fakeTracker('p');
    input.next(batch('p', old, 1, [upsert('x', 1)], 9));
    await vi.advanceTimersByTimeAsync(100);
    old.end(); // lost; this host takes the lease again at epoch 2 and reads x again, then x = 2
    const again = fakeTracker('p');
    input.next(batch('p', again, 2, [upsert('x', 2)]));
    await vi.advanceTimersByTimeAsync(0);
    expect(emitted).toEqual(['p@2']); // the new ownership's batch did not wait for the old one's write
    expect((await rows.get('x'))?.row).toEqual({ n: 2 });
    await vi.advanceTimersByTimeAsync(20_000); // the old write arrives: refused, the row stays the new owner's
    expect((await rows.get('x'))?.row).toEqual({ n: 2 });
    expect((await rows.positions()).get('p')?.epoch).toBe(2);
    expect(old.drop.mock.calls).toEqual([[9, undefined]]);
    expect(old.reportError.mock.calls.map(([e]) => e)).toEqual([expect.any(ViewFencedError)]);
    expect(emitted).toEqual(['p@2']);
    expect(errors).toEqual([]);
  });

  it('keeps at most `concurrency` such writes running: past that, a deposed write holds its slot until one lands', async () => {
    const { input, emitted } = setup(['x', 'y'], { cancels: false });
    const x = fakeTracker('x');
    const y = fakeTracker('y');
    input.next(batch('x', x, 1, [upsert('x1', 1)]));
    await vi.advanceTimersByTimeAsync(1_000);
    x.end(); // detached: one of one
    await vi.advanceTimersByTimeAsync(0);
    input.next(batch('y', y, 1, [upsert('y1', 1)])); // takes the slot at 1 s; its write lands at 11 s
    await vi.advanceTimersByTimeAsync(1_000);
    y.end(); // lost too, but the one place among the detached is taken: it keeps its slot
    input.next(batch('z', fakeTracker('z'), 1, [upsert('z1', 1)]));
    await vi.advanceTimersByTimeAsync(7_900); // 9.9 s: x's write is still on its way
    expect(emitted).toEqual([]);
    await vi.advanceTimersByTimeAsync(100); // x's write landed at 10 s: y takes its place, z its slot
    expect(emitted).toEqual(['z@1']);
    expect(x.drop).toHaveBeenCalledTimes(1);
    expect(y.drop).toHaveBeenCalledTimes(1);
  });

  it('keeps waiting for a write that also carries a lease still owned', async () => {
    const { input, emitted } = setup(['gone,kept']);
    const gone = fakeTracker('gone');
    const kept = fakeTracker('kept');
    input.next([batch('gone', gone, 1, [upsert('g', 1)]), batch('kept', kept, 1, [upsert('k', 1)])]);
    await vi.advanceTimersByTimeAsync(100);
    gone.end();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(emitted).toEqual([]); // the live lease's own write: its batches reach the checkpoint only once it lands
    await vi.advanceTimersByTimeAsync(5_000);
    expect(emitted).toEqual(['gone@1', 'kept@1']);
  });
});

describe('allAborted', () => {
  it('aborts once every signal did, and stops listening when disposed', () => {
    const a = new AbortController();
    const b = new AbortController();
    const all = allAborted([a.signal, b.signal, a.signal]);
    a.abort();
    expect(all.signal.aborted).toBe(false);
    b.abort('why');
    expect(all.signal.aborted).toBe(true);
    expect(all.signal.reason).toBe('why');
    expect(allAborted([]).signal.aborted).toBe(false);
    const c = new AbortController();
    const disposed = allAborted([c.signal]);
    disposed.dispose();
    c.abort();
    expect(disposed.signal.aborted).toBe(false);
  });
});

describe('DetachedWrites', () => {
  it('counts detached writes until they settle, and hands a freed place to the first deposed write waiting', async () => {
    const detached = new DetachedWrites(1);
    let land1!: () => void;
    let fail2!: (e: Error) => void;
    const first = new Promise<string>((resolve) => (land1 = () => resolve('one')));
    const second = new Promise<string>((_, reject) => (fail2 = reject));
    const deposed = new AbortController();
    const outcomes: unknown[] = [];
    const w1 = detached.wait(first, deposed.signal, (o) => outcomes.push(o));
    const w2 = detached.wait(second, deposed.signal, (o) => outcomes.push(o));
    deposed.abort();
    expect(await w1).toBeUndefined();
    expect(detached.count).toBe(1);
    let w2Done = false;
    void w2.then(() => (w2Done = true));
    await Promise.resolve();
    expect(w2Done).toBe(false); // the limit is reached: it keeps waiting
    land1();
    expect(await w2).toBeUndefined();
    expect(detached.count).toBe(1);
    fail2(new Error('boom'));
    await vi.advanceTimersByTimeAsync(0);
    expect(detached.count).toBe(0);
    expect(outcomes).toEqual([{ ok: true }, { ok: false, error: new Error('boom') }]);
    // A write that settles before its leases end is simply waited for.
    await expect(detached.wait(Promise.resolve(7), new AbortController().signal)).resolves.toEqual({ value: 7 });
    await expect(detached.wait(Promise.reject(new Error('no')), new AbortController().signal)).rejects.toThrow('no');
  });
});
