import { Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Change } from '../../src/core/Change.js';
import type { PartitionTracker } from '../../src/core/PartitionTracker.js';
import { InvalidOptionsError, LeaseLostError } from '../../src/errors/index.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';

/**
 * A tracker whose checkpoint writes settle synchronously (a thenable), so whole write/complete cycles
 * happen inside TestScheduler virtual time. Records acks and writes with their frame.
 */
class FakeTracker implements PartitionTracker {
  readonly acks: [number, number, string][] = [];
  readonly writes: [number, string][] = [];
  readonly errors: Error[] = [];
  readonly drops: number[] = [];
  readonly ownership = new AbortController();
  fail: Error | undefined;
  constructor(
    readonly leaseToken: string,
    private readonly now: () => number,
  ) {}
  acknowledge(sequence: number, position: string): void {
    this.acks.push([this.now(), sequence, position]);
  }
  checkpoint(position: string): Promise<void> {
    this.writes.push([this.now(), position]);
    const fail = this.fail;
    const thenable = {
      then(ok?: () => unknown, ko?: (e: unknown) => unknown) {
        if (fail) ko?.(fail);
        else ok?.();
        return thenable;
      },
    };
    return thenable as unknown as Promise<void>;
  }
  reportError(error: Error): void {
    this.errors.push(error);
  }
  drop(sequence: number): void {
    this.drops.push(sequence);
  }
  get signal(): AbortSignal {
    return this.ownership.signal;
  }
  get dropped(): number[] {
    return this.drops;
  }
}

const change = (lsn: number): Change<string> => ({ id: `d${lsn}`, operation: 'upsert', document: 'x', lsn, timestampMs: 0 });

function batchOf(tracker: PartitionTracker, sequence: number, size: number): ChangeBatch<string> {
  const changes = Array.from({ length: size }, (_, i) => change(sequence * 100 + i));
  return new ChangeBatch({
    partition: tracker.leaseToken,
    changes,
    position: `p${sequence}`,
    origin: { tracker, sequence, readCount: size },
  });
}

describe('checkpointEvery', () => {
  let scheduler: TestScheduler;
  let tracker: FakeTracker;
  let other: FakeTracker;

  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
    tracker = new FakeTracker('0', () => scheduler.now());
    other = new FakeTracker('1', () => scheduler.now());
  });

  it('acknowledges every batch, re-emits it unchanged, and writes every `count` changes per partition', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const values = { a: batchOf(tracker, 1, 3), b: batchOf(tracker, 2, 3), c: batchOf(other, 1, 1), d: batchOf(tracker, 3, 1) };
      const source = cold('  a-b-c-d|', values);
      const expected = '     a-b-c-d|';
      expectObservable(source.pipe(checkpointEvery(5))).toBe(expected, values);
    });
    expect(tracker.acks).toEqual([
      [0, 1, 'p1'],
      [2, 2, 'p2'],
      [6, 3, 'p3'],
    ]);
    // 3 + 3 ≥ 5 at frame 2; the rest (p3 of partition 0, p1 of partition 1) on completion at frame 7
    expect(tracker.writes).toEqual([
      [2, 'p2'],
      [7, 'p3'],
    ]);
    expect(other.writes).toEqual([[7, 'p1']]);
  });

  it('writes at most `ms` after an acknowledgement, and not while idle', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const values = { a: batchOf(tracker, 1, 1), b: batchOf(tracker, 2, 1), c: batchOf(tracker, 3, 1) };
      const source = cold('  a-b 20ms c 50ms |', values);
      const expected = '     a-b 20ms c 50ms |';
      expectObservable(source.pipe(checkpointEvery({ ms: 10, scheduler }))).toBe(expected, values);
    });
    expect(tracker.writes).toEqual([
      [10, 'p2'],
      [33, 'p3'],
    ]);
  });

  it('takes arrays of batches (bufferTime/bufferCount output) and acks them in order', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const list = [batchOf(tracker, 1, 2), batchOf(other, 1, 2), batchOf(tracker, 2, 2)];
      const source = cold('  x|', { x: list });
      expectObservable(source.pipe(checkpointEvery(4))).toBe('x|', { x: list });
    });
    expect(tracker.acks.map((a) => a[1])).toEqual([1, 2]);
    expect(tracker.writes).toEqual([[0, 'p2']]);
    expect(other.writes).toEqual([[1, 'p1']]);
  });

  it('counts an empty batch as one change, so a moved position is never left unwritten', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const empty = batchOf(tracker, 1, 0);
      expectObservable(cold('e', { e: empty }).pipe(checkpointEvery(1))).toBe('e', { e: empty });
    });
    expect(tracker.writes).toEqual([[0, 'p1']]);
  });

  it('flushes on unsubscription', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const values = { a: batchOf(tracker, 1, 1), b: batchOf(tracker, 2, 1) };
      const source = cold('  a-b-----', values);
      const unsub = '        ^---!';
      expectObservable(source.pipe(checkpointEvery({ count: 100, ms: 1000, scheduler })), unsub).toBe('a-b-', values);
    });
    expect(tracker.writes).toEqual([[4, 'p2']]);
  });

  it('flushes before forwarding an error', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const values = { a: batchOf(tracker, 1, 1) };
      expectObservable(cold('a-#', values).pipe(checkpointEvery(100))).toBe('a-#', values);
    });
    expect(tracker.writes).toEqual([[2, 'p1']]);
  });

  it('ignores batches acknowledged out of order and batches without an origin', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const plain = new ChangeBatch({ partition: '9', changes: [change(1)], position: 'x' });
      const values = { a: batchOf(tracker, 2, 1), b: batchOf(tracker, 1, 1), p: plain };
      expectObservable(cold('a-b-p|', values).pipe(checkpointEvery(1))).toBe('a-b-p|', values);
    });
    expect(tracker.writes).toEqual([[0, 'p2']]);
  });

  it('reports a rejected write (lease lost) as an event, not a pipeline error', () => {
    tracker.fail = new LeaseLostError('0', 'me', 'other');
    scheduler.run(({ cold, expectObservable }) => {
      const values = { a: batchOf(tracker, 1, 1), b: batchOf(tracker, 2, 1) };
      expectObservable(cold('a-b|', values).pipe(checkpointEvery(1))).toBe('a-b|', values);
    });
    expect(tracker.errors).toHaveLength(2);
    expect(tracker.errors[0]).toBeInstanceOf(LeaseLostError);
  });

  it('never runs two writes for one lease at once: positions acknowledged meanwhile are coalesced', async () => {
    const writes: string[] = [];
    let active = 0;
    let maxActive = 0;
    const pending: (() => void)[] = [];
    const slow: PartitionTracker = {
      leaseToken: '0',
      acknowledge: () => undefined,
      reportError: () => undefined,
      drop: () => undefined,
      signal: new AbortController().signal,
      checkpoint(position) {
        writes.push(position);
        maxActive = Math.max(maxActive, ++active);
        return new Promise<void>((resolve) => pending.push(() => (active--, resolve())));
      },
    };
    const input = new Subject<ChangeBatch<string>>();
    let completed = false;
    input.pipe(checkpointEvery(1)).subscribe({ complete: () => (completed = true) });
    for (let s = 1; s <= 5; s++) input.next(batchOf(slow, s, 1));
    input.complete();
    expect(writes).toEqual(['p1']);
    pending.shift()!();
    await Promise.resolve();
    await Promise.resolve();
    expect(writes).toEqual(['p1', 'p5']);
    expect(completed).toBe(false); // completion waits for the last write
    pending.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(completed).toBe(true);
    expect(maxActive).toBe(1);
  });

  it('rejects invalid configurations with a clear message', () => {
    expect(() => checkpointEvery(0)).toThrow(InvalidOptionsError);
    expect(() => checkpointEvery({ ms: -1 })).toThrow(/milliseconds/);
    expect(() => checkpointEvery({})).toThrow(/count, ms or both/);
  });
});
