import { from, lastValueFrom, throwError, timer, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { mapPerPartition, perPartition } from '../../src/operators/internal/perPartitionInternals.js';
import { batch, type Doc } from './batches.js';

describe('perPartition (internals)', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  const a1 = batch('A', [1], { position: 'A1' });
  const b1 = batch('B', [1], { position: 'B1' });
  const a2 = batch('A', [2], { position: 'A2' });
  const c1 = batch('C', [1], { position: 'C1' });
  const frames: Record<string, number> = { A1: 1, B1: 5, A2: 1, C1: 1 };
  const work = (x: ChangeBatch<Doc>) => timer(frames[x.position] ?? 0);

  it('never emits an array ahead of an earlier value sharing a partition; unrelated values overtake', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const first = [a1, b1];
      const second = [a2];
      const third = [c1];
      const source = cold('-fst-------|', { f: first, s: second, t: third });
      expectObservable(source.pipe(perPartition(work, 4))).toBe(
                         '----t-(fs)-|', { f: first, s: second, t: third });
    });
  });

  it('passes empty arrays through at once: they hold no partition to keep in order', () => {
    scheduler.run(({ cold, expectObservable }) => {
      const empty: ChangeBatch<Doc>[] = [];
      expectObservable(cold('-ae----|', { a: [batch('A', [1], { position: 'B1' })], e: empty }).pipe(perPartition(work, 1))).toBe(
                            '--e---a|', { a: [batch('A', [1], { position: 'B1' })], e: empty });
    });
  });

  it('handles synchronous work and synchronous sources', async () => {
    const seen: string[] = [];
    const out = await lastValueFrom(
      from([a1, b1, a2, c1]).pipe(
        perPartition((x) => {
          seen.push(x.position);
        }, 2),
        toArray(),
      ),
    );
    expect(out).toEqual([a1, b1, a2, c1]);
    expect(seen).toEqual(['A1', 'B1', 'A2', 'C1']);
  });

  it('rebuilds values from projected batches, and errors when a projection yields nothing', async () => {
    const doubled = await lastValueFrom(
      from([[a1, b1]]).pipe(
        mapPerPartition((x: ChangeBatch<Doc>) => [x.mapDocuments((d) => d.n * 2)], 2),
        toArray(),
      ),
    );
    expect(doubled).toEqual([[a1.mapDocuments((d) => d.n * 2), b1.mapDocuments((d) => d.n * 2)]]);
    await expect(lastValueFrom(from([a1]).pipe(mapPerPartition(() => [], 1)))).rejects.toThrow(/produced no batch/);
  });

  it('errors the stream when work fails, and stops the other work in flight', () => {
    scheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const long = cold('------|');
      const boom = new Error('boom');
      const source = cold('-ab|', { a: a1, b: b1 });
      const failing = perPartition((x: ChangeBatch<Doc>) => (x === b1 ? throwError(() => boom) : long), 4);
      expectObservable(source.pipe(failing)).toBe(
                         '--#', undefined, boom);
      expectSubscriptions(long.subscriptions).toBe('-^!');
    });
  });

  it('lets a partition with a backlog take turns with the others (fairness)', () => {
    const started: string[] = [];
    scheduler.run(({ cold, expectObservable }) => {
      const out = cold('(abcd|)', { a: a1, b: a2, c: b1, d: c1 }).pipe(
        perPartition((x: ChangeBatch<Doc>) => {
          started.push(x.position);
          return timer(1);
        }, 1),
        toArray(),
      );
      expectObservable(out).toBe('----(x|)', { x: [a1, b1, c1, a2] });
    });
    // A1 runs, then A goes to the back of the line behind B and C, which were already waiting.
    expect(started).toEqual(['A1', 'B1', 'C1', 'A2']);
  });
});
