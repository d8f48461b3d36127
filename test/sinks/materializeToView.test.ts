import { Subject, lastValueFrom, of, toArray } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { BatchOrBatches } from '../../src/core/ChangeBatch.js';
import type { FeedRange } from '../../src/core/Partition.js';
import type { PartitionTracker } from '../../src/core/PartitionTracker.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { HandlerError, InvalidOptionsError, SinkError } from '../../src/errors/index.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import { ViewFencedError } from '../../src/errors/ViewFencedError.js';
import type { ViewStore, ViewWrite, ViewWriteResult } from '../../src/sinks/ViewStore.js';
import { materializeToView } from '../../src/sinks/materializeToView.js';
import { syncToIndex } from '../../src/sinks/syncToIndex.js';
import type { SearchDocument } from '../../src/sinks/SearchIndex.js';
import { fakeTracker } from '../support/fakeTracker.js';

interface Order {
  readonly id: string;
  readonly customer: string;
  readonly total: number;
  readonly status?: string;
}

let lsn = 0;
const upsert = (id: string, total: number, extra: Partial<Order> = {}): Change<Order> => ({
  id,
  operation: 'upsert',
  document: { id, customer: `c-${id}`, total, ...extra },
  lsn: ++lsn,
  timestampMs: 1_700_000_000_000 + lsn,
});
const remove = (id: string, extra: Partial<Change<Order>> = {}): Change<Order> => ({
  id,
  operation: 'delete',
  document: undefined,
  lsn: ++lsn,
  timestampMs: 1_700_000_000_000 + lsn,
  ...extra,
});

const batch = (
  partition: string,
  changes: Change<Order>[],
  options: { epoch?: number; tracker?: PartitionTracker; sequence?: number; range?: FeedRange } = {},
) =>
  new ChangeBatch<Order>({
    partition,
    changes,
    position: `${partition}@${changes.at(-1)?.lsn ?? 'empty'}`,
    epoch: options.epoch ?? 1,
    range: options.range,
    origin: options.tracker && { tracker: options.tracker, sequence: options.sequence ?? 1, readCount: changes.length },
  });

const project = (c: Change<Order>) => ({ customer: c.document!.customer, total: c.document!.total });
type Row = ReturnType<typeof project>;

/** A store whose writes wait until the test lets them go, recording what ran when. */
class GatedStore<R> implements ViewStore<R> {
  readonly description = 'gated';
  readonly inner = new MemoryViewStore<R>();
  readonly started: ViewWrite<R>[] = [];
  readonly log: string[] = [];
  readonly #gates: (() => void)[] = [];
  inFlight = 0;
  maxInFlight = 0;

  async write(write: ViewWrite<R>): Promise<ViewWriteResult> {
    this.started.push(write);
    const name = write.partitions.map((p) => p.position).join('+');
    this.log.push(`start ${name}`);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
    this.inFlight--;
    const result = await this.inner.write(write);
    this.log.push(`commit ${name}`);
    return result;
  }
  /** Lets the oldest waiting write (or the one at `index`) commit. */
  release(index = 0): void {
    const [gate] = this.#gates.splice(index, 1);
    gate?.();
  }
  get waiting(): number {
    return this.#gates.length;
  }
  get = (key: string) => this.inner.get(key);
  rows = () => this.inner.rows();
  positions = () => this.inner.positions();
  pruneTombstones = (t: number) => this.inner.pruneTombstones(t);
  clearPositions = () => this.inner.clearPositions();
  close = () => this.inner.close();
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('materializeToView', () => {
  it('writes each change as a row and re-emits the same batches after the write', async () => {
    const view = new MemoryViewStore<Row>();
    const b1 = batch('p0', [upsert('o1', 10), upsert('o2', 20)]);
    const b2 = batch('p1', [upsert('o3', 30)]);
    const out = await lastValueFrom(of(b1, b2).pipe(materializeToView(view, { project }), toArray()));
    expect(out).toEqual([b1, b2]);
    expect(out[0]).toBe(b1);
    expect((await view.rows()).map((r) => [r.key, r.row.total, r.partition])).toEqual([
      ['o1', 10, 'p0'],
      ['o2', 20, 'p0'],
      ['o3', 30, 'p1'],
    ]);
    expect(await view.positions()).toEqual(
      new Map([
        ['p0', { position: b1.position, epoch: 1, lsn: b1.lastLsn }],
        ['p1', { position: b2.position, epoch: 1, lsn: b2.lastLsn }],
      ]),
    );
  });

  it('emits a batch only once its write committed', async () => {
    const view = new GatedStore<Row>();
    const input = new Subject<ChangeBatch<Order>>();
    const emitted: unknown[] = [];
    input.pipe(materializeToView(view, { project })).subscribe((b) => emitted.push(b));
    const b = batch('p0', [upsert('o1', 1)]);
    input.next(b);
    await settle();
    expect(view.started).toHaveLength(1);
    expect(emitted).toEqual([]);
    view.release();
    await settle();
    expect(emitted).toEqual([b]);
    expect(await view.get('o1')).toBeDefined();
  });

  it('writes an array of batches in one write and re-emits the array itself', async () => {
    const view = new GatedStore<Row>();
    const values: BatchOrBatches<Order>[] = [[batch('p0', [upsert('a', 1)]), batch('p1', [upsert('b', 2)]), batch('p0', [upsert('a', 3)])]];
    const done = lastValueFrom(of(...values).pipe(materializeToView(view, { project }), toArray()));
    await settle();
    expect(view.started).toHaveLength(1);
    expect(view.started[0]?.partitions.map((p) => p.position)).toEqual([`p0@${lsn}`, `p1@${lsn - 1}`]);
    view.release();
    expect(await done).toEqual(values);
    expect(values[0]).toBe((await done)[0]);
    expect((await view.get('a'))?.row.total).toBe(3);
  });

  it('keeps each partition in order, lets other partitions overtake, and bounds concurrency', async () => {
    const view = new GatedStore<Row>();
    const input = new Subject<BatchOrBatches<Order>>();
    const emitted: string[] = [];
    const done = new Promise<void>((resolve) =>
      input.pipe(materializeToView(view, { project, concurrency: 2 })).subscribe({
        next: (v) => emitted.push(v instanceof ChangeBatch ? v.position : v.map((b) => b.position).join('+')),
        complete: resolve,
      }),
    );
    const a1 = batch('A', [upsert('a', 1)]);
    const a2 = batch('A', [upsert('a', 2)]);
    const b1 = batch('B', [upsert('b', 1)]);
    const c1 = batch('C', [upsert('c', 1)]);
    const ab = [batch('A', [upsert('a', 3)]), batch('B', [upsert('b', 2)])];
    for (const v of [a1, a2, b1, c1, ab]) input.next(v);
    input.complete();
    await settle();
    // A1 and B1 run (a2 waits for a1; c1 waits for a free slot).
    expect(view.log).toEqual([`start ${a1.position}`, `start ${b1.position}`]);
    view.release(1); // B1 commits first: it overtakes A1
    await settle();
    expect(emitted).toEqual([b1.position]);
    // The freed slot goes to c1 (a2 still waits for a1, ab for a2 and b1's successors).
    expect(view.log.at(-1)).toBe(`start ${c1.position}`);
    while (view.waiting > 0 || emitted.length < 5) {
      view.release();
      await settle();
    }
    await done;
    expect(view.maxInFlight).toBe(2);
    const order = (p: string) => emitted.filter((e) => e.includes(`${p}@`));
    expect(order('A')).toEqual([a1.position, a2.position, ab.map((b) => b.position).join('+')]);
    expect(emitted.indexOf(ab.map((b) => b.position).join('+'))).toBeGreaterThan(emitted.indexOf(b1.position));
    // Never two writes of one partition at once.
    const running = new Set<string>();
    for (const entry of view.log) {
      const [what, name] = entry.split(' ') as [string, string];
      const parts = name.split('+').map((p) => p.split('@')[0]);
      if (what === 'start') {
        for (const p of parts) {
          expect(running.has(p as string)).toBe(false);
          running.add(p as string);
        }
      } else for (const p of parts) running.delete(p as string);
    }
    expect((await view.get('a'))?.row.total).toBe(3);
  });

  it('removes rows for deletes, TTL expiry, soft deletes and changes projected to undefined or null', async () => {
    const view = new MemoryViewStore<Row>();
    const seed = batch('p0', [upsert('d', 1), upsert('t', 1), upsert('s', 1), upsert('u', 1), upsert('n', 1), upsert('keep', 1)]);
    const next = batch('p0', [
      remove('d'),
      remove('t', { timeToLiveExpired: true }),
      upsert('s', 2, { status: 'deleted' }),
      upsert('u', 0),
      upsert('n', 0),
      upsert('keep', 2),
    ]);
    await lastValueFrom(
      of(seed, next).pipe(
        materializeToView(view, {
          project: (c) => (c.document!.total > 0 ? project(c) : c.id === 'u' ? undefined : null),
          isDeleted: (c) => c.document?.status === 'deleted',
        }),
      ),
    );
    expect((await view.rows()).map((r) => r.key)).toEqual(['keep']);
    // The removals left tombstones: replaying the seed does not bring them back.
    await lastValueFrom(of(seed).pipe(materializeToView(view, { project })));
    expect((await view.rows()).map((r) => r.key)).toEqual(['keep']);
  });

  it('uses a custom key', async () => {
    const view = new MemoryViewStore<Row>();
    await lastValueFrom(of(batch('p0', [upsert('o1', 5)])).pipe(materializeToView(view, { project, key: (c) => `order:${c.id}` })));
    expect((await view.rows()).map((r) => r.key)).toEqual(['order:o1']);
  });

  it("with onFailure 'skip', reports a change user code keeps failing on and leaves it out", async () => {
    const view = new MemoryViewStore<Row>();
    const t = fakeTracker('p0');
    const b = batch('p0', [upsert('ok', 1), upsert('bad', -1), upsert('ok2', 2)], { tracker: t });
    const out = await lastValueFrom(
      of(b).pipe(
        materializeToView(view, {
          project: (c) => {
            if (c.document!.total < 0) throw new Error('negative total');
            return project(c);
          },
          onFailure: { retry: { attempts: 1 }, skip: true },
        }),
      ),
    );
    expect(out).toBe(b);
    expect((await view.rows()).map((r) => r.key)).toEqual(['ok', 'ok2']);
    expect(t.reportError).toHaveBeenCalledTimes(1);
    const error = t.reportError.mock.calls[0]?.[0] as HandlerError;
    expect(error).toBeInstanceOf(HandlerError);
    expect(error.change?.id).toBe('bad');
    expect(error.partition).toBe('p0');
  });

  it("with onFailure 'skip', a change given up on takes the changes of its LSN with it (a transaction is never written in part)", async () => {
    const view = new MemoryViewStore<Row>();
    const t = fakeTracker('p0');
    const ok = upsert('ok', 1);
    const bad = upsert('bad', -1);
    const sibling = { ...upsert('sibling', 3), lsn: bad.lsn }; // one transactional batch with `bad`
    const b = batch('p0', [ok, bad, sibling, upsert('after', 2)], { tracker: t });
    await lastValueFrom(
      of(b).pipe(
        materializeToView(view, {
          project: (c) => {
            if (c.document!.total < 0) throw new Error('negative total');
            return project(c);
          },
          mode: 'exactlyOnce',
          onFailure: { retry: { attempts: 1 }, skip: true },
        }),
      ),
    );
    expect((await view.rows()).map((r) => r.key)).toEqual(['after', 'ok']);
    expect(t.reportError.mock.calls.map(([e]) => (e as HandlerError).change?.id)).toEqual(['bad', 'sibling']);
  });

  it("fails the stream with the HandlerError under onFailure 'throw' and writes nothing of the batch", async () => {
    const view = new MemoryViewStore<Row>();
    const b = batch('p0', [upsert('ok', 1), upsert('bad', 2)]);
    await expect(
      lastValueFrom(
        of(b).pipe(
          materializeToView(view, {
            project,
            key: (c) => (c.id === 'bad' ? '' : c.id),
            onFailure: { retry: { retryable: () => false }, halt: true },
          }),
        ),
      ),
    ).rejects.toBeInstanceOf(HandlerError); // halting a batch with no reader fails the stream: never a skip
    expect(await view.rows()).toEqual([]);
    expect(() => materializeToView(view, { project, onError: 'throw' } as never)).toThrow(/onFailure: 'throw'/);
    expect(() => syncToIndex(view as never, { document: () => undefined, onError: 'report' } as never)).toThrow(/onFailure: 'skip'/);
  });

  it('drops and reports the batches of a partition another host owns now, writing the rest of the value', async () => {
    const view = new MemoryViewStore<Row>();
    await lastValueFrom(of(batch('p0', [upsert('o', 1)], { epoch: 3 })).pipe(materializeToView(view, { project })));
    const t0 = fakeTracker('p0');
    const stale = batch('p0', [upsert('o', 99)], { epoch: 2, tracker: t0 });
    const other = batch('p1', [upsert('q', 5)], { epoch: 1, tracker: fakeTracker('p1') });
    const later = batch('p0', [upsert('o', 100)], { epoch: 2, tracker: t0 });
    const emitted = await lastValueFrom(of(stale as BatchOrBatches<Order>, [stale, other], later).pipe(materializeToView(view, { project }), toArray()));
    // The single stale batch vanished, the array lost its stale member, the later stale batch vanished too.
    expect(emitted).toEqual([[other]]);
    expect(t0.reportError).toHaveBeenCalledTimes(3);
    expect(t0.reportError.mock.calls[0]?.[0]).toBeInstanceOf(ViewFencedError);
    // Each dropped batch went back to its reader with the fencing error: credit returned, ownership ended.
    expect(t0.drop).toHaveBeenCalledTimes(3);
    for (const [sequence, error] of t0.drop.mock.calls) {
      expect(sequence).toBe(1);
      expect(error).toBeInstanceOf(ViewFencedError);
    }
    expect((await view.get('o'))?.row.total).toBe(1);
    expect((await view.get('q'))?.row.total).toBe(5);
  });

  it('drops, unwritten, the batches of an ownership that ended before their write, handing their credit back', async () => {
    const view = new MemoryViewStore<Row>();
    const ended = fakeTracker('p0');
    const live = fakeTracker('p1');
    const stale = batch('p0', [upsert('o', 1)], { tracker: ended, sequence: 7 });
    const kept = batch('p1', [upsert('q', 2)], { tracker: live, sequence: 3 });
    ended.end();
    const emitted = await lastValueFrom(of(stale as BatchOrBatches<Order>, [stale, kept]).pipe(materializeToView(view, { project }), toArray()));
    expect(emitted).toEqual([[kept]]);
    expect(ended.drop.mock.calls).toEqual([
      [7, undefined],
      [7, undefined],
    ]);
    expect(live.drop).not.toHaveBeenCalled();
    expect((await view.rows()).map((r) => r.key)).toEqual(['q']);
    expect([...(await view.positions()).keys()]).toEqual(['p1']);
  });

  it('fences the deposed owner once the new owner wrote only replays', async () => {
    for (const mode of ['guarded', 'exactlyOnce'] as const) {
      const view = new MemoryViewStore<Row>();
      const first = [upsert('o', 1), upsert('p', 2)];
      await lastValueFrom(of(batch('p0', first, { epoch: 1 })).pipe(materializeToView(view, { project, mode })));
      // The new owner (epoch 2) resumes from an older checkpoint: everything it writes is a replay.
      await lastValueFrom(of(batch('p0', first.slice(1), { epoch: 2 })).pipe(materializeToView(view, { project, mode })));
      const old = fakeTracker('p0');
      const late = batch('p0', [upsert('o', 3)], { epoch: 1, tracker: old, sequence: 2 });
      expect(await lastValueFrom(of(late).pipe(materializeToView(view, { project, mode }), toArray()))).toEqual([]);
      expect(old.drop.mock.calls[0]?.[1]).toBeInstanceOf(ViewFencedError);
      expect((await view.get('o'))?.row.total).toBe(1);
    }
  });

  it('exactly-once: a replayed batch a filter emptied does not move the position back', async () => {
    const view = new MemoryViewStore<Row>();
    const b1 = batch('p0', [upsert('o', 1), upsert('p', 2)]);
    const b2 = batch('p0', [upsert('o', 3)]);
    await lastValueFrom(of(b1, b2).pipe(materializeToView(view, { project, mode: 'exactlyOnce' })));
    // A new owner replays b1; the filter empties it.
    await lastValueFrom(of(b1).pipe(filterChanges(() => false), materializeToView(view, { project, mode: 'exactlyOnce' })));
    expect((await view.positions()).get('p0')).toEqual({ position: b2.position, epoch: 1, lsn: b2.lastLsn });
  });

  it('exactly-once: a split child inherits its parent mark through the ranges the batches carry', async () => {
    const view = new MemoryViewStore<Row>();
    const mode = 'exactlyOnce' as const;
    const parentRange = { minInclusive: '', maxExclusive: 'FF' };
    const parent = batch('P', [upsert('total', 1), upsert('total', 2)], { range: parentRange });
    await lastValueFrom(of(parent).pipe(materializeToView(view, { project, key: () => 'total', mode })));
    await lastValueFrom(of(batch('Q', [upsert('total', 50)])).pipe(materializeToView(view, { project, key: () => 'total', mode })));
    // The child replays the parent's changes from the parent's lease checkpoint: already applied.
    const child = parent.changes.map((c) => ({ ...c }));
    // Taken one epoch above its parent (children start at the parent's epoch, untaken).
    const replay = batch('L', child, { range: { minInclusive: '', maxExclusive: '80' }, epoch: 2 });
    await lastValueFrom(of(replay).pipe(materializeToView(view, { project, key: () => 'total', mode })));
    expect((await view.get('total'))?.row.total).toBe(50);
  });

  it('waits out a view that is down (retrying with capped backoff) and stops waiting when the subscriber leaves', async () => {
    vi.useFakeTimers();
    try {
      const view = new MemoryViewStore<Row>();
      const write = view.write.bind(view);
      let down = true;
      let calls = 0;
      view.write = async (w) => {
        calls++;
        if (down) throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
        return write(w);
      };
      const t = fakeTracker('p0');
      const out: unknown[] = [];
      const subscription = of(batch('p0', [upsert('o', 1)], { tracker: t })).pipe(materializeToView(view, { project })).subscribe((b) => out.push(b));
      await vi.advanceTimersByTimeAsync(60_000);
      // 100 ms doubling, capped at 10 s: about 11 attempts in a minute, reported at 1, 3 and 10.
      expect(calls).toBeGreaterThan(8);
      expect(calls).toBeLessThan(14);
      expect(t.reportError.mock.calls.map((c) => c[1])).toEqual([1, 3, 10]);
      down = false;
      await vi.advanceTimersByTimeAsync(10_000);
      expect(out).toHaveLength(1);
      expect((await view.get('o'))?.row.total).toBe(1);
      subscription.unsubscribe();

      down = true;
      const before = calls;
      const left = of(batch('p0', [upsert('o', 2)])).pipe(materializeToView(view, { project })).subscribe();
      await vi.advanceTimersByTimeAsync(1_000);
      left.unsubscribe();
      const atUnsubscribe = calls;
      expect(atUnsubscribe).toBeGreaterThan(before);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(calls).toBe(atUnsubscribe);
    } finally {
      vi.useRealTimers();
    }
  });

  it('ends the stream with a SinkError when a write fails in a way waiting cannot fix', async () => {
    const view = new MemoryViewStore<Row>();
    view.write = async () => {
      throw Object.assign(new Error('relation "orders" does not exist'), { code: '42P01' });
    };
    const error = await lastValueFrom(of(batch('p0', [upsert('o', 1)])).pipe(materializeToView(view, { project }))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SinkError);
    expect(error).toMatchObject({ code: '42P01', sink: view.description });
    expect((error as Error).message).toMatch(/does not exist/);
  });

  it('skips empty guarded writes unless they raise the epoch, but moves exactly-once positions for empty batches', async () => {
    const guarded = new MemoryViewStore<Row>();
    const writes: ViewWrite<Row>[] = [];
    const write = guarded.write.bind(guarded);
    guarded.write = (w) => (writes.push(w), write(w));
    const empty = batch('p0', []);
    const sameEpoch = batch('p0', []);
    const newOwner = batch('p0', [], { epoch: 2 });
    const out = await lastValueFrom(of(empty, sameEpoch, newOwner).pipe(materializeToView(guarded, { project }), toArray()));
    expect(out).toEqual([empty, sameEpoch, newOwner]);
    // The first write of each epoch raises the view's epoch for the partition; the second at epoch 1 is skipped.
    expect(writes.map((w) => w.partitions.map((p) => p.epoch))).toEqual([[1], [2]]);
    expect((await guarded.positions()).get('p0')?.epoch).toBe(2);

    const exact = new MemoryViewStore<Row>();
    await lastValueFrom(of(empty).pipe(materializeToView(exact, { project, mode: 'exactlyOnce' })));
    expect((await exact.positions()).get('p0')?.position).toBe(empty.position);
    // An empty array passes straight through.
    expect(await lastValueFrom(of([] as ChangeBatch<Order>[]).pipe(materializeToView(exact, { project })))).toEqual([]);
  });

  it('exactly-once mode skips changes the view already holds when the feed replays from an older checkpoint', async () => {
    const view = new MemoryViewStore<Row>();
    const b1 = batch('p0', [upsert('o', 1), upsert('p', 1)]);
    const b2 = batch('p0', [upsert('o', 2)]);
    const write = vi.spyOn(view, 'write');
    await lastValueFrom(of(b1, b2).pipe(materializeToView(view, { project, mode: 'exactlyOnce' })));
    // Crash before the checkpoint: the feed starts again at b1.
    await lastValueFrom(of(b1, b2).pipe(materializeToView(view, { project, mode: 'exactlyOnce' })));
    const results = await Promise.all(write.mock.results.map((r) => r.value as Promise<ViewWriteResult>));
    expect(results.map((r) => r.written)).toEqual([2, 1, 0, 0]);
    expect((await view.get('o'))?.row.total).toBe(2);
  });

  it('rejects invalid options at construction, naming the option', () => {
    const view = new MemoryViewStore<Row>();
    expect(() => materializeToView(view, { project, concurrency: 0 })).toThrow(InvalidOptionsError);
    expect(() => materializeToView(view, { project, concurrency: 1.5 })).toThrow(/concurrency/);
    expect(() => materializeToView(view, { project, mode: 'sometimes' as 'guarded' })).toThrow(/mode/);
    expect(() => materializeToView(view, { project: undefined as unknown as typeof project })).toThrow(/project/);
    expect(() => materializeToView(undefined as unknown as ViewStore<Row>, { project })).toThrow(/view/);
    expect(() => materializeToView(view, { project, onError: 'ignore' } as never)).toThrow(/onError/);
    expect(() => materializeToView(view, { project, onFailure: 'ignore' as never })).toThrow(/onFailure/);
  });

  it('infers the document type from the stream', async () => {
    const view = new MemoryViewStore<{ doubled: number }>();
    const out = await lastValueFrom(
      of(batch('p0', [upsert('o', 4)])).pipe(materializeToView(view, { project: (c) => ({ doubled: c.document!.total * 2 }) })),
    );
    // `out` is a ChangeBatch<Order>, not a union: this line only compiles if the type flowed through.
    expect(out.partition).toBe('p0');
    expect((await view.get('o'))?.row).toEqual({ doubled: 8 });
  });
});

describe('syncToIndex', () => {
  it('indexes documents, collapses several changes of one id in a batch, and removes deleted ones', async () => {
    const index = new MemoryViewStore<SearchDocument>();
    const write = vi.spyOn(index, 'write');
    const b = batch('p0', [upsert('x', 1), upsert('x', 2), upsert('y', 1), remove('y'), upsert('z', 3, { status: 'hidden' })]);
    await lastValueFrom(
      of(b).pipe(
        syncToIndex(index, {
          document: (c) => ({ title: c.document!.customer, text: `order total ${c.document!.total}` }),
          isDeleted: (c) => c.document?.status === 'hidden',
        }),
      ),
    );
    expect(write).toHaveBeenCalledTimes(1);
    expect(await write.mock.results[0]?.value).toEqual({ written: 1, deleted: 0, skipped: 4 });
    expect((await index.rows()).map((r) => [r.key, r.row.text])).toEqual([['x', 'order total 2']]);
  });

  it('rejects a missing document function', () => {
    expect(() => syncToIndex(new MemoryViewStore<SearchDocument>(), {} as never)).toThrow(/document/);
  });
});
