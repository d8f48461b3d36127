import { lastValueFrom, map, of, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { batch, ns, recordingTracker, type Doc } from './batches.js';

const even = (c: Change<Doc>) => (c.document?.n ?? 1) % 2 === 0;

describe('filterChanges', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  it('filters inside each batch and lets batches that lose every change travel on', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const a = batch('p0', [1, 2, 3, 4]);
      const b = batch('p0', [5, 7]);
      const expected = { x: a.filter(even), y: b.withChanges<Doc>([]) };
      const source = cold('-a--b--|', { a, b });
      expectObservable(source.pipe(filterChanges(even))).toBe(
                         '-x--y--|', expected);
    });
  });

  it('keeps the position of emptied batches, and emits untouched batches as they are', () => {
    const out: ChangeBatch<Doc>[] = [];
    const all = batch('p0', [2, 4]);
    const none = batch('p0', [1, 3]);
    scheduler.run(({ cold }) => {
      cold('ab|', { a: all, b: none }).pipe(filterChanges(even)).subscribe((b) => out.push(b));
    });
    expect(out[0]).toBe(all);
    expect([out[1]?.position, out[1]?.isEmpty]).toEqual(['p0@3', true]);
  });

  it('filters arrays of batches into arrays of the same length', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const list = [batch('p0', [1, 2]), batch('p1', [3])];
      const source = cold('-l-|', { l: list });
      expectObservable(source.pipe(filterChanges(even), map((l) => l.map(ns)))).toBe(
                         '-x-|', { x: [[2], []] });
    });
  });

  it('narrows the document type with a type guard', () => {
    type Shape = { kind: 'circle'; r: number } | { kind: 'square'; side: number };
    const isCircle = (c: Change<Shape>): c is Change<Extract<Shape, { kind: 'circle' }>> => c.document?.kind === 'circle';
    scheduler.run(({ cold, expectObservable }) => {
      const shapes = new ChangeBatch<Shape>({
        partition: 'p0',
        position: 'p0@2',
        changes: [
          { id: 'c', operation: 'create', document: { kind: 'circle', r: 2 }, lsn: 1, timestampMs: 1 },
          { id: 's', operation: 'create', document: { kind: 'square', side: 3 }, lsn: 2, timestampMs: 2 },
        ],
      });
      const circles = cold('-a|', { a: shapes }).pipe(filterChanges(isCircle));
      expectTypeOf(circles).toEqualTypeOf<Observable<ChangeBatch<{ kind: 'circle'; r: number }>>>();
      expectObservable(circles.pipe(map((b) => b.changes.map((c) => c.document?.r)))).toBe('-x|', { x: [2] });
    });
  });

  it('unsubscribes from the source', () => {
    scheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const a = batch('p0', [1, 2]);
      const source = hot('--a--a--a--|', { a });
      const sub =        '^-------!';
      expectObservable(source.pipe(filterChanges(even)), sub).toBe(
                         '--x--x---', { x: a.filter(even) });
      expectSubscriptions(source.subscriptions).toBe(sub);
    });
  });

  it("with onFailure 'skip', reports a change its predicate throws for and leaves it out", async () => {
    const tracker = recordingTracker('p1');
    const input = batch('p1', [1, 2, 3, 4], { tracker });
    const cause = new RangeError('predicate broke');
    const fragile = (c: Change<Doc>) => {
      if (c.document?.n === 4) throw cause;
      return true;
    };
    expect(ns(await lastValueFrom(of(input).pipe(filterChanges(fragile, { onFailure: { retry: { attempts: 1 }, skip: true } }))))).toEqual([1, 2, 3]);
    expect(tracker.errors).toEqual([new HandlerError('p1', input.changes[3], cause)]);
    expect((tracker.errors[0] as HandlerError).change).toBe(input.changes[3]);
  });

  it("fails the stream with a HandlerError under onFailure 'throw', and refuses the removed onError", async () => {
    vi.useFakeTimers();
    try {
      const input = batch('p1', [1]);
      const failed = lastValueFrom(of(input).pipe(filterChanges(() => { throw new Error('no'); }, { onFailure: 'throw' }))).catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(await failed).toEqual(new HandlerError('p1', input.changes[0], new Error('no')));
    } finally {
      vi.useRealTimers();
    }
    expect(() => filterChanges(even, { onError: 'throw' } as never)).toThrow(InvalidOptionsError);
    expect(() => filterChanges(even, { onFailure: { retry: { attempts: 1 } } } as never)).toThrow(/onFailure/);
  });
});
