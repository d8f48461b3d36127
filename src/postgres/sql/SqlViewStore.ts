import { logger } from '../../internal/log.js';
import type { ViewPartitionState, ViewRow, ViewStore, ViewWrite, ViewWriteOptions, ViewWriteResult } from '../../sinks/ViewStore.js';
import { partitionsOf, planWrite } from '../../sinks/internal/planWrite.js';
import { isRetryableSqlError } from './SqlRunner.js';
import type { SqlRunner, SqlSession } from './SqlRunner.js';
import { viewSql } from './viewSql.js';
import type { ViewSql, ViewTableSpec } from './viewSql.js';
import { bringsNewRange, lockFence, RangesNotStored, RangesOverlap } from './rangeFence.js';
import type { RangeFenceTable } from './rangeFence.js';
import { SharedRangeStore } from './sharedRangeStore.js';
import { writePlanned } from './guardedWrite.js';
import type { WriteOutcome } from './guardedWrite.js';
import { KnownPartitions } from './knownPartitions.js';
import { createViewTables, toPartitionState, toViewRow } from './viewTables.js';
import type { PositionRecord, RowRecord } from './viewTables.js';

const log = logger('view');
const MAX_ATTEMPTS = 4;

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
 * The parts: the one-statement write (`guardedWrite.ts`) planned on what this store committed last
 * (`knownPartitions.ts`), the range fence (`rangeFence.ts`: storing ranges, and the locks and reads of the
 * transaction), first writes' range stores shared (`sharedRangeStore.ts`), the tables (`viewTables.ts`).
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
  /** What this store's last write of each partition committed: the next write is planned on it (one statement). */
  readonly #known = new KnownPartitions();
  /** The statements and description the range fence takes. */
  readonly #table: RangeFenceTable;
  /** Stores the new ranges of writes that come together in one transaction. */
  readonly #rangeStore: SharedRangeStore;
  #ready: Promise<SqlRunner> | undefined;
  #closed = false;

  /** @internal Subclasses open the driver. */
  protected constructor(spec: ViewTableSpec, description: string, open: () => Promise<SqlRunner>) {
    this.sql = viewSql(spec);
    this.tableName = this.sql.qualified;
    this.description = description;
    this.#open = open;
    this.#table = { sql: this.sql, description };
    this.#rangeStore = new SharedRangeStore(this.#table);
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
    await createViewTables(runner, this.sql);
    log('%s ready', this.description);
    return runner;
  }

  /**
   * Writes one batch of rows for one partition in one transaction, fenced by lease epoch along the lineage; see
   * `ViewStore.write`. Once `signal` aborted, the write sends nothing more and rejects with its reason: a
   * transaction of its own is rolled back instead of committed. What was sent before stays: a range store
   * (shared with other writes, committed on its own) and the one-statement write (it commits as it runs:
   * once sent, the write resolves with its result).
   */
  async write(write: ViewWrite<R>, options?: ViewWriteOptions): Promise<ViewWriteResult> {
    const signal = options?.signal;
    signal?.throwIfAborted();
    if (write.changes.length === 0 && write.partitions.length === 0) return { written: 0, deleted: 0, skipped: 0 };
    const runner = await this.ready();
    // Ranges this store has not seen stored are stored first, in a short transaction (shared with the writes
    // that store ranges at the same time: a fresh view's partitions' first writes).
    let newRanges = bringsNewRange(write, (p) => this.#known.rangeOf(p));
    let exclusive = false;
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      try {
        if (newRanges) {
          const stored = exclusive ? await this.#rangeStore.storeExclusively(runner, write) : await this.#rangeStore.store(runner, write);
          // Planned on what the range store committed, the write is one statement as well.
          if (stored) this.#known.rememberStored(stored, partitionsOf(write));
        }
        newRanges = false;
        signal?.throwIfAborted();
        const known = this.#known.plan(write);
        let outcome = known && (await writePlanned(runner, this.sql, write, known));
        if (known && !outcome) log('%s: partitions or ranges changed since this store last wrote; writing in a transaction', this.description);
        outcome ??= await runner.transaction((tx) => this.#lockAndWrite(tx, write, signal));
        this.#known.remember(outcome);
        return outcome.result;
      } catch (error) {
        this.#known.forget(write.partitions.map((c) => c.partition));
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
   * The transaction a write falls back on: locks the lineage row and its partitions' rows, reads their state
   * and the partitions stored over their ranges (the range fence, and the marks a split or merge child
   * inherits), plans the write on it, and applies it.
   */
  async #lockAndWrite(tx: SqlSession, write: ViewWrite<R>, signal: AbortSignal | undefined): Promise<WriteOutcome> {
    signal?.throwIfAborted();
    const { generation, expected, ranges, stored } = await lockFence(tx, this.#table, write);
    signal?.throwIfAborted();
    const outcome = await writePlanned(tx, this.sql, write, { expected, generation, ranges, plan: planWrite(write, stored) });
    // The rows are locked by this transaction since it read them: nobody can have changed them.
    if (!outcome) throw new Error(`${this.description}: partition rows changed under this transaction's locks`);
    // Nobody waits for the write any more: thrown here, it rolls back instead of committing.
    signal?.throwIfAborted();
    return outcome;
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
    const result = await runner.query<PositionRecord>(this.sql.selectPositions);
    return new Map(result.rows.map((r) => [r.partition_id, toPartitionState(r)]));
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
