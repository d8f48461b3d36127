import { TestScheduler } from 'rxjs/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import { flattenChanges } from '../../src/operators/flattenChanges.js';
import { batch } from './batches.js';

describe('flattenChanges', () => {
  let scheduler: TestScheduler;
  beforeEach(() => {
    scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  });

  it('emits the changes of batches and arrays of batches in order, and nothing for empty ones', () => {
    const a = batch('A', [1, 2]);
    const e = batch('A', [], { position: 'A@2' });
    const l = [batch('B', [3]), batch('C', [4])];
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold('-a--e-l---|', { a, e, l }).pipe(flattenChanges())).toBe(
                            '-(xy)-(zw)|', { x: a.changes[0], y: a.changes[1], z: l[0]!.changes[0], w: l[1]!.changes[0] });
    });
  });

  it('unsubscribes from the source', () => {
    const a = batch('A', [1]);
    scheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('-a-a-a-|', { a });
      const sub =        '^--!';
      expectObservable(source.pipe(flattenChanges()), sub).toBe(
                         '-x-', { x: a.changes[0] });
      expectSubscriptions(source.subscriptions).toBe(sub);
    });
  });
});
