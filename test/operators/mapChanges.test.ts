import { lastValueFrom, map, of, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { batch, recordingTracker, type Doc } from './batches.js';

const double = (c: Change<Doc>): Change<number> => ({ ...c, document: (c.document?.n ?? 0) * 2, previous: undefined });

describe('mapChanges', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  it('maps the changes inside each batch and keeps empty batches', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const a = batch('p0', [1, 2]);
      const e = batch('p0', [], { position: 'p0@2' });
      const values = { a, e };
      const expected = { x: a.map(double), y: e.map(double) };
      const source = cold('-a--e--|', values);
      expectObservable(source.pipe(mapChanges(double))).toBe(
                         '-x--y--|', expected);
    });
  });

  it('keeps position, partition and epoch, and maps arrays of batches to arrays', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const list = [batch('p0', [1]), batch('p1', [3, 4])];
      const source = cold('-l-|', { l: list });
      expectObservable(source.pipe(mapChanges(double))).toBe(
                         '-m-|', { m: list.map((b) => b.map(double)) });
    });
    const mapped = batch('p1', [3]).map(double);
    expect([mapped.partition, mapped.position, mapped.changes[0]?.document]).toEqual(['p1', 'p1@3', 6]);
  });

  it('passes errors and completion through, and unsubscribes from the source', () => {
    scheduler.run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const a = batch('p0', [1]);
      const failing = cold('-a-#', { a }, new Error('boom'));
      expectObservable(failing.pipe(mapChanges(double))).toBe(
                           '-x-#', { x: a.map(double) }, new Error('boom'));

      const source = hot('-a-a--a-|', { a });
      const sub =        '^---!';
      expectObservable(source.pipe(mapChanges(double)), sub).toBe(
                         '-x-x-', { x: a.map(double) });
      expectSubscriptions(source.subscriptions).toBe(sub);
    });
  });

  it("with onFailure 'skip', reports a change its function throws for as an item failure and keeps the batch", async () => {
    const tracker = recordingTracker('p0');
    const input = batch('p0', [1, 2, 3], { tracker });
    const cause = new Error('bad document');
    const picky = (c: Change<Doc>) => {
      if (c.document?.n === 2) throw cause;
      return double(c);
    };
    const out = await lastValueFrom(of(input).pipe(mapChanges(picky, { onFailure: { retry: { attempts: 1 }, skip: true } })));
    expect(out).toEqual(input.withChanges([double(input.changes[0]!), double(input.changes[2]!)]));
    expect(tracker.errors).toHaveLength(1);
    const error = tracker.errors[0] as HandlerError;
    expect(error).toBeInstanceOf(HandlerError);
    expect([error.partition, error.change, error.cause]).toEqual(['p0', input.changes[1], cause]);
  });

  it("fails the stream with a HandlerError under onFailure 'throw', after the default retries", async () => {
    vi.useFakeTimers();
    try {
      const tracker = recordingTracker('p0');
      const input = batch('p0', [1, 2], { tracker });
      const cause = new Error('strict');
      let calls = 0;
      const failed = lastValueFrom(of(input).pipe(mapChanges(() => { calls++; throw cause; }, { onFailure: 'throw' }))).catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(await failed).toEqual(new HandlerError('p0', input.changes[0], cause));
      expect(calls).toBe(2 + 2); // both changes once in the batch pass, then the first one twice more (3 attempts)
      expect(tracker.errors).toEqual([new HandlerError('p0', input.changes[0], cause)]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('refuses the removed onError, saying what to write instead', () => {
    expect(() => mapChanges(double, { onError: 'report' } as never)).toThrow(InvalidOptionsError);
    expect(() => mapChanges(double, { onError: 'report' } as never)).toThrow(/onFailure: 'skip'/);
    expect(() => mapChanges(double, { onError: 'throw' } as never)).toThrow(/onFailure: 'throw'/);
    expect(() => mapChanges(double, { onFailure: 'ignore' as never })).toThrow(/onFailure/);
  });

  it('infers document types from the stream, for batches and arrays of batches', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const a = batch('p0', [1]);
      const single = cold('-a|', { a }).pipe(mapChanges((c) => ({ ...c, document: c.document?.n, previous: undefined })));
      const many = cold('-l|', { l: [a] }).pipe(mapChanges((c) => ({ ...c, document: String(c.document?.n), previous: undefined })));
      expectTypeOf(single).toEqualTypeOf<Observable<ChangeBatch<number>>>();
      expectTypeOf(many).toEqualTypeOf<Observable<ChangeBatch<string>[]>>();
      expectObservable(single.pipe(map((b) => b.changes[0]?.document))).toBe('-x|', { x: 1 });
      expectObservable(many.pipe(map((l) => l[0]?.changes[0]?.document))).toBe('-x|', { x: '1' });
    });
  });
});
