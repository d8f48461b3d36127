import { lastValueFrom, map, of, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { HandlerError } from '../../src/errors/index.js';
import { mapDocuments } from '../../src/operators/mapDocuments.js';
import { batch, change, recordingTracker, type Doc } from './batches.js';

describe('mapDocuments', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  it('maps current and previous documents, leaves deletes without a document, keeps empty batches', () => {
    const replaced: Change<Doc> = { ...change('p0-1', 5, 7, 'replace'), previous: { n: 4 } };
    const deleted = change('p0-2', 0, 8, 'delete');
    const a = new ChangeBatch<Doc>({ partition: 'p0', changes: [replaced, deleted], position: 'p0@8' });
    const e = batch('p0', [], { position: 'p0@8' });
    const x = a.withChanges<string>([
      { ...replaced, document: 'n=5', previous: 'n=4' },
      { ...deleted, document: undefined } as Change<string>,
    ]);
    scheduler.run(({ cold, expectObservable }) => {
      const source = cold('-a-e-|', { a, e });
      expectObservable(source.pipe(mapDocuments((d) => `n=${d.n}`))).toBe(
                         '-x-y-|', { x, y: e.withChanges<string>([]) });
    });
    // No `previous` key appears on changes that had none.
    const keys: string[][] = [];
    scheduler.run(({ cold }) => {
      cold('a|', { a: batch('p0', [1]) }).pipe(mapDocuments((d) => d.n)).subscribe((b) => keys.push(Object.keys(b.changes[0]!)));
    });
    expect(keys).toEqual([['id', 'operation', 'document', 'lsn', 'timestampMs']]);
  });

  it('maps arrays of batches to arrays and infers the document type', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const list = [batch('p0', [1]), batch('p1', [2])];
      const mapped = cold('-l|', { l: list }).pipe(mapDocuments((d) => d.n * 10));
      expectTypeOf(mapped).toEqualTypeOf<Observable<ChangeBatch<number>[]>>();
      expectObservable(mapped.pipe(map((l) => l.map((b) => b.changes.map((c) => c.document))))).toBe(
                                  '-x|', { x: [[10], [20]] });
    });
  });

  it('unsubscribes from the source', () => {
    scheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const a = batch('p0', [1]);
      const source = hot('-a-a--a-|', { a });
      const sub =        '^----!';
      expectObservable(source.pipe(mapDocuments((d) => d.n)), sub).toBe(
                         '-x-x--', { x: a.mapDocuments((d) => d.n) });
      expectSubscriptions(source.subscriptions).toBe(sub);
    });
  });

  it("with onFailure 'skip', reports a document its function throws for and drops that change only", async () => {
    const tracker = recordingTracker('p3');
    const input = batch('p3', [1, 2, 3], { tracker });
    const picky = mapDocuments(
      (d: Doc) => {
        if (d.n === 3) throw new TypeError('no threes');
        return d.n;
      },
      { onFailure: { retry: { attempts: 1 }, skip: true } },
    );
    expect(await lastValueFrom(of(input).pipe(picky))).toEqual(input.filter((c) => c.document?.n !== 3).mapDocuments((d) => d.n));
    expect(tracker.errors.map((e) => [e.constructor, (e as HandlerError).partition, (e as HandlerError).change?.id])).toEqual([
      [HandlerError, 'p3', 'p3-3'],
    ]);
    expect(tracker.errors[0]?.message).toMatch(/no threes/);
  });

  it("fails the stream under onFailure 'throw'; a non-retryable error at once", async () => {
    const input = batch('p0', [1]);
    const once = { retry: { retryable: () => false } } as const;
    let calls = 0;
    const strict = mapDocuments(() => { calls++; throw new Error('x'); }, { onFailure: { ...once, halt: true } });
    // A batch built by hand has no reader to halt: halting fails the stream (the change is never skipped).
    const failed = await lastValueFrom(of(input).pipe(strict)).catch((e: unknown) => e);
    expect(failed).toEqual(new HandlerError('p0', input.changes[0], new Error('x')));
    expect(calls).toBe(1);
    vi.useFakeTimers();
    try {
      const thrown = lastValueFrom(of(input).pipe(mapDocuments(() => { throw new Error('x'); }, { onFailure: 'throw' }))).catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(await thrown).toEqual(new HandlerError('p0', input.changes[0], new Error('x')));
    } finally {
      vi.useRealTimers();
    }
  });
});
