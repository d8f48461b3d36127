import { concatMap, filter, from, lastValueFrom, map, mergeMap, of, throwError, timer, toArray, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { eachChange } from '../../src/operators/eachChange.js';
import { batch, ns, recordingTracker, type Doc } from './batches.js';

/** One frame of work per change, in order. */
const slow = concatMap((c: Change<Doc>) => timer(1).pipe(map(() => c)));

describe('eachChange', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  it('runs the chain on the changes of each batch and rebuilds the batch from its output', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const a = batch('p0', [1, 2, 3, 4]);
      const e = batch('p0', [], { position: 'p0@4' });
      const chain = filter((c: Change<Doc>) => (c.document?.n ?? 0) > 2);
      expectObservable(cold('-a-e-|', { a, e }).pipe(eachChange(chain))).toBe(
                            '-x-y-|', { x: a.filter((c) => c.document!.n > 2), y: e });
    });
  });

  it('keeps each partition in order while other partitions run concurrently', () => {
    const a = batch('A', [1, 2, 3]);
    const b = batch('B', [1]);
    const c = batch('A', [4]);
    scheduler.run(({ cold, expectObservable }) => {
      const source = cold('-abc---|', { a, b, c });
      expectObservable(source.pipe(eachChange(slow))).toBe(
                         '---bac-|', { a, b, c });
    });
  });

  it('runs one partition at a time with concurrency 1', () => {
    const a = batch('A', [1, 2, 3]);
    const b = batch('B', [1]);
    scheduler.run(({ cold, expectObservable }) => {
      const source = cold('-ab---|', { a, b });
      expectObservable(source.pipe(eachChange(slow, { concurrency: 1 }))).toBe(
                         '----ab|', { a, b });
    });
  });

  it('rebuilds arrays of batches into arrays and infers the output type', () => {
    const list = [batch('A', [1]), batch('B', [2, 3])];
    scheduler.run(({ cold, expectObservable }) => {
      const out = cold('-l-|', { l: list }).pipe(
        eachChange(mergeMap((ch) => of({ ...ch, document: `#${ch.document?.n}`, previous: undefined }))),
      );
      expectTypeOf(out).toEqualTypeOf<Observable<ChangeBatch<string>[]>>();
      expectObservable(out.pipe(map((l) => l.map((x) => [x.partition, x.position, x.changes.map((ch) => ch.document)])))).toBe(
                       '-x-|', { x: [['A', 'A@1', ['#1']], ['B', 'B@3', ['#2', '#3']]] });
    });
  });

  it('unsubscribes from the source and from the chain in flight', () => {
    const a = batch('A', [1, 2, 3]);
    scheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('-a-a----|', { a });
      const sub =        '^-!';
      expectObservable(source.pipe(eachChange(slow)), sub).toBe(
                         '---');
      expectSubscriptions(source.subscriptions).toBe(sub);
    });
  });

  it("with onFailure 'skip', reports the change the chain keeps failing on and lets the batch travel on without it", async () => {
    const tracker = recordingTracker('A');
    const a = batch('A', [1, 2], { tracker });
    const b = batch('A', [3], { tracker });
    const cause = new Error('enrich failed');
    const chain = mergeMap((c: Change<Doc>) => (c.document?.n === 2 ? throwError(() => cause) : of(c)));
    const out = await lastValueFrom(from([a, b]).pipe(eachChange(chain, { onFailure: { retry: { attempts: 1 }, skip: true } }), map(ns), toArray()));
    expect(out).toEqual([[1], [3]]);
    expect(tracker.errors).toEqual([new HandlerError('A', a.changes[1], cause)]);
  });

  it("fails the stream with a HandlerError under onFailure 'throw', and validates its options", async () => {
    const a = batch('A', [1]);
    const cause = new Error('no');
    const strict = eachChange(mergeMap(() => throwError(() => cause)), { onFailure: { retry: { retryable: () => false }, halt: true } });
    expect(await lastValueFrom(from([a]).pipe(strict)).catch((e: unknown) => e)).toEqual(new HandlerError('A', a.changes[0], cause));
    expect(() => eachChange(slow, { concurrency: 0 })).toThrow(InvalidOptionsError);
    expect(() => eachChange(slow, { onError: 'nope' } as never)).toThrow(/onError/);
  });
});
