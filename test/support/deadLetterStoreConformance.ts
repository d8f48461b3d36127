import { describe, expect, it } from 'vitest';
import type { DeadLetter, DeadLetterWriter } from '../../src/deadletter/DeadLetter.js';
import type { DeadLetterStore } from '../../src/deadletter/DeadLetterSink.js';
import { redriveDeadLetters } from '../../src/deadletter/redriveDeadLetters.js';
import { DeadLetterFencedError } from '../../src/errors/index.js';

interface Order {
  id: string;
  total: number;
}

export function letter(leaseToken: string, lsn: number, fields: Partial<DeadLetter<Order>> = {}): DeadLetter<Order> {
  const documentId = fields.documentId ?? `o${lsn}`;
  return {
    id: `${leaseToken}:${lsn}:${documentId}`,
    leaseToken,
    lsn,
    documentId,
    operation: 'upsert',
    document: { id: documentId, total: lsn },
    partitionKey: documentId,
    error: { name: 'TypeError', message: `boom ${lsn}` },
    attempts: 3,
    epoch: 1,
    deadLetteredAtMs: 1_000 + lsn,
    ...fields,
  };
}

const writer = (leaseToken: string, epoch: number, minInclusive = '', maxExclusive = 'FF'): DeadLetterWriter => ({
  leaseToken,
  epoch,
  range: { minInclusive, maxExclusive },
});

/**
 * The one suite every {@link DeadLetterStore} passes: storage, idempotence, listing, removal, fencing by epoch
 * per key range, and re-driving. `open` gives a fresh, empty store.
 */
export function deadLetterStoreConformance(name: string, open: () => Promise<DeadLetterStore<Order>>): void {
  describe(`${name} (dead-letter store conformance)`, () => {
    it('stores letters with every field, lists them oldest first, filters by lease token and limits', async () => {
      const store = await open();
      await store.write([letter('1', 7), letter('0', 5)], writer('0', 1, '', '80'));
      await store.write([letter('1', 9, { deadLetteredAtMs: 500, partitionKey: undefined })], writer('1', 1, '80', 'FF'));
      const all = await store.list();
      expect(all.map((l) => l.id)).toEqual(['1:9:o9', '0:5:o5', '1:7:o7']);
      expect(all[1]).toEqual(letter('0', 5));
      expect(all[0]!.partitionKey).toBeUndefined();
      expect((await store.list({ leaseToken: '1' })).map((l) => l.lsn)).toEqual([9, 7]);
      expect((await store.list({ limit: 1 })).map((l) => l.lsn)).toEqual([9]);
    });

    it('keeps one letter per id when the same change is written again (a retry after a lost reply)', async () => {
      const store = await open();
      await store.write([letter('0', 5)], writer('0', 1));
      await store.write([letter('0', 5, { attempts: 9 })], writer('0', 1));
      const all = await store.list();
      expect(all).toHaveLength(1);
      expect(all[0]!.attempts).toBe(3);
    });

    it('removes letters by id and ignores unknown ids', async () => {
      const store = await open();
      await store.write([letter('0', 1), letter('0', 2), letter('0', 3)], writer('0', 1));
      await store.remove(['0:2:o2', 'nope']);
      expect((await store.list()).map((l) => l.lsn)).toEqual([1, 3]);
    });

    it('fences by epoch per key range: a deposed owner or a split parent is refused, a sibling range is not', async () => {
      const store = await open();
      // A split child of [,FF) took [,80) at epoch 3; the parent's old owner (epoch 2) is refused on its whole range.
      await store.write([], writer('child-a', 3, '', '80'));
      await expect(store.write([letter('parent', 10)], writer('parent', 2))).rejects.toThrow(DeadLetterFencedError);
      // The other child, on a disjoint range, is not affected by its sibling's epoch.
      await store.write([letter('child-b', 11)], writer('child-b', 1, '80', 'FF'));
      // An owner at a lower epoch on the same range is refused even though its write stores nothing.
      await expect(store.write([], writer('child-a', 2, '', '80'))).rejects.toThrow(/epoch 2 is below 3/);
      expect((await store.list()).map((l) => l.leaseToken)).toEqual(['child-b']);
    });

    it('refuses a split parent taken again at its child\'s epoch once the child wrote; siblings at one epoch both write', async () => {
      const store = await open();
      // Children of [,FF) were created at the parent's epoch 1 and taken at 2; the parent, taken again, is at 2 too.
      await store.write([letter('child-a', 10)], writer('child-a', 2, '', '80'));
      await store.write([letter('child-b', 11)], writer('child-b', 2, '80', 'FF'));
      await expect(store.write([letter('parent', 12)], writer('parent', 2))).rejects.toMatchObject({ name: 'DeadLetterFencedError', epoch: 2, currentEpoch: 2 });
      await expect(store.write([], writer('parent', 2))).rejects.toThrow(DeadLetterFencedError);
      // The children write on at their epoch.
      await store.write([letter('child-a', 13)], writer('child-a', 2, '', '80'));
      expect((await store.list()).map((l) => `${l.leaseToken}@${l.lsn}`).sort()).toEqual(['child-a@10', 'child-a@13', 'child-b@11']);
    });

    it('keeps one letter per change along a lineage: a split child re-running its parent\'s change adds none', async () => {
      const store = await open();
      // The parent [,FF) dead-lettered its change at LSN 5, but its checkpoint did not pass it before the split.
      await store.write([letter('P', 5)], writer('P', 1));
      // Child L [,80) reads the change again (same LSN, document and partition key), fails on it, dead-letters it.
      await store.write([letter('L', 5, { epoch: 2 }), letter('L', 6, { epoch: 2 })], writer('L', 2, '', '80'));
      // Partition Q [FF,FFFF), of another lineage, dead-letters another document of the same id at the same LSN.
      await store.write([letter('Q', 5, { partitionKey: 'other' })], writer('Q', 1, 'FF', 'FFFF'));
      const all = await store.list();
      expect(all.map((l) => l.id).sort()).toEqual(['L:6:o6', 'P:5:o5', 'Q:5:o5']);
      expect(all.find((l) => l.id === 'P:5:o5')).toEqual(letter('P', 5));
      await store.remove(['P:5:o5', 'Q:5:o5']);
      expect((await store.list()).map((l) => l.id)).toEqual(['L:6:o6']);
    });

    it('a refused write stores none of its letters, and a write that changes nothing still raises the fence', async () => {
      const store = await open();
      await store.write([letter('P', 1)], writer('P', 1));
      await store.write([], writer('L', 2, '', '80')); // the child's write with no letters fences the parent ...
      await expect(store.write([letter('P', 2), letter('P', 3)], writer('P', 1))).rejects.toBeInstanceOf(DeadLetterFencedError);
      expect((await store.list()).map((l) => l.id)).toEqual(['P:1:o1']);
      // ... and a merge of [,FF) and [FF,FFFF) at epoch 3 fences both parents.
      await store.write([], writer('M', 3, '', 'FFFF'));
      await expect(store.write([letter('L', 4)], writer('L', 2, '', '80'))).rejects.toMatchObject({ epoch: 2, currentEpoch: 3 });
      await expect(store.write([letter('Q', 4)], writer('Q', 2, 'FF', 'FFFF'))).rejects.toBeInstanceOf(DeadLetterFencedError);
      expect((await store.list()).map((l) => l.id)).toEqual(['P:1:o1']);
    });

    it('re-drives letters: removed when the handler succeeds, kept when it fails again', async () => {
      const store = await open();
      await store.write([letter('0', 1), letter('0', 2), letter('0', 3)], writer('0', 1));
      const seen: number[] = [];
      const result = await redriveDeadLetters({
        store,
        handler: (l) => {
          seen.push(l.lsn);
          if (l.lsn === 2) throw new Error('still broken');
        },
      });
      expect(seen).toEqual([1, 2, 3]);
      expect(result.redriven).toEqual(['0:1:o1', '0:3:o3']);
      expect(result.failed.map((f) => f.id)).toEqual(['0:2:o2']);
      expect((await store.list()).map((l) => l.lsn)).toEqual([2]);
    });
  });
}
