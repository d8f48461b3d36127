/**
 * CosmosSource keeps one SDK iterator per partition and evicts the least recently used past its bound (twice the
 * live partitions, at least 1,024). An evicted partition's next read builds a new iterator from the position it
 * asks for: these tests bound the cache to one iterator (`limitIteratorCache`), so that every read of another
 * partition evicts, and check that each rebuilt iterator continues exactly where the evicted one stood, with
 * nothing lost, repeated or reordered, also over a split and over the EPK-range parts of a merged range.
 */
import type { Container } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Partition, StartFrom } from '../../src/core/Partition.js';
import { PartitionGoneError } from '../../src/errors/index.js';
import { limitIteratorCache } from '../../src/sources/cosmos/iteratorCache.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { needsEmulator, startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { drainPartition, freshContainer, writeDocs, type Doc } from '../cosmos/helpers.js';

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

/** A page's changes as `id@lsn`, in the order read. */
const keys = (changes: readonly { id: string; lsn: number }[]): string[] => changes.map((c) => `${c.id}@${c.lsn}`);

/** What a fresh source with the default bound reads of `partition` from `from`, in order. */
async function reference(container: Container, partition: Partition, from: StartFrom): Promise<string[]> {
  return keys((await drainPartition(new CosmosSource<Doc>(container), partition, from, 100)).changes);
}

/**
 * Reads `partitions` in turn, `pageSize` changes at a time, each from where its last read ended (or `starts`),
 * until a whole round reads nothing; `between` runs after each round (more writes). Returns what each read.
 */
async function roundRobin(
  source: CosmosSource<Doc>,
  partitions: readonly Partition[],
  starts: ReadonlyMap<string, StartFrom>,
  pageSize: number,
  between: (round: number) => Promise<void> = async () => undefined,
): Promise<Map<string, string[]>> {
  const read = new Map(partitions.map((p) => [p.id, [] as string[]]));
  const from = new Map(starts);
  // A partition that keeps answering changes it answered before never runs dry: give up well before the test's timeout.
  for (let round = 0; round < 100; round++) {
    let any = false;
    for (const partition of partitions) {
      const page = await source.read({ partition, from: from.get(partition.id) ?? 'beginning', maxItemCount: pageSize });
      read.get(partition.id)!.push(...keys(page.changes));
      from.set(partition.id, { position: page.position });
      any ||= page.changes.length > 0;
    }
    await between(round);
    if (!any && round >= 3) return read;
  }
  throw new Error(`still reading after 100 rounds: ${[...read].map(([id, got]) => `${id}: ${got.length}`).join(', ')}`);
}

describe('CosmosSource: an evicted iterator is rebuilt where it stood', () => {
  it('bound 1 over four partitions: every read rebuilds, and each partition reads exactly its log in order', async () => {
    const container = await freshContainer(cosmos.client, 'evict');
    await writeDocs(container, 120, 'a');
    const source = new CosmosSource<Doc>(container);
    const evicted: string[] = [];
    limitIteratorCache(source, 1, (id) => evicted.push(id));
    const partitions = await source.listPartitions();
    expect(partitions.length).toBeGreaterThan(1);
    // Writes land between rounds, so rebuilt iterators also meet changes made after their position was read.
    const read = await roundRobin(source, partitions, new Map(), 7, async (round) => {
      if (round < 3) await writeDocs(container, 30, `b${round}-`);
    });
    for (const partition of partitions) {
      const expected = await reference(container, partition, 'beginning');
      expect(expected.length).toBeGreaterThan(0);
      expect(read.get(partition.id)).toEqual(expected);
    }
    // Each read of the next partition evicted the one before: the listing's partitions, round after round.
    expect(evicted.length).toBeGreaterThan(4 * partitions.length);
    expect(new Set(evicted)).toEqual(new Set(partitions.map((p) => p.id)));
  });

  it('a bound as large as the partitions read evicts nothing; the listing does not resize a set bound', async () => {
    const container = await freshContainer(cosmos.client, 'evict-none');
    await writeDocs(container, 40, 'a');
    const source = new CosmosSource<Doc>(container);
    const evicted: string[] = [];
    limitIteratorCache(source, 2, (id) => evicted.push(id));
    const partitions = await source.listPartitions();
    await roundRobin(source, partitions.slice(0, 2), new Map(), 5);
    expect(evicted).toEqual([]);
    await roundRobin(source, partitions.slice(0, 3), new Map(), 5);
    expect(evicted.length).toBeGreaterThan(0);
  });

  it('refuses a bound below 1 and anything but a CosmosSource', async () => {
    const container = await freshContainer(cosmos.client, 'evict-bad');
    expect(() => limitIteratorCache(new CosmosSource<Doc>(container), 0)).toThrow(/maxIterators/);
    expect(() => limitIteratorCache({}, 1)).toThrow(/CosmosSource/);
  });

  it('a split while evicted: the rebuilt parent iterator reports it gone; the children, evicting each other, continue from its position', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'splitting a range', ctx);
    const container = await freshContainer(cosmos.client, 'evict-split');
    await writeDocs(container, 200, 'a');
    const source = new CosmosSource<Doc>(container);
    const evicted: string[] = [];
    limitIteratorCache(source, 1, (id) => evicted.push(id));
    const [, target, other] = await source.listPartitions();
    let page = await source.read({ partition: target!, from: 'beginning', maxItemCount: 10 });
    const before = keys(page.changes);
    page = await source.read({ partition: target!, from: { position: page.position }, maxItemCount: 10 });
    before.push(...keys(page.changes));
    const stood = page.position;
    await source.read({ partition: other!, from: 'beginning', maxItemCount: 10 });
    expect(evicted).toEqual([target!.id]);
    const [left, right] = emulator.split('db', container.id, target!.id).map((r) => ({ id: r.id, range: { minInclusive: r.minInclusive, maxExclusive: r.maxExclusive }, parents: [target!.id] }));
    await writeDocs(container, 100, 'b');
    await expect(source.read({ partition: target!, from: { position: stood }, maxItemCount: 10 })).rejects.toThrow(PartitionGoneError);
    const starts = new Map<string, StartFrom>([
      [left!.id, { position: stood }],
      [right!.id, { position: stood }],
    ]);
    const read = await roundRobin(source, [left!, right!], starts, 6, async (round) => {
      if (round < 2) await writeDocs(container, 40, `c${round}-`);
    });
    expect(evicted.filter((id) => id === left!.id || id === right!.id).length).toBeGreaterThan(4);
    for (const child of [left!, right!]) {
      const expected = await reference(container, child, { position: stood });
      expect(read.get(child.id)).toEqual(expected);
      const lsns = expected.map((k) => Number(k.split('@')[1]));
      expect(lsns[0]).toBeGreaterThan(Number(stood.replace(/"/g, '')));
    }
    // Before the split and after it, together: the parent's range whole, nothing twice.
    const got = [...before, ...read.get(left!.id)!, ...read.get(right!.id)!];
    const all = [...(await reference(container, left!, 'beginning')), ...(await reference(container, right!, 'beginning'))];
    expect(new Set(got).size).toBe(got.length);
    expect([...got].sort()).toEqual([...all].sort());
  });

  it('EPK-range parts of a merged range, evicting each other: each continues from its parent position with only its keys', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'merging ranges', ctx);
    const container = await freshContainer(cosmos.client, 'evict-merge');
    await writeDocs(container, 200, 'a');
    const source = new CosmosSource<Doc>(container);
    const evicted: string[] = [];
    limitIteratorCache(source, 1, (id) => evicted.push(id));
    const [, p1, p2] = await source.listPartitions();
    const before: string[] = [];
    const stood = new Map<string, string>();
    for (const p of [p1!, p2!]) {
      const page = await source.read({ partition: p, from: 'beginning', maxItemCount: 15 });
      before.push(...keys(page.changes));
      stood.set(p.id, page.position);
    }
    expect(evicted).toEqual([p1!.id]);
    const merged = emulator.merge('db', container.id, p1!.id, p2!.id);
    await writeDocs(container, 100, 'b');
    for (const p of [p1!, p2!]) {
      await expect(source.read({ partition: p, from: { position: stood.get(p.id)! }, maxItemCount: 10 })).rejects.toThrow(PartitionGoneError);
    }
    // The leases of the parents go on as EPK-range parts of the merged range, id `<min>-<max>`, from their positions.
    const parts = [p1!, p2!].map((p) => ({ id: `${p.range.minInclusive}-${p.range.maxExclusive}`, range: p.range }));
    const starts = new Map<string, StartFrom>(parts.map((part, i) => [part.id, { position: stood.get([p1!, p2!][i]!.id)! }]));
    const read = await roundRobin(source, parts, starts, 6, async (round) => {
      if (round < 2) await writeDocs(container, 40, `c${round}-`);
    });
    expect(evicted.filter((id) => parts.some((p) => p.id === id)).length).toBeGreaterThan(4);
    for (const part of parts) {
      expect(read.get(part.id)).toEqual(await reference(container, part, starts.get(part.id)!));
      expect(read.get(part.id)!.length).toBeGreaterThan(0);
    }
    // Together with what was read before the merge: the merged range whole, nothing twice.
    const got = [...before, ...parts.flatMap((p) => read.get(p.id)!)];
    const mergedPartition = { id: merged.id, range: { minInclusive: merged.minInclusive, maxExclusive: merged.maxExclusive } };
    const all = await reference(container, mergedPartition, 'beginning');
    expect(new Set(got).size).toBe(got.length);
    expect([...got].sort()).toEqual([...all].sort());
  });
});
