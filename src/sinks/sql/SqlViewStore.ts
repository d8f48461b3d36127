import { logger } from '../../internal/log.js';
import type {
  ViewPartitionState,
  ViewRow,
  ViewStore,
  ViewWrite,
  ViewWriteResult,
} from '../ViewStore.js';
import { inheritedLsn, partitionsOf, planWrite } from '../internal/planWrite.js';
import type { PartitionCommit, StoredPartition, WritePlan } from '../internal/planWrite.js';
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

const num = (value: number | string | bigint | null | undefined): number | undefined =>
  value === null || value === undefined ? undefined : Number(value);

/**
 * The PostgreSQL implementation of {@link ViewStore}, over any {@link SqlRunner} (pg or PGlite). Each write is
 * atomic, and one set-based statement whatever the number of changes: it locks the write's partitions, checks
 * that they hold the state the write was planned on, and upserts rows, writes tombstones, deletes rows and
 * commits positions. Once the store has written a partition, it plans the next write of it on what it
 * committed, so that write is that statement alone (one round trip, prepared once per connection).
 * Otherwise (a first write, another writer in between, a fencing rejection) the write is a transaction
 * that locks and reads the partitions first, plans on what it read, then runs the same statement.
 *
 * The base class of `PostgresViewStore` and `PGliteViewStore`; use those.
 */
export class SqlViewStore<R> implements ViewStore<R> {
  readonly description: string;
  /** The schema-qualified, quoted name of the rows table (for your own queries). */
  readonly tableName: string;
  /** @internal The statements of this table. */
  protected readonly sql: ViewSql;
  readonly #open: () => Promise<SqlRunner>;
  /**
   * Per partition, the epoch and LSN mark this store's last write of it committed: the next write is planned
   * on them and sent as one statement that checks them under lock (see {@link ViewSql.writeGuarded}).
   */
  readonly #known = new Map<string, StoredPartition>();
  #ready: Promise<SqlRunner> | undefined;
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

  async write(write: ViewWrite<R>): Promise<ViewWriteResult> {
    if (write.changes.length === 0 && write.partitions.length === 0) return { written: 0, deleted: 0, skipped: 0 };
    const runner = await this.ready();
    for (let attempt = 1; ; attempt++) {
      try {
        const known = this.#planOnKnown(write);
        let outcome = known && (await this.#writeAs(runner, write, known));
        if (known && !outcome) log('%s: partitions changed since this store last wrote them; writing in a transaction', this.description);
        outcome ??= await runner.transaction((tx) => this.#lockAndWrite(tx, write));
        this.#remember(outcome.commits);
        return outcome.result;
      } catch (error) {
        for (const commit of write.partitions) this.#known.delete(commit.partition);
        if (attempt >= MAX_ATTEMPTS || !isRetryableSqlError(error)) throw error;
        log('%s: retrying write after %s (attempt %d)', this.description, (error as Error).message, attempt);
      }
    }
  }

  /**
   * The plan of a write made on what this store committed last for its partitions, or `undefined` when that
   * is not known for each of them (a first write, a failed one), or a split child may need its parents'
   * marks, or the plan would be refused (only the stored epoch may say so).
   */
  #planOnKnown(write: ViewWrite<R>): PlannedWrite<R> | undefined {
    if (write.partitions.length === 0) return undefined;
    const expected = new Map<string, StoredPartition>();
    for (const commit of write.partitions) {
      const known = this.#known.get(commit.partition);
      if (known === undefined || (known.lsn === undefined && commit.range)) return undefined;
      expected.set(commit.partition, known);
    }
    try {
      return { expected, plan: planWrite(write, expected) };
    } catch (error) {
      if (error instanceof ViewFencedError) return undefined;
      throw error;
    }
  }

  /**
   * The transaction a write falls back on: locks its partitions' rows, reads their state (and the marks a
   * split child inherits), plans the write on it, and applies it.
   */
  async #lockAndWrite(tx: SqlSession, write: ViewWrite<R>): Promise<WriteOutcome> {
    const own = new Map<string, StoredPartition>();
    const partitions = partitionsOf(write);
    if (partitions.length > 0) {
      const locked = await tx.query<{ partition_id: string; epoch: number | string; lsn: number | string | null }>(
        this.sql.lockPartitions,
        [JSON.stringify(partitions)],
      );
      for (const row of locked.rows) own.set(row.partition_id, { epoch: Number(row.epoch), lsn: num(row.lsn) });
    }
    const stored = new Map(own);
    // A partition without a mark of its own (a split child's first write) inherits the marks over its range.
    for (const commit of write.partitions) {
      const current = own.get(commit.partition);
      if (current?.lsn !== undefined || !commit.range) continue;
      const { minInclusive, maxExclusive } = commit.range;
      const marks = await tx.query<{ range_min: string; range_max: string; lsn: number | string }>(this.sql.selectMarks, [
        minInclusive,
        maxExclusive,
        commit.partition,
      ]);
      const lsn = inheritedLsn(
        commit.range,
        marks.rows.map((m) => ({ range: { minInclusive: m.range_min, maxExclusive: m.range_max }, lsn: Number(m.lsn) })),
      );
      if (lsn !== undefined) stored.set(commit.partition, { epoch: current?.epoch ?? 0, lsn });
    }
    const outcome = await this.#writeAs(tx, write, { expected: own, plan: planWrite(write, stored) });
    // The rows are locked by this transaction since it read them: nobody can have changed them.
    if (!outcome) throw new Error(`${this.description}: partition rows changed under this transaction's locks`);
    return outcome;
  }

  /**
   * Applies a plan as one statement, if the partitions still hold the state it was made on (checked under
   * their row locks); `undefined` when they do not, and nothing was written. Outside a transaction this is
   * the whole write in one round trip.
   */
  async #writeAs(session: SqlSession, write: ViewWrite<R>, { expected, plan }: PlannedWrite<R>): Promise<WriteOutcome | undefined> {
    const state = [...expected].map(([partition_id, s]) => ({ partition_id, epoch: s.epoch, lsn: s.lsn ?? null }));
    const statement = write.mode === 'guarded' ? this.sql.writeGuarded : this.sql.writeUnguarded;
    const result = await session.query<{ ok: boolean; written: number; deleted: number }>(
      statement.text,
      [JSON.stringify(state), upsertInput(plan), deleteInput(plan), commitInput(plan)],
      statement.name,
    );
    const row = result.rows[0];
    if (!row?.ok) return undefined;
    const { written, deleted } = row;
    return { result: { written, deleted, skipped: write.changes.length - written - deleted }, commits: plan.commits };
  }

  /** Notes what a committed write stored for its partitions. */
  #remember(commits: readonly PartitionCommit[]): void {
    for (const c of commits) this.#known.set(c.partition, { epoch: c.epoch, lsn: c.lsn });
  }

  async get(key: string): Promise<ViewRow<R> | undefined> {
    const runner = await this.ready();
    const result = await runner.query<RowRecord>(this.sql.selectOne, [key]);
    const row = result.rows[0];
    return row && toViewRow<R>(row);
  }

  async rows(): Promise<ViewRow<R>[]> {
    const runner = await this.ready();
    return (await runner.query<RowRecord>(this.sql.selectAll)).rows.map((row) => toViewRow<R>(row));
  }

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

  async pruneTombstones(beforeTimestampMs: number): Promise<number> {
    const runner = await this.ready();
    return (await runner.query(this.sql.pruneTombstones, [Math.floor(beforeTimestampMs)])).rowCount;
  }

  async clearPositions(): Promise<void> {
    const runner = await this.ready();
    this.#known.clear();
    await runner.query(this.sql.clearPositions);
  }

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

/** A write planned on a state of its partitions (as stored in their rows). */
interface PlannedWrite<R> {
  /** Each partition's row as the plan assumes it: its epoch and own LSN mark. */
  readonly expected: ReadonlyMap<string, StoredPartition>;
  readonly plan: WritePlan<R>;
}

/** What a write did, and what it stored for its partitions. */
interface WriteOutcome {
  readonly result: ViewWriteResult;
  readonly commits: readonly PartitionCommit[];
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

/** The partition commits of a plan, as the write statement takes them. */
function commitInput(plan: WritePlan<unknown>): string {
  return JSON.stringify(
    plan.commits.map((c) => ({
      partition_id: c.partition,
      position: c.position ?? null,
      epoch: c.epoch,
      lsn: c.lsn ?? null,
      range_min: c.range?.minInclusive ?? null,
      range_max: c.range?.maxExclusive ?? null,
    })),
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
