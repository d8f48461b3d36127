import type { ViewWrite, ViewWriteResult } from '../../sinks/ViewStore.js';
import type { FeedRange } from '../../core/Partition.js';
import type { PartitionCommit, StoredPartition, WritePlan } from '../../sinks/internal/planWrite.js';
import type { SqlSession } from './SqlRunner.js';
import type { ViewSql } from './viewSql.js';

/**
 * The guarded one-statement write of the PostgreSQL view store: a write planned on a state of its partitions
 * and of the lineage, applied by one set-based statement that checks that state under its row locks (see
 * {@link ViewSql.writeGuarded}).
 *
 * @internal
 */

/** A write planned on a state of its partitions (as stored in their rows) and of the lineage. */
export interface PlannedWrite<R> {
  /** Each partition's row as the plan assumes it: its epoch and own LSN mark. */
  readonly expected: ReadonlyMap<string, StoredPartition>;
  /** The lineage generation the plan saw (no range was stored since). */
  readonly generation: number;
  /** Each partition's key range (the commit's, or the one stored with it): what the range fence checks. */
  readonly ranges: ReadonlyMap<string, FeedRange | undefined>;
  readonly plan: WritePlan<R>;
}

/** What a write did, and what it stored for its partitions. */
export interface WriteOutcome {
  readonly result: ViewWriteResult;
  readonly commits: readonly PartitionCommit[];
  readonly ranges: ReadonlyMap<string, FeedRange | undefined>;
  readonly generation: number;
}

/**
 * Applies a plan as one statement, if the lineage generation and the partitions still hold the state it was
 * made on and no other partition wrote a higher epoch over their ranges (checked under their row locks);
 * `undefined` when they do not, and nothing was written. Outside a transaction this is the whole write in
 * one round trip (the statement is prepared once per connection).
 */
export async function writePlanned<R>(
  session: SqlSession,
  sql: ViewSql,
  write: ViewWrite<R>,
  { expected, generation, ranges, plan }: PlannedWrite<R>,
): Promise<WriteOutcome | undefined> {
  const state = [...expected].map(([partition_id, s]) => ({ partition_id, epoch: s.epoch, lsn: s.lsn ?? null }));
  const statement = write.mode === 'guarded' ? sql.writeGuarded : sql.writeUnguarded;
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
