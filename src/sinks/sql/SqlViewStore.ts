import { logger } from '../../internal/log.js';
import type {
  ViewPartitionState,
  ViewRow,
  ViewStore,
  ViewWrite,
  ViewWriteResult,
} from '../ViewStore.js';
import { inheritedLsn, partitionsOf, planWrite } from '../internal/planWrite.js';
import type { StoredPartition } from '../internal/planWrite.js';
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
 * one transaction of at most five set-based statements (lock partitions, upsert rows, write tombstones,
 * delete rows, commit positions), whatever the number of changes.
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
        return await runner.transaction((tx) => this.#apply(tx, write));
      } catch (error) {
        if (attempt >= MAX_ATTEMPTS || !isRetryableSqlError(error)) throw error;
        log('%s: retrying write after %s (attempt %d)', this.description, (error as Error).message, attempt);
      }
    }
  }

  async #apply(tx: SqlSession, write: ViewWrite<R>): Promise<ViewWriteResult> {
    const stored = new Map<string, StoredPartition>();
    const partitions = partitionsOf(write);
    if (partitions.length > 0) {
      const locked = await tx.query<{ partition_id: string; epoch: number | string; lsn: number | string | null }>(
        this.sql.lockPartitions,
        [JSON.stringify(partitions)],
      );
      for (const row of locked.rows) stored.set(row.partition_id, { epoch: Number(row.epoch), lsn: num(row.lsn) });
    }
    // A partition without a mark of its own (a split child's first write) inherits the marks over its range.
    for (const commit of write.partitions) {
      const own = stored.get(commit.partition);
      if (own?.lsn !== undefined || !commit.range) continue;
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
      if (lsn !== undefined) stored.set(commit.partition, { epoch: own?.epoch ?? 0, lsn });
    }
    const plan = planWrite(write, stored);
    const guarded = write.mode === 'guarded';
    let written = 0;
    let deleted = 0;
    if (plan.upserts.length > 0) {
      const input = plan.upserts.map((c) => ({
        key: c.key,
        doc: c.row,
        lsn: c.lsn,
        ts_ms: c.timestampMs,
        partition_id: c.partition,
      }));
      written = (await tx.query(guarded ? this.sql.upsertGuarded : this.sql.upsertUnguarded, [JSON.stringify(input)])).rowCount;
    }
    if (plan.deletes.length > 0) {
      const input = JSON.stringify(plan.deletes.map((c) => ({ key: c.key, lsn: c.lsn, ts_ms: c.timestampMs })));
      if (guarded) await tx.query(this.sql.tombstone, [input]);
      deleted = (await tx.query(guarded ? this.sql.deleteGuarded : this.sql.deleteUnguarded, [input])).rowCount;
    }
    if (plan.commits.length > 0) {
      const input = plan.commits.map((c) => ({
        partition_id: c.partition,
        position: c.position ?? null,
        epoch: c.epoch,
        lsn: c.lsn ?? null,
        range_min: c.range?.minInclusive ?? null,
        range_max: c.range?.maxExclusive ?? null,
      }));
      await tx.query(this.sql.commitPositions, [JSON.stringify(input)]);
    }
    return { written, deleted, skipped: write.changes.length - written - deleted };
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

function toViewRow<R>(row: RowRecord): ViewRow<R> {
  return {
    key: row.key,
    row: row.doc as R,
    lsn: Number(row.lsn),
    timestampMs: Number(row.ts_ms),
    partition: row.partition_id,
  };
}
