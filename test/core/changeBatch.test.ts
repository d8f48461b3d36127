import { lastValueFrom, of } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { mapDocuments } from '../../src/operators/mapDocuments.js';
import { latestPerDocument } from '../../src/operators/latestPerDocument.js';
import { change, type Doc } from '../operators/batches.js';

const range = { minInclusive: '', maxExclusive: '80' };
const read = (lsns: number[]) =>
  new ChangeBatch<Doc>({ partition: 'p0', changes: lsns.map((n) => change(`d${n % 2}`, n)), position: 'p0@x', epoch: 3, range });

describe('ChangeBatch.readLsn', () => {
  it('is the LSN of the last change read, from the changes given at construction', () => {
    expect(read([4, 7, 9]).readLsn).toBe(9);
    expect(read([]).readLsn).toBeUndefined();
    expect(new ChangeBatch<Doc>({ partition: 'p0', changes: [change('a', 2)], position: 'x', readLsn: 5 }).readLsn).toBe(5);
  });

  it('survives filter, map, withChanges and the rxfeed operators, while lastLsn follows the changes left', async () => {
    const batch = read([4, 7, 9]);
    const emptied = batch.filter(() => false);
    expect(emptied.lastLsn).toBeUndefined();
    expect(emptied.readLsn).toBe(9);
    expect(batch.filter((c) => c.lsn < 8).lastLsn).toBe(7);
    expect(batch.filter((c) => c.lsn < 8).readLsn).toBe(9);
    expect(batch.map((c) => c).readLsn).toBe(9);
    expect(batch.withChanges([]).readLsn).toBe(9);
    const piped = await lastValueFrom(
      of(batch).pipe(
        mapDocuments((d) => ({ n: d.n + 1 })),
        latestPerDocument(),
        filterChanges(() => false),
      ),
    );
    expect(piped).toMatchObject({ readLsn: 9, lastLsn: undefined, epoch: 3, range, position: 'p0@x' });
  });
});
