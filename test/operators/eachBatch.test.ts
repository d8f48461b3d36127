import { from, lastValueFrom, Subject, timer, toArray, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { eachBatch } from '../../src/operators/eachBatch.js';
import { batch, recordingTracker, type Doc } from './batches.js';

/** Resolves after pending promise callbacks ran (no timers involved). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('eachBatch', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  // Work durations (in frames) by batch position.
  const a = batch('A', [1], { position: 'A1' });
  const b = batch('B', [1], { position: 'B1' });
  const c = batch('A', [2], { position: 'A2' });
  const frames: Record<string, number> = { A1: 4, B1: 1, A2: 1 };
  const work = (x: ChangeBatch<Doc>) => timer(frames[x.position] ?? 0);

  it('keeps each partition in order while other partitions overtake it', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const source = cold('-ab-c---|', { a, b, c });
      expectObservable(source.pipe(eachBatch(work))).toBe(
                         '---b-ac-|', { a, b, c });
    });
  });

  it('runs at most `concurrency` partitions at once, taking turns', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const source = cold('-ab-c---|', { a, b, c });
      expectObservable(source.pipe(eachBatch(work, { concurrency: 1 }))).toBe(
                         '-----abc|', { a, b, c });
    });
  });

  it('completes only after the work in flight finished', () => {
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold('-a|', { a }).pipe(eachBatch(work))).toBe(
                            '-----(a|)', { a });
    });
  });

  it('unsubscribes from the source and from the work in flight', () => {
    scheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const source = hot('-a-b----|', { a, b });
      const inner = cold(  '-----|');
      const sub =        '^---!';
      expectObservable(source.pipe(eachBatch(() => inner)), sub).toBe(
                         '-----');
      expectSubscriptions(source.subscriptions).toBe(sub);
      expectSubscriptions(inner.subscriptions).toBe(['-^--!', '---^!']);
    });
  });

  it('re-emits arrays whole once every batch in them is done', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const list = [a, b];
      expectObservable(cold('-l--|', { l: list }).pipe(eachBatch(work))).toBe(
                            '-----(l|)', { l: list });
    });
  });

  it('runs promise work serially per partition and aborts it on unsubscribe', async () => {
    const source = new Subject<ChangeBatch<Doc>>();
    const started: string[] = [];
    const done: string[] = [];
    const gates = new Map<string, ReturnType<typeof deferred>>();
    let signal: AbortSignal | undefined;
    const subscription = source
      .pipe(
        eachBatch((x, s) => {
          started.push(x.position);
          signal = s;
          const gate = deferred();
          gates.set(x.position, gate);
          return gate.promise;
        }),
      )
      .subscribe((x) => done.push(x.position));
    source.next(a);
    source.next(b);
    source.next(c);
    await settle();
    expect(started).toEqual(['A1', 'B1']);
    gates.get('B1')?.resolve();
    await settle();
    expect(done).toEqual(['B1']);
    gates.get('A1')?.resolve();
    await settle();
    expect([started, done]).toEqual([['A1', 'B1', 'A2'], ['B1', 'A1']]);
    subscription.unsubscribe();
    expect(signal?.aborted).toBe(true);
  });

  it("with onFailure 'skip', reports the changes its work keeps failing on and lets the batch travel on without them", async () => {
    const tracker = recordingTracker('B');
    const failing = batch('B', [1, 2], { tracker, position: 'B9' });
    const cause = new Error('index down');
    const seen: number[][] = [];
    const out = await lastValueFrom(
      from([a, failing]).pipe(
        eachBatch(
          (x) => {
            seen.push(x.changes.map((c) => c.document!.n));
            return x.partition === 'B' && x.changes.some((c) => c.document?.n === 2) ? Promise.reject(cause) : Promise.resolve();
          },
          { onFailure: { retry: { attempts: 1 }, skip: true } },
        ),
        toArray(),
      ),
    );
    expect(out.map((x) => [x.position, x.size])).toEqual([['A1', 1], ['B9', 1]]);
    // The batch once, then each change alone: only change 2 is given up on.
    expect(seen).toEqual([[1], [1, 2], [1], [2]]);
    expect(tracker.errors).toEqual([new HandlerError('B', failing.changes[1], cause)]);
  });

  it('does not run batches whose ownership ended while they waited: they go back to the reader', async () => {
    const tracker = recordingTracker('B');
    const first = batch('B', [1], { tracker, position: 'B1' });
    const waiting = batch('B', [2], { tracker, position: 'B2' });
    const gate = deferred();
    const ran: string[] = [];
    const done = lastValueFrom(
      from([first, waiting]).pipe(
        eachBatch(async (x) => {
          ran.push(x.position);
          await gate.promise;
        }),
        toArray(),
      ),
    );
    await settle();
    tracker.end(); // the lease was lost while B1 ran and B2 waited behind it
    gate.resolve();
    const out = await done;
    expect(ran).toEqual(['B1']);
    expect(out.map((x) => x.position)).toEqual(['B1']);
    expect(tracker.dropped).toEqual([[1, undefined]]);
  });

  it("fails the stream with a HandlerError under onFailure 'throw', and refuses the removed onError", async () => {
    const strict = eachBatch<ChangeBatch<Doc>>(() => { throw new Error('down'); }, { onFailure: { retry: { retryable: () => false }, halt: true } });
    // A hand-built batch has no reader to halt: halting fails the stream rather than skip the change.
    expect(await lastValueFrom(from([a]).pipe(strict)).catch((e: unknown) => e)).toEqual(new HandlerError('A', a.changes[0], new Error('down')));
    expect(() => eachBatch(work, { onError: 'throw' } as never)).toThrow(/onFailure: 'throw'/);
    expect(() => eachBatch(work, { onError: 'report' } as never)).toThrow(/onFailure: 'skip'/);
  });

  it('types the batch from the stream and re-emits the same shape', () => {
    const seen: number[] = [];
    scheduler.run(({ cold, expectObservable }) => {
      const out = cold('-l|', { l: [a, b] }).pipe(
        eachBatch((x) => {
          expectTypeOf(x).toEqualTypeOf<ChangeBatch<Doc>>();
          seen.push(x.changes[0]?.document?.n ?? -1);
        }),
      );
      expectTypeOf(out).toEqualTypeOf<Observable<ChangeBatch<Doc>[]>>();
      expectObservable(out).toBe('-l|', { l: [a, b] });
    });
    expect(seen).toEqual([1, 1]);
  });

  it('rejects a concurrency that is not a positive integer', () => {
    for (const concurrency of [0, -1, 1.5, Number.NaN]) {
      expect(() => eachBatch(work, { concurrency })).toThrow(InvalidOptionsError);
    }
    expect(() => eachBatch(work, { concurrency: Infinity })).not.toThrow();
  });
});
