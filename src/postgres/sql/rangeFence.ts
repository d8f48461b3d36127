import type { ViewWrite } from '../../sinks/ViewStore.js';
import type { FeedRange } from '../../core/Partition.js';
import { rangesOverlap } from '../../core/Partition.js';
import { fenceEpoch, isFenced, partitionsOf, storedPartition } from '../../sinks/internal/planWrite.js';
import type { StoredPartition, StoredRange } from '../../sinks/internal/planWrite.js';
import { ViewFencedError } from '../../errors/ViewFencedError.js';
import type { SqlSession } from './SqlRunner.js';
import type { ViewSql } from './viewSql.js';

/**
 * The range fence of the PostgreSQL view store: each partition's key range stored on its row of
 * `<table>_positions`, under the lineage row's lock, and read back (with the ranges of the partitions stored over
 * it) to fence a write and give a split or merge child the marks it inherits. Transactions call these; the
 * one-statement write checks the same under its own locks (`guardedWrite.ts`).
 *
 * @internal
 */

/** What the range fence statements need: the table's statements, and the store's description for errors. */
export interface RangeFenceTable {
  readonly sql: ViewSql;
  /** What the store writes to, for errors and logs. */
  readonly description: string;
}

/** A partition's row in `<table>_positions`, as the write statements read it. */
interface PartitionRecord {
  partition_id: string;
  epoch: number | string;
  lsn: number | string | null;
  range_min: string | null;
  range_max: string | null;
}

/** What a store knows of a partition's row: its epoch, own LSN mark and range. */
export interface KnownPartition extends StoredPartition {
  readonly range: FeedRange | undefined;
  /**
   * The lineage generation at which no other partition had a range stored over part of this one's: until
   * the generation moves, it has no mark to inherit (and no range fence), so a partition without a mark of
   * its own may be written in one statement too. `undefined` when not known to be so.
   */
  readonly aloneAt?: number | undefined;
}

/** What a range store committed for the write's partitions, and the lineage generation it left. */
export interface StoredRanges {
  readonly known: ReadonlyMap<string, KnownPartition>;
  readonly generation: number;
}

/** What a write's transaction read under its locks: what it plans on and what its statement checks. */
export interface FenceState {
  /** The lineage generation, locked against range stores. */
  readonly generation: number;
  /** Each partition's row as locked: its epoch and own LSN mark. */
  readonly expected: ReadonlyMap<string, StoredPartition>;
  /** Each partition's key range (the commit's, or the one stored with it). */
  readonly ranges: ReadonlyMap<string, FeedRange | undefined>;
  /** Each known partition's state with the range fence and inherited mark: what `planWrite` takes. */
  readonly stored: ReadonlyMap<string, StoredPartition>;
}

/** Thrown inside a write's transaction when a partition's range is not stored (it must be stored first). */
export class RangesNotStored extends Error {}

/**
 * Thrown inside a range store that locked the lineage row against range stores only, when a range turns out
 * to overlap another partition's stored range: it is stored again with the lineage row locked exclusively.
 */
export class RangesOverlap extends Error {}

/** A number column as read (drivers return bigints as strings); `undefined` for null. */
export const num = (value: number | string | bigint | null | undefined): number | undefined =>
  value === null || value === undefined ? undefined : Number(value);

const rangeOf = (r: { range_min: string | null; range_max: string | null }): FeedRange | undefined =>
  r.range_min !== null && r.range_max !== null ? { minInclusive: r.range_min, maxExclusive: r.range_max } : undefined;

/** Whether two ranges (either maybe unknown) are the same. */
export const sameRange = (a: FeedRange | undefined, b: FeedRange | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && a.minInclusive === b.minInclusive && a.maxExclusive === b.maxExclusive);

/** Whether a commit of `write` brings a range other than the one `rangeOf` says its partition has stored. */
export function bringsNewRange(write: ViewWrite<unknown>, storedRangeOf: (partition: string) => FeedRange | undefined): boolean {
  return write.partitions.some((c) => c.range !== undefined && !sameRange(c.range, storedRangeOf(c.partition)));
}

/** The generation of the lineage row as a lock statement returned it. */
export function generationOf(table: RangeFenceTable, rows: readonly { generation: number | string }[]): number {
  const generation = Number(rows[0]?.generation ?? NaN);
  if (Number.isNaN(generation)) throw new Error(`${table.description}: the lineage row of ${table.sql.qualified} is missing (was the table emptied by hand?)`);
  return generation;
}

/** Locks the rows of `partitions` (inserting missing ones): each one's epoch, own LSN mark and stored range. */
async function lockPartitions(tx: SqlSession, sql: ViewSql, partitions: readonly string[]): Promise<Map<string, KnownPartition>> {
  const own = new Map<string, KnownPartition>();
  const locked = await tx.query<PartitionRecord>(sql.lockPartitions, [JSON.stringify(partitions)]);
  for (const row of locked.rows) own.set(row.partition_id, { epoch: Number(row.epoch), lsn: num(row.lsn), range: rangeOf(row) });
  return own;
}

/** The partitions stored with a range over part of one of `ranges`. */
async function selectRanges(tx: SqlSession, sql: ViewSql, ranges: readonly FeedRange[]): Promise<StoredRange[]> {
  const wanted = ranges.map((r) => ({ range_min: r.minInclusive, range_max: r.maxExclusive }));
  return (await tx.query<PartitionRecord>(sql.selectRanges, [JSON.stringify(wanted)])).rows.map((row) => ({
    partition: row.partition_id,
    range: rangeOf(row)!,
    epoch: Number(row.epoch),
    lsn: num(row.lsn),
  }));
}

/**
 * Stores the ranges of a write's commits that their partitions do not have stored yet (a split or merge
 * child's first write, a first write after a restart), fenced like a write and raising the epochs. Run in a
 * transaction of its own, short, so that the lineage lock it holds never waits for rows to be written.
 *
 * A range over part of another partition's stored range (a split or merge child's) is stored with the
 * lineage row locked exclusively (`exclusive`), and the generation bumped: writes planned before (which
 * could not see the new range, or planned that there was no mark to inherit) plan again. A range over no
 * other partition's (every partition's first write on a fresh view, or after `clearPositions`) cannot
 * fence a write nor pass it a mark: it is stored with the lineage row locked against range stores only,
 * concurrent writes neither wait nor plan again. Found to overlap under that lock, it throws
 * {@link RangesOverlap} (the write stores it again, exclusively). Returns what it committed for the write's
 * partitions, so that the write is planned on it (`undefined` when nothing was left to store).
 */
export async function storeRanges(tx: SqlSession, table: RangeFenceTable, write: ViewWrite<unknown>, exclusive: boolean): Promise<StoredRanges | undefined> {
  const { sql } = table;
  const lineage = await tx.query<{ generation: number | string }>(exclusive ? sql.lockLineageForRanges : sql.lockLineageForNewRanges);
  let generation = generationOf(table, lineage.rows);
  const own = await lockPartitions(tx, sql, partitionsOf(write));
  const changed = write.partitions.filter((c) => c.range !== undefined && !sameRange(c.range, own.get(c.partition)?.range));
  if (changed.length === 0) return undefined;
  // The whole write is fenced here already, so that a refused write stores no range either.
  const others = await selectRanges(tx, sql, write.partitions.flatMap((c) => {
    const range = c.range ?? own.get(c.partition)?.range;
    return range ? [range] : [];
  }));
  // Each partition's range once stored, against every other partition's range: the others' stored ones
  // (a partition of this write whose range changes included, with its old range: conservative) and the
  // new ones of this write.
  const rangeAfter = new Map(write.partitions.map((c) => [c.partition, c.range ?? own.get(c.partition)?.range]));
  const overlapsAnother = (partition: string): boolean => {
    const range = rangeAfter.get(partition);
    if (range === undefined) return false;
    const stored = others.some((o) => o.partition !== partition && rangesOverlap(o.range, range));
    return stored || [...rangeAfter].some(([p, r]) => p !== partition && r !== undefined && rangesOverlap(r, range));
  };
  const overlapping = changed.some((c) => overlapsAnother(c.partition));
  if (overlapping && !exclusive) throw new RangesOverlap();
  for (const commit of write.partitions) {
    const current = storedPartition(commit, own.get(commit.partition), others);
    if (isFenced(commit.epoch, current)) throw new ViewFencedError(commit.partition, commit.epoch, fenceEpoch(current));
  }
  const ranges = changed.map((c) => ({ partition_id: c.partition, epoch: c.epoch, range_min: c.range!.minInclusive, range_max: c.range!.maxExclusive }));
  await tx.query(sql.storeRanges, [JSON.stringify(ranges)]);
  if (overlapping) generation = generationOf(table, (await tx.query<{ generation: number | string }>(sql.bumpLineage)).rows);
  const known = new Map<string, KnownPartition>();
  const newEpochs = new Map(changed.map((c) => [c.partition, c.epoch]));
  for (const [partition, row] of own) {
    const epoch = Math.max(row.epoch, newEpochs.get(partition) ?? row.epoch);
    const range = rangeAfter.get(partition) ?? row.range;
    known.set(partition, { epoch, lsn: row.lsn, range, aloneAt: range !== undefined && !overlapsAnother(partition) ? generation : undefined });
  }
  return { known, generation };
}

/**
 * In a write's transaction: locks the lineage row (against range stores) and the write's partitions' rows,
 * and reads their state and the partitions stored over their ranges (the range fence, and the marks a split
 * or merge child inherits). Throws {@link RangesNotStored} when a commit's range is not stored yet.
 */
export async function lockFence(tx: SqlSession, table: RangeFenceTable, write: ViewWrite<unknown>): Promise<FenceState> {
  const { sql } = table;
  const generation = generationOf(table, (await tx.query<{ generation: number | string }>(sql.lockLineage)).rows);
  const partitions = partitionsOf(write);
  const own = partitions.length > 0 ? await lockPartitions(tx, sql, partitions) : new Map<string, KnownPartition>();
  if (bringsNewRange(write, (p) => own.get(p)?.range)) throw new RangesNotStored();
  const ranges = new Map<string, FeedRange | undefined>(write.partitions.map((c) => [c.partition, c.range ?? own.get(c.partition)?.range]));
  const wanted = [...ranges.values()].flatMap((r) => (r ? [r] : []));
  const others = wanted.length > 0 ? await selectRanges(tx, sql, wanted) : [];
  const stored = new Map<string, StoredPartition>();
  for (const commit of write.partitions) {
    const current = storedPartition(commit, own.get(commit.partition), others);
    if (current) stored.set(commit.partition, current);
  }
  const expected = new Map([...own].map(([partition, { epoch, lsn }]) => [partition, { epoch, lsn }]));
  return { generation, expected, ranges, stored };
}
