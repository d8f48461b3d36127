import type { ViewPartitionState, ViewRow } from '../../sinks/ViewStore.js';
import type { SqlRunner } from './SqlRunner.js';
import type { ViewSql } from './viewSql.js';
import { num } from './rangeFence.js';

/**
 * The tables of one view: creating them, and reading their records into the store's types.
 *
 * @internal
 */

/** A row of the rows table, as the select statements return it. */
export interface RowRecord {
  key: string;
  doc: unknown;
  lsn: number | string | bigint;
  ts_ms: number | string | bigint;
  partition_id: string;
}

/** A row of `<table>_positions`, as {@link ViewSql.selectPositions} returns it. */
export interface PositionRecord {
  partition_id: string;
  position: string;
  epoch: number | string;
  lsn: number | string | null;
  range_min: string | null;
  range_max: string | null;
}

/** Creates the view's tables if they do not exist, under an advisory lock (concurrent first starts would race on `CREATE … IF NOT EXISTS`). */
export async function createViewTables(runner: SqlRunner, sql: ViewSql): Promise<void> {
  await runner.transaction(async (tx) => {
    // Concurrent first starts would race on CREATE … IF NOT EXISTS (unique violations in the catalog).
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [sql.lockName]);
    for (const ddl of sql.ddl) await tx.query(ddl);
  });
}

/** A row record as a {@link ViewRow}. */
export function toViewRow<R>(row: RowRecord): ViewRow<R> {
  return {
    key: row.key,
    row: row.doc as R,
    lsn: Number(row.lsn),
    timestampMs: Number(row.ts_ms),
    partition: row.partition_id,
  };
}

/** A position record as a {@link ViewPartitionState}. */
export function toPartitionState(r: PositionRecord): ViewPartitionState {
  return {
    position: r.position,
    epoch: Number(r.epoch),
    lsn: num(r.lsn),
    ...(r.range_min !== null && r.range_max !== null ? { range: { minInclusive: r.range_min, maxExclusive: r.range_max } } : {}),
  };
}
