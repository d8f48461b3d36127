import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemorySource } from '../../src/sources/MemorySource.js';
import {
  InvalidOptionsError,
  PartitionGoneError,
  ResourceGoneError,
  TransientError,
} from '../../src/errors/index.js';
import type { Partition } from '../../src/core/Partition.js';

interface Doc {
  id: string;
  n: number;
}

async function readAll(source: MemorySource<Doc>, partition: Partition, maxItemCount = 1000) {
  const all = [];
  let from: Parameters<MemorySource<Doc>['read']>[0]['from'] = 'beginning';
  for (;;) {
    const page = await source.read({ partition, from, maxItemCount });
    all.push(...page.changes);
    from = { position: page.position };
    if (page.changes.length < maxItemCount) return { changes: all, position: page.position };
  }
}

describe('MemorySource', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('splits the key space into N contiguous ranges with ids 0..N-1', async () => {
    const source = new MemorySource<Doc>({ partitions: 3 });
    const parts = await source.listPartitions();
    expect(parts.map((p) => p.id)).toEqual(['0', '1', '2']);
    expect(parts[0]!.range.minInclusive).toBe('');
    expect(parts[2]!.range.maxExclusive).toBe('FF');
    expect(parts[0]!.range.maxExclusive).toBe(parts[1]!.range.minInclusive);
    expect(parts[1]!.range.maxExclusive).toBe(parts[2]!.range.minInclusive);
  });

  it('routes documents by partition key, numbers changes per partition and pages them', async () => {
    const source = new MemorySource<Doc>({ partitions: 4 });
    for (let i = 0; i < 200; i++) source.write({ id: `d${i}`, n: i });
    const parts = await source.listPartitions();
    let total = 0;
    for (const p of parts) {
      const page = await source.read({ partition: p, from: 'beginning', maxItemCount: 10 });
      const lsns = page.changes.map((c) => c.lsn);
      if (source.latestLsn(p.id) > 0) expect(lsns[0]).toBe(1);
      expect(lsns).toEqual([...lsns].sort((a, b) => a - b));
      expect(page.changes.length).toBeLessThanOrEqual(10);
      const all = await readAll(source, p, 7);
      total += all.changes.length;
      expect(all.changes.every((c) => source.partitionFor(c.id) === p.id)).toBe(true);
    }
    expect(total).toBe(200);
    // every partition got some of 200 random-ish keys
    expect(parts.every((p) => source.latestLsn(p.id) > 0)).toBe(true);
  });

  it('latestVersion mode: only the latest version of each document, as upsert, no deletes', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    source.write({ id: 'a', n: 1 });
    source.write({ id: 'b', n: 1 });
    source.write({ id: 'a', n: 2 });
    source.delete('b');
    const [p] = await source.listPartitions();
    const page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 100 });
    expect(page.changes.map((c) => [c.id, c.operation, c.document?.n, c.lsn])).toEqual([['a', 'upsert', 2, 3]]);
    expect(page.position).toBe((await source.read({ partition: p!, from: 'now', maxItemCount: 1 })).position);
    expect(page.latestLsn).toBe(4);
  });

  it('allVersionsAndDeletes mode: every create, replace and delete, with the previous image on deletes', async () => {
    const source = new MemorySource<Doc>({ partitions: 1, mode: 'allVersionsAndDeletes' });
    source.create({ id: 'a', n: 1 });
    source.replace({ id: 'a', n: 2 });
    source.delete('a', { timeToLiveExpired: true });
    const [p] = await source.listPartitions();
    const page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 100 });
    expect(page.changes.map((c) => [c.operation, c.document?.n, c.previous?.n, c.lsn])).toEqual([
      ['create', 1, undefined, 1],
      ['replace', 2, undefined, 2],
      ['delete', undefined, 2, 3],
    ]);
    expect(page.changes[2]!.timeToLiveExpired).toBe(true);
    expect(() => source.replace({ id: 'zz', n: 0 })).toThrow(/does not exist/);
  });

  it("starts from 'now' (position only), a Date, and a stored position", async () => {
    let clock = 1_000;
    const source = new MemorySource<Doc>({ partitions: 1, now: () => clock });
    const [p] = await source.listPartitions();
    source.write({ id: 'a', n: 1 });
    clock = 2_000;
    source.write({ id: 'b', n: 1 });
    const now = await source.read({ partition: p!, from: 'now', maxItemCount: 10 });
    expect(now.changes).toEqual([]);
    source.write({ id: 'c', n: 1 });
    const after = await source.read({ partition: p!, from: { position: now.position }, maxItemCount: 10 });
    expect(after.changes.map((c) => c.id)).toEqual(['c']);
    const byTime = await source.read({ partition: p!, from: new Date(1_500), maxItemCount: 10 });
    expect(byTime.changes.map((c) => c.id)).toEqual(['b', 'c']);
    expect(byTime.changes.map((c) => c.timestampMs)).toEqual([2_000, 2_000]);
    await expect(source.read({ partition: p!, from: { position: 'bogus' }, maxItemCount: 1 })).rejects.toThrow(
      /not made by a MemorySource/,
    );
  });

  it('effectivePartitionKey: the point of the key space a key routes by, in the range of its partition through splits and merges', () => {
    const source = new MemorySource<Doc>({ partitions: 3 });
    const ids = Array.from({ length: 100 }, (_, i) => `d${i}`);
    const inRangeOfItsPartition = () =>
      ids.every((id) => {
        const key = source.effectivePartitionKey(id);
        const { range } = source.partitions().find((p) => p.id === source.partitionFor(id))!;
        return range.minInclusive <= key && key < range.maxExclusive;
      });
    expect(inRangeOfItsPartition()).toBe(true);
    source.split('1');
    expect(inRangeOfItsPartition()).toBe(true);
    source.merge('0', source.partitions()[1]!.id);
    expect(inRangeOfItsPartition()).toBe(true);
    // The same key, whatever the topology; hex as feed range bounds are written.
    expect(source.effectivePartitionKey('d1')).toBe(new MemorySource<Doc>({ partitions: 1 }).effectivePartitionKey('d1'));
    expect(source.effectivePartitionKey('d1')).toMatch(/^[0-9A-F]{8}$/);
  });

  it('split: the parent is gone, children continue its LSN numbering and log from a parent position', async () => {
    const source = new MemorySource<Doc>({ partitions: 1, mode: 'allVersionsAndDeletes' });
    for (let i = 0; i < 50; i++) source.write({ id: `d${i}`, n: i });
    const [parent] = await source.listPartitions();
    const firstPage = await source.read({ partition: parent!, from: 'beginning', maxItemCount: 20 });
    const [left, right] = source.split('0');
    expect(left.parents).toEqual(['0']);
    expect(left.range.minInclusive).toBe(parent!.range.minInclusive);
    expect(left.range.maxExclusive).toBe(right.range.minInclusive);
    expect(right.range.maxExclusive).toBe(parent!.range.maxExclusive);
    expect((await source.listPartitions()).map((p) => p.id)).toEqual([left.id, right.id]);
    await expect(source.read({ partition: parent!, from: 'beginning', maxItemCount: 1 })).rejects.toBeInstanceOf(
      PartitionGoneError,
    );
    for (let i = 50; i < 100; i++) source.write({ id: `d${i}`, n: i });
    const seen = new Set(firstPage.changes.map((c) => c.id));
    for (const child of [left, right]) {
      const page = await source.read({ partition: child, from: { position: firstPage.position }, maxItemCount: 1000 });
      expect(page.changes.every((c) => c.lsn > 20)).toBe(true);
      for (const c of page.changes) {
        expect(seen.has(c.id)).toBe(false);
        seen.add(c.id);
      }
    }
    expect(seen.size).toBe(100);
    expect(source.latestLsn(left.id) + source.latestLsn(right.id)).toBeGreaterThan(100);
  });

  it('merge: both parents are gone, the child holds both logs and continues above both LSNs', async () => {
    const source = new MemorySource<Doc>({ partitions: 2, mode: 'allVersionsAndDeletes' });
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}`, n: i });
    const [left] = source.partitions();
    const leftPosition = (await readAll(source, left!)).position;
    const merged = source.merge('0', '1');
    expect(merged.parents).toEqual(['0', '1']);
    expect(merged.range).toEqual({ minInclusive: '', maxExclusive: 'FF' });
    expect(source.partitions()).toEqual([merged]);
    await expect(source.read({ partition: left!, from: 'beginning', maxItemCount: 10 })).rejects.toBeInstanceOf(PartitionGoneError);
    const after = source.write({ id: 'late', n: 99 });
    expect(after.lsn).toBe(Math.max(source.latestLsn('0'), source.latestLsn('1')) + 1);
    // The whole child, page by page (pages never split the parents' equal LSNs): every change once.
    const all = await readAll(source, merged, 3);
    expect(all.changes.map((c) => c.id).sort()).toEqual([...Array.from({ length: 40 }, (_, i) => `d${i}`), 'late'].sort());
    // A parent's lease goes on as an EPK-range partition from the parent's position: only its part, only what is new.
    const epk: Partition = { id: `${left!.range.minInclusive}-${left!.range.maxExclusive}`, range: left!.range };
    const rest = await readAll(source, epk, 2);
    const before = new MemorySource<Doc>({ partitions: 2 }); // the same key space, unmerged
    expect(rest.changes.length).toBeGreaterThan(0);
    expect(rest.changes.every((c) => before.partitionFor(c.id) === left!.id)).toBe(true);
    const fromPosition = await source.read({ partition: epk, from: { position: leftPosition }, maxItemCount: 100 });
    expect(fromPosition.changes.map((c) => c.id)).toEqual(rest.changes.filter((c) => c.id === 'late').map((c) => c.id));
    expect(await source.positionAt(epk, 'now')).toBe(`mem:${after.lsn}`);
    // Cut by a split of the merged child inside the EPK range: gone.
    const [a] = source.split(merged.id);
    const cut: Partition = { id: `${a!.range.minInclusive}-FF`, range: { minInclusive: a!.range.minInclusive, maxExclusive: 'FF' } };
    await expect(source.read({ partition: cut, from: 'beginning', maxItemCount: 1 })).rejects.toBeInstanceOf(PartitionGoneError);
  });

  it('drainGone: a split parent answers the changes it held, then is gone', async () => {
    const source = new MemorySource<Doc>({ partitions: 1, drainGone: true });
    for (let i = 0; i < 5; i++) source.write({ id: `d${i}`, n: i });
    const [parent] = source.partitions();
    const first = await source.read({ partition: parent!, from: 'beginning', maxItemCount: 2 });
    source.split('0');
    source.write({ id: 'after', n: 1 });
    const rest = await source.read({ partition: parent!, from: { position: first.position }, maxItemCount: 100 });
    expect(rest.changes.map((c) => c.id)).toEqual(['d2', 'd3', 'd4']);
    await expect(source.read({ partition: parent!, from: { position: rest.position }, maxItemCount: 100 })).rejects.toBeInstanceOf(PartitionGoneError);
    await expect(source.read({ partition: parent!, from: 'now', maxItemCount: 100 })).rejects.toBeInstanceOf(PartitionGoneError);
  });

  it('injects throttling, transient errors and arbitrary errors, then recovers', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const [p] = await source.listPartitions();
    source.faults.add({ kind: 'throttle', retryAfterMs: 250, count: 2 });
    source.faults.add({ kind: 'transient' });
    source.faults.add({ kind: 'error', error: new ResourceGoneError('memory') });
    const req = { partition: p!, from: 'beginning' as const, maxItemCount: 1 };
    for (let i = 0; i < 2; i++) {
      const e = await source.read(req).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(TransientError);
      expect((e as TransientError).retryAfterMs).toBe(250);
      expect((e as TransientError).statusCode).toBe(429);
    }
    await expect(source.read(req)).rejects.toMatchObject({ statusCode: 503 });
    await expect(source.read(req)).rejects.toBeInstanceOf(ResourceGoneError);
    expect(source.faults.pending).toBe(0);
    await expect(source.read(req)).resolves.toMatchObject({ changes: [] });
  });

  it('injected latency delays a read and honours the abort signal', async () => {
    vi.useFakeTimers();
    const source = new MemorySource<Doc>({ partitions: 1 });
    const [p] = await source.listPartitions();
    source.write({ id: 'a', n: 1 });
    source.faults.add({ kind: 'latency', ms: 1_000, count: 2 });
    let done = false;
    const slow = source.read({ partition: p!, from: 'beginning', maxItemCount: 5 }).then((page) => {
      done = true;
      return page;
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect((await slow).changes).toHaveLength(1);

    const controller = new AbortController();
    const aborted = source.read({ partition: p!, from: 'beginning', maxItemCount: 5, signal: controller.signal });
    controller.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
  });

  it('reads a 200k backlog cheaply (binary search from any position)', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    for (let i = 0; i < 200_000; i++) source.write({ id: `d${i}`, n: i });
    const [p] = await source.listPartitions();
    const latest = source.latestLsn(p!.id);
    let pages = 0;
    let from: { position: string } | 'beginning' = 'beginning';
    let count = 0;
    for (;;) {
      const page = await source.read({ partition: p!, from, maxItemCount: 1000 });
      pages++;
      count += page.changes.length;
      from = { position: page.position };
      if (page.changes.length < 1000) break;
    }
    expect(count).toBe(latest);
    expect(pages).toBe(Math.floor(latest / 1000) + 1);
  });

  it('rejects invalid options', () => {
    expect(() => new MemorySource({ partitions: 0 })).toThrow(InvalidOptionsError);
    expect(() => new MemorySource({ mode: 'nope' as never })).toThrow(/mode/);
    expect(() => new MemorySource<Doc>().write({ id: '' } as Doc)).toThrow(/id/);
  });
});

