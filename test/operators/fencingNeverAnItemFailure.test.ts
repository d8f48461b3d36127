/**
 * A fencing error thrown inside user code (`ViewFencedError`, `LeaseLostError`: another host owns the
 * partition now) is never an item failure, in any operator: the batch is handed back to its reader with the
 * error (credit returned, ownership ended), never retried change by change, skipped or dead-lettered.
 */
import { concatMap, from, lastValueFrom, type OperatorFunction, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { LeaseLostError, MemoryDeadLetterStore, ViewFencedError } from '../../src/index.js';
import { eachBatch } from '../../src/operators/eachBatch.js';
import { eachChange } from '../../src/operators/eachChange.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { batch, type Doc, recordingTracker } from './batches.js';

const fence = new ViewFencedError('A', 1, 2);
const deadLetter = new MemoryDeadLetterStore<Doc>();
const policies = [undefined, 'skip', 'throw', { deadLetter }] as const;

/** Operators whose user code throws the fence for change 2; `calls` counts the changes user code saw. */
function operators(calls: number[]): [string, (onFailure: (typeof policies)[number]) => OperatorFunction<ChangeBatch<Doc>, ChangeBatch<unknown>>][] {
  const touch = (c: Change<Doc>) => {
    calls.push(c.document!.n);
    if (c.document!.n === 2) throw fence;
  };
  const options = (onFailure: (typeof policies)[number]) => (onFailure === undefined ? {} : { onFailure });
  return [
    ['mapChanges', (f) => mapChanges((c: Change<Doc>) => (touch(c), c), options(f))],
    ['filterChanges', (f) => filterChanges((c: Change<Doc>) => (touch(c), true), options(f))],
    ['eachBatch', (f) => eachBatch((b: ChangeBatch<Doc>) => void b.changes.forEach(touch), options(f))],
    ['eachChange', (f) => eachChange(concatMap(async (c: Change<Doc>) => (touch(c), c)), options(f))],
  ];
}

describe('a fencing error in user code', () => {
  for (const onFailure of policies) {
    it(`drops the batch for the new owner in every operator (onFailure ${JSON.stringify(onFailure === undefined ? 'default' : typeof onFailure === 'object' ? 'deadLetter' : onFailure)})`, async () => {
      const calls: number[] = [];
      for (const [name, operator] of operators(calls)) {
        calls.length = 0;
        const tracker = recordingTracker('A');
        const out = await lastValueFrom(from([batch('A', [1, 2, 3], { tracker })]).pipe(operator(onFailure), toArray()));
        expect([name, out]).toEqual([name, []]);
        expect([name, tracker.dropped]).toEqual([name, [[1, fence]]]);
        // Reported once, as fencing (the error itself, not a HandlerError around it).
        expect([name, tracker.errors]).toEqual([name, [fence]]);
        // Not retried change by change: change 2 was attempted once (in the batch run).
        expect([name, calls.filter((n) => n === 2)]).toEqual([name, [2]]);
      }
      expect(deadLetter.size).toBe(0);
    });
  }

  it('is recognised through a cause chain', async () => {
    const tracker = recordingTracker('A');
    const lost = new LeaseLostError('A', 'me', 'other');
    const wrapped = new Error('client wrapped it', { cause: lost });
    const out = await lastValueFrom(
      from([batch('A', [1], { tracker })]).pipe(
        eachBatch(() => {
          throw wrapped;
        }),
        toArray(),
      ),
    );
    expect(out).toEqual([]);
    expect(tracker.dropped).toEqual([[1, lost]]);
  });
});
