import { seededRandom } from '../../src/internal/random.js';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../src/errors/index.js';
import { ViewFencedError } from '../../src/errors/ViewFencedError.js';
import type { ViewChange, ViewCommit, ViewMode, ViewRow, ViewStore, ViewWrite } from '../../src/sinks/ViewStore.js';

/** The row type the suite writes. */
export interface ConformanceRow {
  readonly id: string;
  readonly version: number;
  readonly tags?: readonly string[];
}

/** A fresh store under test, and a way to open the same data again as a restarted process would. */
export interface StoreUnderTest {
  readonly store: ViewStore<ConformanceRow>;
  /** A second store instance over the same data (a restart). Memory stores return the same instance. */
  reopen(): Promise<ViewStore<ConformanceRow>>;
}

/** Makes a new, empty store (a unique table) for one test. */
export type StoreFactory = () => Promise<StoreUnderTest>;

/** A seeded PRNG (mulberry32), so a failing shuffle can be replayed from its seed. */
export const random = seededRandom;

const T0 = Date.UTC(2026, 0, 1);

/** One change for the suite: an upsert of `{id: key, version}` or, with `version` undefined, a delete. */
export function change(partition: string, key: string, lsn: number, version: number | undefined): ViewChange<ConformanceRow> {
  return { key, row: version === undefined ? undefined : { id: key, version }, lsn, timestampMs: T0 + lsn * 1000, partition };
}

/** A write of `changes`, committing each partition at `pos:<partition>:<highest lsn>` under `epoch`. */
export function writeOf(
  changes: readonly ViewChange<ConformanceRow>[],
  options: { mode?: ViewMode; epoch?: number | Record<string, number>; positions?: Record<string, string> } = {},
): ViewWrite<ConformanceRow> {
  const commits = new Map<string, ViewCommit>();
  for (const c of changes) {
    const lsn = Math.max(c.lsn, commits.get(c.partition)?.lsn ?? 0);
    const epoch = typeof options.epoch === 'number' ? options.epoch : (options.epoch?.[c.partition] ?? 1);
    commits.set(c.partition, { partition: c.partition, epoch, position: `pos:${c.partition}:${lsn}`, lsn });
  }
  for (const [partition, position] of Object.entries(options.positions ?? {})) {
    const epoch = typeof options.epoch === 'number' ? options.epoch : (options.epoch?.[partition] ?? 1);
    commits.set(partition, { partition, epoch, position, lsn: commits.get(partition)?.lsn });
  }
  return { mode: options.mode ?? 'guarded', changes, partitions: [...commits.values()] };
}

/** A commit of `partition` over the key range [`min`, `max`) under `epoch`, at `pos:<partition>:<lsn>`. */
export function ranged(partition: string, min: string, max: string, epoch: number, lsn: number | undefined): ViewCommit {
  return { partition, epoch, position: `pos:${partition}:${lsn ?? 'none'}`, lsn, range: { minInclusive: min, maxExclusive: max } };
}

const content = (rows: readonly ViewRow<ConformanceRow>[]) =>
  Object.fromEntries(rows.map((r) => [r.key, r.row.version]));

interface HistoryEvent {
  readonly change: ViewChange<ConformanceRow>;
}

/**
 * A source history: `partitions` partitions, each with its own documents and increasing LSNs, random
 * creates, replaces and deletes; cut into batches of 1–6 changes. Returns the batches (per partition, in
 * order) and the final state (id → version) a correct view must end with.
 */
export function history(seed: number, partitions = 3, docsPerPartition = 12, eventsPerPartition = 60) {
  const rnd = random(seed);
  const batches: ViewChange<ConformanceRow>[][] = [];
  const final = new Map<string, number>();
  for (let p = 0; p < partitions; p++) {
    const partition = `p${p}`;
    const events: HistoryEvent[] = [];
    let lsn = 0;
    for (let i = 0; i < eventsPerPartition; i++) {
      lsn += 1 + Math.floor(rnd() * 3);
      const key = `doc-${p}-${Math.floor(rnd() * docsPerPartition)}`;
      const deleted = rnd() < 0.25;
      const version = deleted ? undefined : i;
      events.push({ change: change(partition, key, lsn, version) });
      if (version === undefined) final.delete(key);
      else final.set(key, version);
    }
    for (let i = 0; i < events.length; ) {
      const size = 1 + Math.floor(rnd() * 6);
      batches.push(events.slice(i, i + size).map((e) => e.change));
      i += size;
    }
  }
  return { batches, final: Object.fromEntries([...final].sort(([a], [b]) => (a < b ? -1 : 1))) };
}

function shuffle<T>(items: T[], rnd: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

/**
 * The behaviour every {@link ViewStore} must have. Call inside a test file once per store kind.
 *
 * @param name Shown in the test names.
 * @param factory Makes a fresh store per test.
 */
export function viewStoreConformance(name: string, factory: StoreFactory): void {
  describe(`ViewStore conformance: ${name}`, () => {
    const opened: ViewStore<ConformanceRow>[] = [];
    const fresh = async () => {
      const s = await factory();
      opened.push(s.store);
      return s;
    };
    afterAll(async () => {
      await Promise.all(opened.map((s) => s.close()));
    });

    it('writes rows with their versions and reads them back ordered by key', async () => {
      const { store } = await fresh();
      const result = await store.write(writeOf([change('p0', 'b', 2, 1), change('p0', 'a', 3, 1), change('p1', 'c', 1, 7)]));
      expect(result).toEqual({ written: 3, deleted: 0, skipped: 0 });
      const rows = await store.rows();
      expect(rows.map((r) => r.key)).toEqual(['a', 'b', 'c']);
      expect(await store.get('c')).toEqual({ key: 'c', row: { id: 'c', version: 7 }, lsn: 1, timestampMs: T0 + 1000, partition: 'p1' });
      expect(await store.get('missing')).toBeUndefined();
    });

    it('round-trips nested JSON rows', async () => {
      const { store } = await fresh();
      const row = { id: 'n', version: 1, tags: ['x', 'ÿ "quoted"', 'back\\slash'] };
      await store.write({ mode: 'guarded', changes: [{ ...change('p0', 'n', 1, 1), row }], partitions: [] });
      expect((await store.get('n'))?.row).toEqual(row);
    });

    it('never lets an older or replayed change overwrite a newer row', async () => {
      const { store } = await fresh();
      await store.write(writeOf([change('p0', 'a', 10, 10)]));
      expect(await store.write(writeOf([change('p0', 'a', 5, 5)]))).toEqual({ written: 0, deleted: 0, skipped: 1 });
      expect(await store.write(writeOf([change('p0', 'a', 10, 10)]))).toEqual({ written: 0, deleted: 0, skipped: 1 });
      expect((await store.get('a'))?.row.version).toBe(10);
      expect(await store.write(writeOf([change('p0', 'a', 11, 11)]))).toEqual({ written: 1, deleted: 0, skipped: 0 });
      expect((await store.get('a'))?.lsn).toBe(11);
    });

    it('deletes leave a tombstone, so a replayed older change cannot resurrect the row', async () => {
      const { store } = await fresh();
      await store.write(writeOf([change('p0', 'a', 3, 3), change('p0', 'b', 4, 4)]));
      expect(await store.write(writeOf([change('p0', 'a', 6, undefined)]))).toEqual({ written: 0, deleted: 1, skipped: 0 });
      expect(await store.get('a')).toBeUndefined();
      // Replays of the create, and a change between create and delete, stay dead.
      await store.write(writeOf([change('p0', 'a', 3, 3)]));
      await store.write(writeOf([change('p0', 'a', 5, 5)]));
      expect(await store.get('a')).toBeUndefined();
      // A delete older than the row leaves the row alone (its tombstone is older than the row too).
      expect(await store.write(writeOf([change('p0', 'b', 2, undefined)]))).toEqual({ written: 0, deleted: 0, skipped: 1 });
      expect((await store.get('b'))?.row.version).toBe(4);
      // A newer create brings the document back.
      await store.write(writeOf([change('p0', 'a', 9, 9)]));
      expect((await store.get('a'))?.row.version).toBe(9);
      // A tombstone arriving before any row (replay out of order) blocks the older create.
      await store.write(writeOf([change('p1', 'z', 8, undefined)]));
      await store.write(writeOf([change('p1', 'z', 7, 7)]));
      expect(await store.get('z')).toBeUndefined();
    });

    it('coalesces several changes of one key in a write to the latest', async () => {
      const { store } = await fresh();
      const result = await store.write(
        writeOf([change('p0', 'a', 1, 1), change('p0', 'a', 2, 2), change('p0', 'a', 3, undefined), change('p0', 'a', 4, 4), change('p0', 'b', 5, 5), change('p0', 'b', 6, undefined)]),
      );
      expect(result).toEqual({ written: 1, deleted: 0, skipped: 5 });
      expect(content(await store.rows())).toEqual({ a: 4 });
      await store.write(writeOf([change('p0', 'b', 5, 5)]));
      expect(await store.get('b')).toBeUndefined();
    });

    for (const seed of [1, 2, 3]) {
      it(`ends equal to the source's final state after replays in random order (seed ${seed})`, async () => {
        const { store } = await fresh();
        const { batches, final } = history(seed);
        const rnd = random(seed * 7919);
        // Every batch twice, shuffled across partitions and within them, some merged into bigger writes.
        const writes = shuffle([...batches, ...batches], rnd);
        for (let i = 0; i < writes.length; ) {
          const n = 1 + Math.floor(rnd() * 3);
          await store.write(writeOf(writes.slice(i, i + n).flat()));
          i += n;
        }
        expect(content(await store.rows())).toEqual(final);
      });
    }

    it('applies concurrent writes of different partitions', async () => {
      const { store } = await fresh();
      await Promise.all(
        Array.from({ length: 8 }, (_, p) => store.write(writeOf(Array.from({ length: 25 }, (_, i) => change(`p${p}`, `k${p}-${i}`, i + 1, i))))),
      );
      expect((await store.rows()).length).toBe(200);
      expect((await store.positions()).size).toBe(8);
    });

    it('keeps each partition position, epoch and LSN with the rows, never moving back', async () => {
      const { store, reopen } = await fresh();
      await store.write(writeOf([change('p0', 'a', 1, 1), change('p0', 'b', 2, 2), change('p1', 'c', 5, 5)], { epoch: 2 }));
      await store.write(writeOf([change('p0', 'a', 4, 4)], { epoch: 3 }));
      // A replayed (older) batch keeps the newer position.
      await store.write(writeOf([change('p0', 'b', 2, 2)], { epoch: 3 }));
      // A batch without changes still moves its partition (it carries a position).
      await store.write(writeOf([], { epoch: 2, positions: { p1: 'pos:p1:after-empty' } }));
      const expected = new Map([
        ['p0', { position: 'pos:p0:4', epoch: 3, lsn: 4 }],
        ['p1', { position: 'pos:p1:after-empty', epoch: 2, lsn: 5 }],
      ]);
      expect(await store.positions()).toEqual(expected);
      const again = await reopen();
      expect(await again.positions()).toEqual(expected);
      expect(content(await again.rows())).toEqual({ a: 4, b: 2, c: 5 });
    });

    it('rejects a write from a deposed owner (lower epoch) and writes none of it', async () => {
      const { store } = await fresh();
      await store.write(writeOf([change('p0', 'a', 1, 1)], { epoch: 5 }));
      const stale = writeOf([change('p1', 'x', 1, 1), change('p0', 'a', 2, 2), change('p0', 'b', 3, 3)], { epoch: { p0: 4, p1: 1 } });
      const error = await store.write(stale).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ViewFencedError);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ leaseToken: 'p0', epoch: 4, currentEpoch: 5 });
      expect(content(await store.rows())).toEqual({ a: 1 });
      expect([...(await store.positions()).keys()]).toEqual(['p0']);
      // The same epoch and a newer one are accepted; the newer one fences the older from then on.
      await store.write(writeOf([change('p0', 'a', 2, 2)], { epoch: 5 }));
      await store.write(writeOf([change('p0', 'a', 3, 3)], { epoch: 6 }));
      await expect(store.write(writeOf([change('p0', 'a', 4, 4)], { epoch: 5 }))).rejects.toBeInstanceOf(ViewFencedError);
      expect((await store.get('a'))?.row.version).toBe(3);
      expect((await store.positions()).get('p0')?.epoch).toBe(6);
    });

    for (const mode of ['guarded', 'exactlyOnce'] as const) {
      it(`${mode}: a new owner's replays and empty writes raise the epoch, so the deposed owner is refused`, async () => {
        const { store, reopen } = await fresh();
        // Owner A (epoch 1) wrote up to LSN 10; its lease checkpoint lagged at LSN 5.
        await store.write(writeOf([change('p0', 'a', 9, 9), change('p0', 'b', 10, 10)], { mode, epoch: 1 }));
        // B (epoch 2) resumes from the lease checkpoint: its first write only replays what the view holds.
        expect(await store.write(writeOf([change('p0', 'a', 9, 9)], { mode, epoch: 2 }))).toMatchObject({ written: 0, deleted: 0 });
        const refused = await store.write(writeOf([change('p0', 'c', 11, 11)], { mode, epoch: 1 })).catch((e: unknown) => e);
        expect(refused).toMatchObject({ name: 'ViewFencedError', leaseToken: 'p0', epoch: 1, currentEpoch: 2 });
        expect(await store.get('c')).toBeUndefined();
        // The replay kept the newer position and LSN; only the epoch moved, and a restart still knows it.
        expect((await (await reopen()).positions()).get('p0')).toEqual({ position: 'pos:p0:10', epoch: 2, lsn: 10 });
        // A write without changes (a batch a filter emptied) raises the epoch just the same.
        await store.write({ mode, changes: [], partitions: [{ partition: 'p0', epoch: 3, position: 'pos:p0:10', lsn: 10 }] });
        await expect(store.write(writeOf([change('p0', 'c', 11, 11)], { mode, epoch: 2 }))).rejects.toBeInstanceOf(ViewFencedError);
        expect((await store.positions()).get('p0')).toEqual({ position: 'pos:p0:10', epoch: 3, lsn: 10 });
      });
    }

    for (const mode of ['guarded', 'exactlyOnce'] as const) {
      it(`${mode}: fences by key range along the lineage: a split parent's late write after a child wrote is refused, a sibling's is not`, async () => {
        const { store, reopen } = await fresh();
        // Parent P [,FF) wrote x under epoch 4; it split, and child L [,80) (epoch 5) wrote x again.
        await store.write({ mode, changes: [change('P', 'x', 10, 1)], partitions: [ranged('P', '', 'FF', 4, 10)] });
        await store.write({ mode, changes: [change('L', 'x', 11, 2)], partitions: [ranged('L', '', '80', 5, 11)] });
        // The parent's old owner (its ownership ended, its write was in flight) lands late: refused, x stays 2.
        const late = await store.write({ mode, changes: [change('P', 'x', 11, 1)], partitions: [ranged('P', '', 'FF', 4, 11)] }).catch((e: unknown) => e);
        expect(late).toBeInstanceOf(ViewFencedError);
        expect(late).toBeInstanceOf(LeaseLostError);
        expect(late).toMatchObject({ leaseToken: 'P', epoch: 4, currentEpoch: 5 });
        expect((await store.get('x'))?.row.version).toBe(2);
        // Refused too: its empty writes, and writes that leave out the range (the stored one counts).
        await expect(store.write({ mode, changes: [], partitions: [ranged('P', '', 'FF', 4, 11)] })).rejects.toBeInstanceOf(ViewFencedError);
        await expect(store.write(writeOf([change('P', 'x', 12, 1)], { mode, epoch: 4 }))).rejects.toBeInstanceOf(ViewFencedError);
        // The other child R [80,FF) overlaps only the parent: its epoch (6) is above the parent's, so it writes,
        // and L, disjoint from R, still writes under its lower epoch.
        await store.write({ mode, changes: [change('R', 'y', 11, 3)], partitions: [ranged('R', '80', 'FF', 6, 11)] });
        await store.write({ mode, changes: [change('L', 'x', 12, 4)], partitions: [ranged('L', '', '80', 5, 12)] });
        expect(content(await store.rows())).toEqual({ x: 4, y: 3 });
        const positions = await store.positions();
        expect(positions.get('P')).toMatchObject({ position: 'pos:P:10', epoch: 4, lsn: 10 });
        expect(positions.get('L')).toMatchObject({ position: 'pos:L:12', epoch: 5, lsn: 12 });
        // A restarted process (another host) refuses the parent just the same.
        const restarted = await reopen();
        await expect(restarted.write({ mode, changes: [change('P', 'z', 13, 1)], partitions: [ranged('P', '', 'FF', 4, 13)] })).rejects.toBeInstanceOf(ViewFencedError);
        expect(await restarted.get('z')).toBeUndefined();
      });

      it(`${mode}: a split parent taken again at its child's epoch is refused once the child wrote; siblings at one epoch both write`, async () => {
        const { store, reopen } = await fresh();
        // Parent P [,FF) wrote under epoch 1; children L [,80) and R [80,FF) were created at epoch 1 and taken
        // at epoch 2; the parent, not deleted yet, was taken again at epoch 2 too (its gone partition still answers).
        await store.write({ mode, changes: [change('P', 'x', 10, 1)], partitions: [ranged('P', '', 'FF', 1, 10)] });
        await store.write({ mode, changes: [change('L', 'x', 11, 2)], partitions: [ranged('L', '', '80', 2, 11)] });
        await store.write({ mode, changes: [change('R', 'y', 11, 3)], partitions: [ranged('R', '80', 'FF', 2, 11)] });
        // The parent's write at the children's epoch: its position was handed to them, refused whatever the tie.
        const late = await store.write({ mode, changes: [change('P', 'x', 12, 9)], partitions: [ranged('P', '', 'FF', 2, 12)] }).catch((e: unknown) => e);
        expect(late).toBeInstanceOf(ViewFencedError);
        expect(late).toMatchObject({ leaseToken: 'P', epoch: 2, currentEpoch: 2 });
        await expect((await reopen()).write({ mode, changes: [], partitions: [ranged('P', '', 'FF', 2, 12)] })).rejects.toBeInstanceOf(ViewFencedError);
        expect(content(await store.rows())).toEqual({ x: 2, y: 3 });
        expect((await store.positions()).get('P')).toMatchObject({ position: 'pos:P:10', epoch: 1, lsn: 10 });
        // The children keep writing at their epoch.
        await store.write({ mode, changes: [change('L', 'x', 13, 4)], partitions: [ranged('L', '', '80', 2, 13)] });
        expect((await store.get('x'))?.row.version).toBe(4);
      });

      it(`${mode}: a tie with another partition over part of the range is refused in either order (a child is taken again above it)`, async () => {
        const { store } = await fresh();
        // The parent taken again at epoch 2 wrote first; its child, also at epoch 2, is refused rather than
        // risk the reverse, and writes once taken again at epoch 3, which fences the parent.
        await store.write({ mode, changes: [change('P', 'x', 10, 1)], partitions: [ranged('P', '', 'FF', 2, 10)] });
        await expect(store.write({ mode, changes: [change('L', 'x', 11, 2)], partitions: [ranged('L', '', '80', 2, 11)] })).rejects.toMatchObject({
          name: 'ViewFencedError',
          leaseToken: 'L',
          currentEpoch: 2,
        });
        await store.write({ mode, changes: [change('L', 'x', 11, 2)], partitions: [ranged('L', '', '80', 3, 11)] });
        await expect(store.write({ mode, changes: [change('P', 'x', 12, 9)], partitions: [ranged('P', '', 'FF', 2, 12)] })).rejects.toBeInstanceOf(ViewFencedError);
        expect((await store.get('x'))?.row.version).toBe(2);
      });

      it(`${mode}: a child's write that changes nothing (a replay, an empty batch) fences its parent's range`, async () => {
        const { store } = await fresh();
        await store.write({ mode, changes: [change('P', 'x', 10, 1)], partitions: [ranged('P', '', 'FF', 2, 10)] });
        // The child's first batch replays what the parent wrote (guarded: an older LSN; exactly-once: the mark),
        // then a batch that a filter emptied.
        expect(await store.write({ mode, changes: [change('L', 'x', 10, 1)], partitions: [ranged('L', '', '80', 3, 10)] })).toMatchObject({ written: 0 });
        await store.write({ mode, changes: [], partitions: [ranged('R', '80', 'FF', 3, 10)] });
        await expect(store.write({ mode, changes: [change('P', 'x', 11, 9)], partitions: [ranged('P', '', 'FF', 2, 11)] })).rejects.toMatchObject({
          name: 'ViewFencedError',
          leaseToken: 'P',
          currentEpoch: 3,
        });
        expect((await store.get('x'))?.row.version).toBe(1);
      });

      it(`${mode}: a merge fences both parents; a write refused for one partition's range writes nothing of the others`, async () => {
        const { store } = await fresh();
        await store.write({ mode, changes: [change('A', 'a', 5, 1)], partitions: [ranged('A', '', '80', 3, 5)] });
        await store.write({ mode, changes: [change('B', 'b', 7, 1)], partitions: [ranged('B', '80', 'FF', 6, 7)] });
        // A and B merged into M [,FF) (epoch 7, above both).
        await store.write({ mode, changes: [change('M', 'a', 8, 2)], partitions: [ranged('M', '', 'FF', 7, 8)] });
        for (const [parent, min, max, epoch] of [['A', '', '80', 3], ['B', '80', 'FF', 6]] as const) {
          await expect(store.write({ mode, changes: [change(parent, 'a', 9, 9)], partitions: [ranged(parent, min, max, epoch, 9)] })).rejects.toMatchObject({
            leaseToken: parent,
            epoch,
            currentEpoch: 7,
          });
        }
        // A write of Q (a range of its own) together with the deposed A: refused whole.
        const both = {
          mode,
          changes: [change('Q', 'q', 1, 1), change('A', 'a', 10, 10)],
          partitions: [ranged('Q', 'FF', 'FFFF', 1, 1), ranged('A', '', '80', 3, 10)],
        };
        await expect(store.write(both)).rejects.toMatchObject({ leaseToken: 'A' });
        expect(content(await store.rows())).toEqual({ a: 2, b: 1 });
        expect((await store.positions()).has('Q')).toBe(false);
      });

      it(`${mode}: a host that wrote the parent before is refused once another host's child wrote (two store instances)`, async () => {
        const { store, reopen } = await fresh();
        const childHost = await reopen();
        // The parent's host writes twice (it knows what it committed, as a store that plans on it does).
        await store.write({ mode, changes: [change('P', 'x', 1, 1)], partitions: [ranged('P', '', 'FF', 1, 1)] });
        await store.write({ mode, changes: [change('P', 'x', 2, 2)], partitions: [ranged('P', '', 'FF', 1, 2)] });
        // The child's host writes the child's first batch.
        await childHost.write({ mode, changes: [change('L', 'x', 3, 3)], partitions: [ranged('L', '', '80', 2, 3)] });
        // The parent's host's next write is refused, and the row stays the child's.
        await expect(store.write({ mode, changes: [change('P', 'x', 3, 9)], partitions: [ranged('P', '', 'FF', 1, 3)] })).rejects.toBeInstanceOf(ViewFencedError);
        expect((await childHost.get('x'))?.row.version).toBe(3);
        // The child's host goes on writing (it was not fenced), and so does a sibling on the parent's host.
        await childHost.write({ mode, changes: [change('L', 'x', 4, 4)], partitions: [ranged('L', '', '80', 2, 4)] });
        await store.write({ mode, changes: [change('R', 'y', 3, 1)], partitions: [ranged('R', '80', 'FF', 2, 3)] });
        expect(content(await store.rows())).toEqual({ x: 4, y: 1 });
      });
    }

    it('exactly-once: a replayed batch a filter emptied keeps the position (its last LSN read is at or below the mark)', async () => {
      const { store } = await fresh();
      const mode = 'exactlyOnce' as const;
      await store.write(writeOf([change('p0', 'a', 4, 4), change('p0', 'b', 10, 10)], { mode }));
      // A new owner replays LSN 6..7 from the lease checkpoint; the filter left nothing, the read LSN stays 7.
      await store.write({ mode, changes: [], partitions: [{ partition: 'p0', epoch: 2, position: 'pos:p0:7', lsn: 7 }] });
      expect((await store.positions()).get('p0')).toEqual({ position: 'pos:p0:10', epoch: 2, lsn: 10 });
      // Past the mark, an emptied batch moves the position and the mark.
      await store.write({ mode, changes: [], partitions: [{ partition: 'p0', epoch: 2, position: 'pos:p0:12', lsn: 12 }] });
      expect((await store.positions()).get('p0')).toEqual({ position: 'pos:p0:12', epoch: 2, lsn: 12 });
    });

    it('exactly-once: split children inherit the parent mark, so replaying the parent range applies nothing twice', async () => {
      const { store, reopen } = await fresh();
      const mode = 'exactlyOnce' as const;
      const at = (partition: string, min: string, max: string, lsn: number | undefined, epoch = 1) => ({
        partition,
        epoch,
        position: `pos:${partition}:${lsn ?? 'none'}`,
        lsn,
        range: { minInclusive: min, maxExclusive: max },
      });
      // Parent P [,FF) fed row `total` up to LSN 20; partition Q then wrote it last (its own range, LSN 3).
      await store.write({ mode, changes: [change('P', 'total', 10, 10), change('P', 'total', 20, 20)], partitions: [at('P', '', 'FF', 20, 4)] });
      await store.write({ mode, changes: [change('Q', 'total', 3, 99)], partitions: [at('Q', 'FF', 'FFFF', 3)] });
      // P splits; child L [,80) replays P's changes from the parent's older lease checkpoint, at its own epoch 5
      // (a child's epochs lie above its parent's).
      const replay = await store.write({ mode, changes: [change('L', 'total', 20, 20)], partitions: [at('L', '', '80', 20, 5)] });
      expect(replay).toEqual({ written: 0, deleted: 0, skipped: 1 });
      expect((await store.get('total'))?.row.version).toBe(99);
      // A replay leaves the child without a position of its own; its inherited mark is kept.
      expect((await store.positions()).has('L')).toBe(false);
      // The next change after the mark is applied, and moves the child like any partition.
      await store.write({ mode, changes: [change('L', 'total', 21, 21)], partitions: [at('L', '', '80', 21, 5)] });
      expect((await store.get('total'))?.row.version).toBe(21);
      const restarted = await reopen();
      expect((await restarted.positions()).get('L')).toEqual({ position: 'pos:L:21', epoch: 5, lsn: 21, range: { minInclusive: '', maxExclusive: '80' } });
      // The other child, through a restart, has only the parent's mark: LSN 20 is skipped, 22 applied.
      expect(await restarted.write({ mode, changes: [change('R', 'total', 20, 20)], partitions: [at('R', '80', 'FF', 20, 5)] })).toMatchObject({ written: 0, skipped: 1 });
      await restarted.write({ mode, changes: [change('R', 'other', 22, 22)], partitions: [at('R', '80', 'FF', 22, 5)] });
      expect((await restarted.get('other'))?.row.version).toBe(22);
      // A grandchild inside L inherits L's newer mark (21), not P's (20).
      expect(await restarted.write({ mode, changes: [change('LL', 'total', 21, 21)], partitions: [at('LL', '', '40', 21, 6)] })).toMatchObject({ written: 0, skipped: 1 });
    });

    it('exactly-once: a range fed by several parents (a merge) inherits the lowest of their marks; an uncovered range none', async () => {
      const { store } = await fresh();
      const mode = 'exactlyOnce' as const;
      const range = (minInclusive: string, maxExclusive: string) => ({ minInclusive, maxExclusive });
      await store.write({ mode, changes: [change('A', 'a', 30, 30)], partitions: [{ partition: 'A', epoch: 1, position: 'pos:A', lsn: 30, range: range('', '80') }] });
      await store.write({ mode, changes: [change('B', 'b', 50, 50)], partitions: [{ partition: 'B', epoch: 1, position: 'pos:B', lsn: 50, range: range('80', 'FF') }] });
      // M covers A and B (taken one epoch above them): changes up to 30 are applied in both parts, above 30 not necessarily.
      const merged = await store.write({
        mode,
        changes: [change('M', 'a', 30, 30), change('M', 'm', 31, 31)],
        partitions: [{ partition: 'M', epoch: 2, position: 'pos:M', lsn: 31, range: range('', 'FF') }],
      });
      expect(merged).toEqual({ written: 1, deleted: 0, skipped: 1 });
      // N reaches past every stored range: no mark, everything is applied.
      const fresh2 = await store.write({ mode, changes: [change('N', 'n', 1, 1)], partitions: [{ partition: 'N', epoch: 3, position: 'pos:N', lsn: 1, range: range('40', 'FFFF') }] });
      expect(fresh2).toEqual({ written: 1, deleted: 0, skipped: 0 });
    });

    for (const mode of ['guarded', 'exactlyOnce'] as const) {
      it(`${mode}: two store instances over the same data (two hosts) each go by what is stored, not by what they wrote last`, async () => {
        const { store, reopen } = await fresh();
        const other = await reopen();
        // Host A wrote p0 up to LSN 2 under epoch 1; host B took the lease over (epoch 2) and wrote up to LSN 4.
        await store.write(writeOf([change('p0', 'a', 1, 1), change('p0', 'b', 2, 2)], { mode, epoch: 1 }));
        await other.write(writeOf([change('p0', 'a', 3, 3), change('p0', 'b', 4, 4)], { mode, epoch: 2 }));
        // A owns the lease again (epoch 3) and resumes from its own last checkpoint: B's changes come again (here
        // with other content) and are not applied, nor does the position move back to them.
        expect(await store.write(writeOf([change('p0', 'a', 3, 30)], { mode, epoch: 3 }))).toEqual({ written: 0, deleted: 0, skipped: 1 });
        expect((await store.positions()).get('p0')).toEqual({ position: 'pos:p0:4', epoch: 3, lsn: 4 });
        // B, deposed, is refused, although as far as B knows it wrote p0 last.
        await expect(other.write(writeOf([change('p0', 'd', 6, 6)], { mode, epoch: 2 }))).rejects.toBeInstanceOf(ViewFencedError);
        expect(await store.write(writeOf([change('p0', 'c', 5, 5)], { mode, epoch: 3 }))).toEqual({ written: 1, deleted: 0, skipped: 0 });
        expect(content(await other.rows())).toEqual({ a: 3, b: 4, c: 5 });
        expect((await other.positions()).get('p0')).toEqual({ position: 'pos:p0:5', epoch: 3, lsn: 5 });
      });

      it(`${mode}: first writes of several partitions at once (a fresh view, a restarted host): a deposed one refused, the others written`, async () => {
        const { store, reopen } = await fresh();
        // Another host took D [C0,FF) over at epoch 3 and wrote it; this host's store has written nothing yet.
        const other = await reopen();
        await other.write({ mode, changes: [change('D', 'd', 1, 30)], partitions: [ranged('D', 'C0', 'FF', 3, 1)] });
        const first = (partition: string, min: string, max: string, epoch: number, key: string) =>
          store.write({ mode, changes: [change(partition, key, 2, 1)], partitions: [ranged(partition, min, max, epoch, 2)] }).catch((e: unknown) => e);
        const [a, b, d, c] = await Promise.all([first('A', '', '40', 1, 'a'), first('B', '40', '80', 1, 'b'), first('D', 'C0', 'FF', 2, 'd'), first('C', '80', 'C0', 1, 'c')]);
        expect([a, b, c]).toEqual([1, 1, 1].map(() => ({ written: 1, deleted: 0, skipped: 0 })));
        expect(d).toMatchObject({ name: 'ViewFencedError', leaseToken: 'D', epoch: 2, currentEpoch: 3 });
        expect(content(await store.rows())).toEqual({ a: 1, b: 1, c: 1, d: 30 });
        const positions = await store.positions();
        expect([...positions.keys()].sort()).toEqual(['A', 'B', 'C', 'D']);
        expect(positions.get('D')).toMatchObject({ epoch: 3, lsn: 1 });
        expect(positions.get('B')).toMatchObject({ epoch: 1, lsn: 2, range: { minInclusive: '40', maxExclusive: '80' } });
        // A split parent and its child writing their first batches at once: the child is written, and the
        // parent, whichever went first, is refused from then on.
        const [parent, child] = await Promise.all([
          store.write({ mode, changes: [change('P', 'p', 3, 1)], partitions: [ranged('P', '', '80', 1, 3)] }).catch((e: unknown) => e),
          store.write({ mode, changes: [change('L', 'p', 4, 2)], partitions: [ranged('L', '', '40', 2, 4)] }),
        ]);
        expect(child).toEqual({ written: 1, deleted: 0, skipped: 0 });
        expect(parent === undefined || parent instanceof ViewFencedError || (parent as { written?: number }).written === 1).toBe(true);
        await expect(store.write({ mode, changes: [change('P', 'p', 5, 9)], partitions: [ranged('P', '', '80', 1, 5)] })).rejects.toBeInstanceOf(ViewFencedError);
        expect((await store.get('p'))?.row.version).toBe(2);
      });
    }

    it('forgets positions and epochs on clearPositions, keeping rows and tombstones', async () => {
      const { store } = await fresh();
      await store.write(writeOf([change('p0', 'a', 5, 5), change('p0', 'b', 6, undefined)], { epoch: 9 }));
      await store.clearPositions();
      expect((await store.positions()).size).toBe(0);
      // New leases (epoch 1 again) are accepted; the rows and the tombstone still guard.
      await store.write(writeOf([change('p0', 'a', 4, 4), change('p0', 'b', 2, 2)], { epoch: 1 }));
      expect(content(await store.rows())).toEqual({ a: 5 });
      expect((await store.positions()).get('p0')?.epoch).toBe(1);
    });

    it('exactly-once: after a crash between write and checkpoint, replayed batches apply nothing twice', async () => {
      const { store, reopen } = await fresh();
      const b1 = [change('p0', 'a', 1, 1), change('p0', 'b', 2, 2), change('p0', 'a', 3, 3)];
      const b2 = [change('p0', 'b', 4, 4), change('p0', 'c', 5, 5)];
      const b3 = [change('p0', 'a', 6, 6)];
      const mode = 'exactlyOnce' as const;
      let applied = 0;
      const count = (r: { written: number; deleted: number }) => (applied += r.written + r.deleted);
      count(await store.write(writeOf(b1, { mode })));
      count(await store.write(writeOf(b2, { mode })));
      // Crash: the lease checkpoint still points before b1. A new process opens the view …
      const restarted = await reopen();
      expect((await restarted.positions()).get('p0')).toEqual({ position: 'pos:p0:5', epoch: 1, lsn: 5 });
      // … and, had it resumed from the lease instead of the view, replays b1 and b2: nothing is applied.
      expect(await restarted.write(writeOf(b1, { mode }))).toEqual({ written: 0, deleted: 0, skipped: 3 });
      expect(content(await restarted.rows())).toEqual({ a: 3, b: 4, c: 5 });
      expect(await restarted.write(writeOf(b2, { mode }))).toEqual({ written: 0, deleted: 0, skipped: 2 });
      count(await restarted.write(writeOf([...b2, ...b3], { mode })));
      expect(content(await restarted.rows())).toEqual({ a: 6, b: 4, c: 5 });
      // Each distinct key write happened once: b1 (a, b coalesced), b2 (b, c), b3 (a).
      expect(applied).toBe(5);
      expect((await restarted.positions()).get('p0')).toEqual({ position: 'pos:p0:6', epoch: 1, lsn: 6 });
    });

    it('exactly-once: rows take the last change in write order (no per-row guard) and deletes remove them', async () => {
      const { store } = await fresh();
      const mode = 'exactlyOnce' as const;
      // One row fed by two partitions: their LSNs are not comparable, write order decides.
      await store.write(writeOf([change('p0', 'total', 50, 1)], { mode }));
      await store.write(writeOf([change('p1', 'total', 3, 2)], { mode }));
      expect((await store.get('total'))?.row.version).toBe(2);
      expect(await store.write(writeOf([change('p1', 'total', 4, undefined)], { mode }))).toEqual({ written: 0, deleted: 1, skipped: 0 });
      expect(await store.rows()).toEqual([]);
    });

    it('prunes tombstones older than a time', async () => {
      const { store } = await fresh();
      await store.write(writeOf([change('p0', 'a', 1, undefined), change('p0', 'b', 5, undefined)]));
      expect(await store.pruneTombstones(T0 + 3000)).toBe(1);
      // Without its tombstone, an old replay of `a` comes back: pruning is only safe past the checkpoints.
      await store.write(writeOf([change('p0', 'a', 0, 0), change('p0', 'b', 4, 4)]));
      expect(content(await store.rows())).toEqual({ a: 0 });
    });
  });
}
