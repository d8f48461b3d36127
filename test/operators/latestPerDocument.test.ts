import { map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { latestPerDocument } from '../../src/operators/latestPerDocument.js';
import { batch, type Doc } from './batches.js';

const c = (id: string, lsn: number, partitionKey?: unknown, operation: Change<Doc>['operation'] = 'upsert'): Change<Doc> => ({
  id,
  operation,
  document: operation === 'delete' ? undefined : { n: lsn },
  lsn,
  timestampMs: lsn,
  ...(partitionKey !== undefined ? { partitionKey } : {}),
});

const lsns = (b: ChangeBatch<Doc>) => b.changes.map((x) => x.lsn);

describe('latestPerDocument', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  it('keeps the last change per document, in feed order, and keeps the position', () => {
    const a = new ChangeBatch<Doc>({
      partition: 'p0',
      position: 'p0@6',
      changes: [c('x', 1), c('y', 2), c('x', 3), c('z', 4), c('y', 5, undefined, 'delete'), c('x', 6)],
    });
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold('-a|', { a }).pipe(latestPerDocument(), map((b) => [b.position, lsns(b)]))).toBe(
                            '-x|', { x: ['p0@6', [4, 5, 6]] });
    });
  });

  it('tells documents with the same id apart by partition key, and leaves batches without repeats as they are', () => {
    const a = new ChangeBatch<Doc>({
      partition: 'p0',
      position: 'p0@4',
      changes: [c('x', 1, 'tenant-a'), c('x', 2, 'tenant-b'), c('x', 3, ['tenant', 1]), c('x', 4, 'tenant-a')],
    });
    const plain = batch('p1', [1, 2, 3]);
    const out: ChangeBatch<Doc>[] = [];
    scheduler.run(({ cold }) => {
      cold('ab|', { a, b: plain }).pipe(latestPerDocument()).subscribe((b) => out.push(b));
    });
    expect(lsns(out[0]!)).toEqual([2, 3, 4]);
    expect(out[1]).toBe(plain);
  });

  it('compacts each batch of an array and unsubscribes from the source', () => {
    const a = new ChangeBatch<Doc>({ partition: 'p0', position: 'p0@2', changes: [c('x', 1), c('x', 2)] });
    const b = new ChangeBatch<Doc>({ partition: 'p1', position: 'p1@1', changes: [c('x', 1)] });
    scheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('-l-l-l|', { l: [a, b] });
      const sub =        '^--!';
      expectObservable(source.pipe(latestPerDocument(), map((l) => l.map(lsns))), sub).toBe(
                         '-x-', { x: [[2], [1]] });
      expectSubscriptions(source.subscriptions).toBe(sub);
    });
  });
});
