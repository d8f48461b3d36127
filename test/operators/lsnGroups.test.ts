/**
 * Every operator's `onFailure` isolates failures by LSN group: changes sharing an LSN (a transactional batch,
 * a merged partition's parents) are retried together, and a change given up on takes its LSN group with it
 * (skipped, dead-lettered). Batches here: `[a@1, b@2, c@2, d@3]`, where b and c share LSN 2.
 */
import { concatMap, lastValueFrom, of } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { HandlerError } from '../../src/errors/index.js';
import { eachBatch } from '../../src/operators/eachBatch.js';
import { eachChange } from '../../src/operators/eachChange.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { VirtualClock } from '../support/faults/index.js';
import { change, type Doc, recordingTracker } from './batches.js';

/** `[a@1, b@2, c@2, d@3]` of partition p0, with a recording tracker. */
function transactional() {
  const tracker = recordingTracker('p0');
  const changes = [change('a', 1, 1), change('b', 2, 2), change('c', 3, 2), change('d', 4, 3)];
  const batch = new ChangeBatch<Doc>({ partition: 'p0', changes, position: 'p0@3', origin: { tracker, sequence: 1, readCount: 4 } });
  return { tracker, batch };
}

const ids = (b: ChangeBatch<unknown>) => b.changes.map((c) => c.id);
const failingOn = (id: string) => (c: Change<Doc>) => {
  if (c.id === id) throw new Error(`cannot take ${id} (injected)`);
  return c;
};

describe('onFailure isolates by LSN group', () => {
  it('mapChanges, skip: a change given up on takes the other change of its LSN out with it, both reported', async () => {
    const { tracker, batch } = transactional();
    const clock = new VirtualClock();
    const out = await lastValueFrom(of(batch).pipe(mapChanges(failingOn('c'), { onFailure: { retry: { attempts: 1 }, skip: true, scheduler: clock } })));
    expect(ids(out)).toEqual(['a', 'd']);
    expect(tracker.errors.map((e) => (e as HandlerError).change?.id)).toEqual(['b', 'c']);
    expect(tracker.errors.every((e) => e instanceof HandlerError && (e.cause as Error).message === 'cannot take c (injected)')).toBe(true);
  });

  it('filterChanges, dead letters: the whole LSN group is dead-lettered, with the error that gave it up', async () => {
    const { batch } = transactional();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const clock = new VirtualClock();
    const out = await lastValueFrom(
      of(batch).pipe(filterChanges((c) => failingOn('b')(c) !== undefined, { onFailure: { retry: { attempts: 1 }, deadLetter, scheduler: clock } })),
    );
    expect(ids(out)).toEqual(['a', 'd']);
    const letters = await deadLetter.list();
    expect(letters.map((l) => `${l.documentId}@${l.lsn}`)).toEqual(['b@2', 'c@2']);
    expect(letters.map((l) => l.error.message)).toEqual(['cannot take b (injected)', 'cannot take b (injected)']);
  });

  it('eachBatch: a failed batch is run again LSN group by LSN group, a group failing for good dead-lettered whole', async () => {
    const { batch } = transactional();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const clock = new VirtualClock();
    const calls: string[][] = [];
    const out = await lastValueFrom(
      of(batch).pipe(
        eachBatch(
          (b) => {
            calls.push(ids(b));
            if (b.changes.some((c) => c.id === 'c')) throw new Error('cannot take c (injected)');
          },
          { onFailure: { retry: { attempts: 1 }, deadLetter, scheduler: clock } },
        ),
      ),
    );
    expect(calls).toEqual([['a', 'b', 'c', 'd'], ['a'], ['b', 'c'], ['d']]);
    expect(ids(out)).toEqual(['a', 'd']);
    expect((await deadLetter.list()).map((l) => `${l.documentId}@${l.lsn}`)).toEqual(['b@2', 'c@2']);
  });

  it('eachChange, skip: the changes of one LSN go through the chain again together, and are left out together', async () => {
    const { tracker, batch } = transactional();
    const clock = new VirtualClock();
    const runs: string[][] = [];
    const out = await lastValueFrom(
      of(batch).pipe(
        eachChange(
          (changes$) => {
            const run: string[] = [];
            runs.push(run);
            return changes$.pipe(concatMap((c) => (run.push(c.id), of(failingOn('b')(c)))));
          },
          { onFailure: { retry: { attempts: 1 }, skip: true, scheduler: clock } },
        ),
      ),
    );
    expect(runs).toEqual([['a', 'b'], ['a'], ['b'], ['d']]);
    expect(ids(out)).toEqual(['a', 'd']);
    expect(tracker.errors.map((e) => (e as HandlerError).change?.id)).toEqual(['b', 'c']);
  });
});
