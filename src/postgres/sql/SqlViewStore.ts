import { logger } from '../../internal/log.js';
import type {
  ViewPartitionState,
  ViewRow,
  ViewStore,
  ViewWrite,
  ViewWriteResult,
} from '../../sinks/ViewStore.js';
import type { FeedRange } from '../../core/Partition.js';
import { fenceEpoch, isFenced, partitionsOf, planWrite, storedPartition } from '../../sinks/internal/planWrite.js';
import { rangesOverlap } from '../../core/Partition.js';
import type { PartitionCommit, StoredPartition, StoredRange, WritePlan } from '../../sinks/internal/planWrite.js';
import { ViewFencedError } from '../../errors/ViewFencedError.js';
import { isRetryableSqlError } from './SqlRunner.js';
import type { SqlRunner, SqlSession } from './SqlRunner.js';
import { viewSql } from './viewSql.js';
import type { ViewSql, ViewTableSpec } from './viewSql.js';

const log = logger('view');
const MAX_ATTEMPTS = 4;

interface RowRecord {
  key: string;
  doc: unknown;
  lsn: number | string | bigint;
  ts_ms: number | string | bigint;
  partition_id: string;
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
interface KnownPartition extends StoredPartition {
  readonly range: FeedRange | undefined;
  /**
   * The lineage generation at which no other partition had a range stored over part of this one's: until
   * the generation moves, it has no mark to inherit (and no range fence), so a partition without a mark of
   * its own may be written in one statement too. `undefined` when not known to be so.
   */
  readonly aloneAt?: number | undefined;
}

/** What a range store committed for the write's partitions, and the lineage generation it left. */
interface StoredRanges {
  readonly known: ReadonlyMap<string, KnownPartition>;
  readonly generation: number;
}

const num = (value: number | string | bigint | null | undefined): number | undefined =>
  value === null || value === undefined ? undefined : Number(value);

const rangeOf = (r: { range_min: string | null; range_max: string | null }): FeedRange | undefined =>
  r.range_min !== null && r.range_max !== null ? { minInclusive: r.range_min, maxExclusive: r.range_max } : undefined;

const sameRange = (a: FeedRange | undefined, b: FeedRange | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && a.minInclusive === b.minInclusive && a.maxExclusive === b.maxExclusive);

/** Thrown inside a write's transaction when a partition's range is not stored (it must be stored first). */
class RangesNotStored extends Error {}

/**
 * Thrown inside a range store that locked the lineage row against range stores only, when a range turns out
 * to overlap another partition's stored range: it is stored again with the lineage row locked exclusively.
 */
class RangesOverlap extends Error {}

/**
 * The PostgreSQL implementation of {@link ViewStore}, over any {@link SqlRunner} (pg or PGlite). Each write is
 * atomic, and one set-based statement whatever the number of changes: it locks the lineage row and the
 * write's partitions, checks that they hold the state the write was planned on and that no other partition
 * wrote a higher epoch over their key ranges (the range fence), and upserts rows, writes tombstones, deletes
 * rows and commits positions. Once the store has written a partition, it plans the next write of it on what
 * it committed, so that write is that statement alone (one round trip, prepared once per connection).
 * Otherwise (a first write, another writer in between, a new range stored, a fencing rejection) the write is
 * a transaction that locks and reads the partitions and the ranges overlapping theirs first, plans on what it
 * read, then runs the same statement.
 *
 * The base class of `PostgresViewStore` and `PGliteViewStore`; use those.
 */
export class SqlViewStore<R> implements ViewStore<R> {
  /** What the store writes to, for logs and events (never a secret). */
  readonly description: string;
  /** The schema-qualified, quoted name of the rows table (for your own queries). */
  readonly tableName: string;
  /** @internal The statements of this table. */
  protected readonly sql: ViewSql;
  readonly #open: () => Promise<SqlRunner>;
  /**
   * Per partition, the epoch, LSN mark and range this store's last write of it committed: the next write is
   * planned on them and sent as one statement that checks them under lock (see {@link ViewSql.writeGuarded}).
   */
  readonly #known = new Map<string, KnownPartition>();
  /** The lineage generation this store last saw; fast writes are planned on it. */
  #generation: number | undefined;
  #ready: Promise<SqlRunner> | undefined;
  /** The range store other writes may still join (its transaction has not begun); see {@link SqlViewStore.#storeRangesTogether}. */
  #rangeStore: RangeStoreGroup<R> | undefined;
  #closed = false;

  /** @internal Subclasses open the driver. */
  protected constructor(spec: ViewTableSpec, description: string, open: () => Promise<SqlRunner>) {
    this.sql = viewSql(spec);
    this.tableName = this.sql.qualified;
    this.description = description;
    this.#open = open;
  }

  /** Opens the connection (loading the driver) and creates the tables if they do not exist. Idempotent. */
  ready(): Promise<SqlRunner> {
    if (this.#closed) return Promise.reject(new Error(`${this.description} is closed`));
    this.#ready ??= this.#init().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  async #init(): Promise<SqlRunner> {
    const runner = await this.#open();
    await runner.transaction(async (tx) => {
      // Concurrent first starts would race on CREATE … IF NOT EXISTS (unique violations in the catalog).
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.sql.lockName]);
      for (const ddl of this.sql.ddl) await tx.query(ddl);
    });
    log('%s ready', this.description);
    return runner;
  }

  /** Writes one batch of rows for one partition in one transaction, fenced by lease epoch along the lineage; see `ViewStore.write`. */
  async write(write: ViewWrite<R>): Promise<ViewWriteResult> {
    if (write.changes.length === 0 && write.partitions.length === 0) return { written: 0, deleted: 0, skipped: 0 };
    const runner = await this.ready();
    // Ranges this store has not seen stored are stored first, in a short transaction (shared with the writes
    // that store ranges at the same time: a fresh view's partitions' first writes).
    let newRanges = write.partitions.some((c) => c.range !== undefined && !sameRange(c.range, this.#known.get(c.partition)?.range));
    let exclusive = false;
    for (let attempt = 1; ; attempt++) {
      try {
        if (newRanges) {
          const stored = exclusive ? await runner.transaction((tx) => this.#storeRanges(tx, write, true)) : await this.#storeRangesTogether(runner, write);
          // Planned on what the range store committed, the write is one statement as well.
          if (stored) this.#rememberStored(stored, partitionsOf(write));
        }
        newRanges = false;
        const known = this.#planOnKnown(write);
        let outcome = known && (await this.#writeAs(runner, write, known));
        if (known && !outcome) log('%s: partitions or ranges changed since this store last wrote; writing in a transaction', this.description);
        outcome ??= await runner.transaction((tx) => this.#lockAndWrite(tx, write));
        this.#remember(outcome);
        return outcome.result;
      } catch (error) {
        for (const commit of write.partitions) this.#known.delete(commit.partition);
        if (error instanceof RangesOverlap && !exclusive) {
          exclusive = true; // at most once per write: an exclusive range store never throws it
          attempt--;
          continue;
        }
        if (error instanceof RangesNotStored) {
          newRanges = true; // stored ranges were removed in between (clearPositions): store them again
          if (attempt < MAX_ATTEMPTS) continue;
        }
        if (attempt >= MAX_ATTEMPTS || !isRetryableSqlError(error)) throw error;
        log('%s: retrying write after %s (attempt %d)', this.description, (error as Error).message, attempt);
      }
    }
  }

  /**
   * Stores the ranges of a write's commits that their partitions do not have stored yet (a split or merge
   * child's first write, a first write after a restart), fenced like a write and raising the epochs. A
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
  async #storeRanges(tx: SqlSession, write: ViewWrite<R>, exclusive: boolean): Promise<StoredRanges | undefined> {
    const lineage = await tx.query<{ generation: number | string }>(exclusive ? this.sql.lockLineageForRanges : this.sql.lockLineageForNewRanges);
    let generation = this.#generationOf(lineage.rows);
    const own = new Map<string, KnownPartition>();
    const locked = await tx.query<PartitionRecord>(this.sql.lockPartitions, [JSON.stringify(partitionsOf(write))]);
    for (const row of locked.rows) own.set(row.partition_id, { epoch: Number(row.epoch), lsn: num(row.lsn), range: rangeOf(row) });
    const changed = write.partitions.filter((c) => c.range !== undefined && !sameRange(c.range, own.get(c.partition)?.range));
    if (changed.length === 0) return undefined;
    // The whole write is fenced here already, so that a refused write stores no range either.
    const wanted = write.partitions.flatMap((c) => {
      const range = c.range ?? own.get(c.partition)?.range;
      return range ? [{ range_min: range.minInclusive, range_max: range.maxExclusive }] : [];
    });
    const others = (await tx.query<PartitionRecord>(this.sql.selectRanges, [JSON.stringify(wanted)])).rows.map((row) => ({
      partition: row.partition_id,
      range: rangeOf(row)!,
      epoch: Number(row.epoch),
      lsn: num(row.lsn),
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
    await tx.query(this.sql.storeRanges, [JSON.stringify(ranges)]);
    if (overlapping) generation = this.#generationOf((await tx.query<{ generation: number | string }>(this.sql.bumpLineage)).rows);
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
   * Stores the new ranges of `write` in one transaction with those of the other writes that need ranges stored
   * while its transaction begins (the partitions of a fresh view, whose first writes come at once): range
   * stores queue one at a time on the lineage row, so `n` partitions' first writes would otherwise wait for
   * `n` transactions in turn. Together they are one {@link SqlViewStore.#storeRanges} over all their commits,
   * with its checks (fencing, overlaps, between them too) unchanged. When that fails (one of them fenced,
   * ranges over another's, a deadlock), nothing was stored and each stores its own alone, as it would have
   * without the others: a refused write gets its own error, the others are not refused with it.
   */
  async #storeRangesTogether(runner: SqlRunner, write: ViewWrite<R>): Promise<StoredRanges | undefined> {
    const partitions = partitionsOf(write);
    let group = this.#rangeStore;
    if (group === undefined || partitions.some((p) => group!.partitions.has(p))) {
      const next: RangeStoreGroup<R> = { writes: [write], partitions: new Set(partitions) };
      this.#rangeStore = group = next;
      next.stored = runner.transaction((tx) => {
        // Its transaction has begun: writes that need ranges stored from now on go in the next one.
        if (this.#rangeStore === next) this.#rangeStore = undefined;
        const together = next.writes.length === 1 ? write : { mode: write.mode, changes: [], partitions: next.writes.flatMap((w) => w.partitions) };
        return this.#storeRanges(tx, together, false);
      });
    } else {
      group.writes.push(write);
      for (const p of partitions) group.partitions.add(p);
    }
    try {
      return await group.stored!;
    } catch (error) {
      if (group.writes.length === 1) throw error;
      log('%s: storing %d writes\' ranges together failed (%s); storing each alone', this.description, group.writes.length, (error as Error).message);
      return runner.transaction((tx) => this.#storeRanges(tx, write, false));
    }
  }

  /** The generation of the lineage row as a lock statement returned it. */
  #generationOf(rows: readonly { generation: number | string }[]): number {
    const generation = Number(rows[0]?.generation ?? NaN);
    if (Number.isNaN(generation)) throw new Error(`${this.description}: the lineage row of ${this.tableName} is missing (was the table emptied by hand?)`);
    return generation;
  }

  /**
   * The plan of a write made on what this store committed last for its partitions, or `undefined` when that
   * is not known for each of them (a first write, a failed one), a commit brings a range not stored yet, a
   * split child may need its parents' marks, or the plan would be refused (only the stored epoch may say so).
   */
  #planOnKnown(write: ViewWrite<R>): PlannedWrite<R> | undefined {
    if (write.partitions.length === 0 || this.#generation === undefined) return undefined;
    const expected = new Map<string, StoredPartition>();
    const ranges = new Map<string, FeedRange | undefined>();
    for (const commit of write.partitions) {
      const known = this.#known.get(commit.partition);
      // A partition without a mark of its own may inherit one from the ranges stored over its own (a split or
      // merge child): the transaction reads them. Unless none was, as of the generation the plan is made on.
      if (known === undefined || (known.lsn === undefined && commit.range && known.aloneAt !== this.#generation)) return undefined;
      if (commit.range !== undefined && !sameRange(commit.range, known.range)) return undefined;
      expected.set(commit.partition, { epoch: known.epoch, lsn: known.lsn });
      ranges.set(commit.partition, known.range);
    }
    try {
      return { expected, generation: this.#generation, ranges, plan: planWrite(write, expected) };
    } catch (error) {
      if (error instanceof ViewFencedError) return undefined;
      throw error;
    }
  }

  /**
   * The transaction a write falls back on: locks the lineage row and its partitions' rows, reads their state
   * and the partitions stored over their ranges (the range fence, and the marks a split or merge child
   * inherits), plans the write on it, and applies it.
   */
  async #lockAndWrite(tx: SqlSession, write: ViewWrite<R>): Promise<WriteOutcome> {
    const generation = this.#generationOf((await tx.query<{ generation: number | string }>(this.sql.lockLineage)).rows);
    const own = new Map<string, KnownPartition>();
    const partitions = partitionsOf(write);
    if (partitions.length > 0) {
      const locked = await tx.query<PartitionRecord>(this.sql.lockPartitions, [JSON.stringify(partitions)]);
      for (const row of locked.rows) own.set(row.partition_id, { epoch: Number(row.epoch), lsn: num(row.lsn), range: rangeOf(row) });
    }
    if (write.partitions.some((c) => c.range !== undefined && !sameRange(c.range, own.get(c.partition)?.range))) throw new RangesNotStored();
    const ranges = new Map<string, FeedRange | undefined>(write.partitions.map((c) => [c.partition, c.range ?? own.get(c.partition)?.range]));
    const wanted = [...ranges.values()].flatMap((r) => (r ? [{ range_min: r.minInclusive, range_max: r.maxExclusive }] : []));
    const others: StoredRange[] = [];
    if (wanted.length > 0) {
      for (const row of (await tx.query<PartitionRecord>(this.sql.selectRanges, [JSON.stringify(wanted)])).rows) {
        others.push({ partition: row.partition_id, range: rangeOf(row)!, epoch: Number(row.epoch), lsn: num(row.lsn) });
      }
    }
    const stored = new Map<string, StoredPartition>();
    for (const commit of write.partitions) {
      const current = storedPartition(commit, own.get(commit.partition), others);
      if (current) stored.set(commit.partition, current);
    }
    const expected = new Map([...own].map(([partition, { epoch, lsn }]) => [partition, { epoch, lsn }]));
    const outcome = await this.#writeAs(tx, write, { expected, generation, ranges, plan: planWrite(write, stored) });
    // The rows are locked by this transaction since it read them: nobody can have changed them.
    if (!outcome) throw new Error(`${this.description}: partition rows changed under this transaction's locks`);
    return outcome;
  }

  /**
   * Applies a plan as one statement, if the lineage generation and the partitions still hold the state it was
   * made on and no other partition wrote a higher epoch over their ranges (checked under their row locks);
   * `undefined` when they do not, and nothing was written. Outside a transaction this is the whole write in
   * one round trip.
   */
  async #writeAs(session: SqlSession, write: ViewWrite<R>, { expected, generation, ranges, plan }: PlannedWrite<R>): Promise<WriteOutcome | undefined> {
    const state = [...expected].map(([partition_id, s]) => ({ partition_id, epoch: s.epoch, lsn: s.lsn ?? null }));
    const statement = write.mode === 'guarded' ? this.sql.writeGuarded : this.sql.writeUnguarded;
    const result = await session.query<{ ok: boolean; written: number; deleted: number }>(
      statement.text,
      [JSON.stringify(state), upsertInput(plan), deleteInput(plan), commitInput(plan, ranges), generation],
      statement.name,
    );
    const row = result.rows[0];
    if (!row?.ok) return undefined;
    const { written, deleted } = row;
    return { result: { written, deleted, skipped: write.changes.length - written - deleted }, commits: plan.commits, ranges, generation };
  }

  /** Notes what a committed range store left in the rows of `partitions` (a write's own: another write of the same store may have moved on from the others). */
  #rememberStored({ known, generation }: StoredRanges, partitions: readonly string[]): void {
    for (const partition of partitions) {
      const state = known.get(partition);
      if (state) this.#known.set(partition, state);
    }
    this.#generation = Math.max(generation, this.#generation ?? generation);
  }

  /** Notes what a committed write stored for its partitions. */
  #remember({ commits, ranges, generation }: WriteOutcome): void {
    for (const c of commits) this.#known.set(c.partition, { epoch: c.epoch, lsn: c.lsn, range: ranges.get(c.partition) });
    this.#generation = Math.max(generation, this.#generation ?? generation);
  }

  /** The row of `key`, if there is one (tombstones are not rows). */
  async get(key: string): Promise<ViewRow<R> | undefined> {
    const runner = await this.ready();
    const result = await runner.query<RowRecord>(this.sql.selectOne, [key]);
    const row = result.rows[0];
    return row && toViewRow<R>(row);
  }

  /** Every row of the view (not tombstones). */
  async rows(): Promise<ViewRow<R>[]> {
    const runner = await this.ready();
    return (await runner.query<RowRecord>(this.sql.selectAll)).rows.map((row) => toViewRow<R>(row));
  }

  /** The position each partition wrote up to, with its epoch (what `alignLeasesWithView` copies into the leases). */
  async positions(): Promise<ReadonlyMap<string, ViewPartitionState>> {
    const runner = await this.ready();
    const result = await runner.query<{
      partition_id: string;
      position: string;
      epoch: number | string;
      lsn: number | string | null;
      range_min: string | null;
      range_max: string | null;
    }>(this.sql.selectPositions);
    return new Map(
      result.rows.map((r) => [
        r.partition_id,
        {
          position: r.position,
          epoch: Number(r.epoch),
          lsn: num(r.lsn),
          ...(r.range_min !== null && r.range_max !== null ? { range: { minInclusive: r.range_min, maxExclusive: r.range_max } } : {}),
        },
      ]),
    );
  }

  /** Removes tombstones of deletes committed before `beforeTimestampMs` (ms since the epoch); resolves to how many. Only safe for times no replay reaches back to. */
  async pruneTombstones(beforeTimestampMs: number): Promise<number> {
    const runner = await this.ready();
    return (await runner.query(this.sql.pruneTombstones, [Math.floor(beforeTimestampMs)])).rowCount;
  }

  /** Forgets every partition's position, epoch, range and LSN mark (rows and tombstones stay), after the lease container was recreated. */
  async clearPositions(): Promise<void> {
    const runner = await this.ready();
    this.#known.clear();
    await runner.query(this.sql.clearPositions);
  }

  /** Releases what the store opened itself (never a pool or database you passed in). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const ready = this.#ready;
    this.#ready = undefined;
    if (ready) await (await ready.catch(() => undefined))?.close();
  }

  /** Runs a read-only query on the store's connection (for subclasses such as the search index). */
  protected async query<Row>(text: string, params?: readonly unknown[]): Promise<Row[]> {
    const runner = await this.ready();
    return (await runner.query<Row>(text, params)).rows;
  }
}

/** A write planned on a state of its partitions (as stored in their rows) and of the lineage. */
interface PlannedWrite<R> {
  /** Each partition's row as the plan assumes it: its epoch and own LSN mark. */
  readonly expected: ReadonlyMap<string, StoredPartition>;
  /** The lineage generation the plan saw (no range was stored since). */
  readonly generation: number;
  /** Each partition's key range (the commit's, or the one stored with it): what the range fence checks. */
  readonly ranges: ReadonlyMap<string, FeedRange | undefined>;
  readonly plan: WritePlan<R>;
}

/** Writes whose new ranges one transaction stores together: their commits' partitions are distinct. */
interface RangeStoreGroup<R> {
  readonly writes: ViewWrite<R>[];
  readonly partitions: Set<string>;
  /** What the transaction committed for all of them. */
  stored?: Promise<StoredRanges | undefined>;
}

/** What a write did, and what it stored for its partitions. */
interface WriteOutcome {
  readonly result: ViewWriteResult;
  readonly commits: readonly PartitionCommit[];
  readonly ranges: ReadonlyMap<string, FeedRange | undefined>;
  readonly generation: number;
}

/** The upserts of a plan, as the write statement takes them. */
function upsertInput(plan: WritePlan<unknown>): string {
  return JSON.stringify(
    plan.upserts.map((c) => ({ key: c.key, doc: c.row, lsn: c.lsn, ts_ms: c.timestampMs, partition_id: c.partition })),
  );
}

/** The deletes of a plan (its tombstones too), as the write statement takes them. */
function deleteInput(plan: WritePlan<unknown>): string {
  return JSON.stringify(plan.deletes.map((c) => ({ key: c.key, lsn: c.lsn, ts_ms: c.timestampMs })));
}

/** The partition commits of a plan with their ranges, as the write statement takes them. */
function commitInput(plan: WritePlan<unknown>, ranges: ReadonlyMap<string, FeedRange | undefined>): string {
  return JSON.stringify(
    plan.commits.map((c) => {
      const range = c.range ?? ranges.get(c.partition);
      return {
        partition_id: c.partition,
        position: c.position ?? null,
        epoch: c.epoch,
        lsn: c.lsn ?? null,
        range_min: range?.minInclusive ?? null,
        range_max: range?.maxExclusive ?? null,
      };
    }),
  );
}

function toViewRow<R>(row: RowRecord): ViewRow<R> {
  return {
    key: row.key,
    row: row.doc as R,
    lsn: Number(row.lsn),
    timestampMs: Number(row.ts_ms),
    partition: row.partition_id,
  };
}
