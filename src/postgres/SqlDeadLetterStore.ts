import { InvalidOptionsError } from '../errors/index.js';
import type { SqlRunner } from './sql/SqlRunner.js';
import type { DeadLetter, DeadLetterWriter } from '../deadletter/DeadLetter.js';
import { type DeadLetterQuery, type DeadLetterStore, queryLimit } from '../deadletter/DeadLetterSink.js';
import { raiseFence, writerRange } from '../deadletter/fence.js';

const NAME = /^[a-z_][a-z0-9_]{0,50}$/;

interface LetterRow {
  id: string;
  lease_token: string;
  lsn: string | number;
  document_id: string;
  operation: DeadLetter['operation'];
  document: unknown;
  partition_key: unknown;
  error: DeadLetter['error'];
  attempts: number;
  epoch: number;
  dead_lettered_at_ms: string | number;
}

/**
 * The dead-letter table in PostgreSQL, for pg and PGlite alike: `<schema>.<table>` holds the letters (each with
 * the key range of the writer that stored it), `<schema>.<table>_fences` the highest epoch per key range. Each
 * write is one transaction: the fence check and raise, then one set-based insert that keeps one letter per
 * change along a lineage (a split child's letter of a change its parent dead-lettered is not added).
 *
 * The base class of `PostgresDeadLetterStore` and `PGliteDeadLetterStore`; use those.
 */
export class SqlDeadLetterStore<T> implements DeadLetterStore<T> {
  /** What the store writes to, for logs and events (never a secret). */
  readonly description: string;
  readonly #open: () => Promise<SqlRunner>;
  readonly #letters: string;
  readonly #fences: string;
  readonly #schema: string;
  readonly #table: string;
  #runner: Promise<SqlRunner> | undefined;

  constructor(schema: string, table: string, description: string, open: () => Promise<SqlRunner>) {
    if (!NAME.test(schema)) throw new InvalidOptionsError('schema', `${JSON.stringify(schema)} must be a lower-case SQL name (a-z, 0-9, _)`);
    if (!NAME.test(table)) throw new InvalidOptionsError('table', `${JSON.stringify(table)} must be a lower-case SQL name (a-z, 0-9, _)`);
    this.description = description;
    this.#open = open;
    this.#letters = `"${schema}"."${table}"`;
    this.#fences = `"${schema}"."${table}_fences"`;
    this.#schema = schema;
    this.#table = table;
  }

  /** Opens the connection and creates the tables if missing; rejects when the database cannot be reached. */
  ready(): Promise<SqlRunner> {
    this.#runner ??= (async () => {
      const runner = await this.#open();
      await runner.query(`CREATE SCHEMA IF NOT EXISTS "${this.#schema}"`);
      await runner.query(
        `CREATE TABLE IF NOT EXISTS ${this.#letters} (id text PRIMARY KEY, lease_token text NOT NULL, lsn bigint NOT NULL,
          document_id text NOT NULL, operation text NOT NULL, document jsonb, partition_key jsonb, error jsonb NOT NULL,
          attempts int NOT NULL, epoch bigint NOT NULL, dead_lettered_at_ms bigint NOT NULL)`,
      );
      // Added later: tables created before get the writer's range (null: the whole key space) and the index here.
      await runner.query(`ALTER TABLE ${this.#letters} ADD COLUMN IF NOT EXISTS range_min text COLLATE "C"`);
      await runner.query(`ALTER TABLE ${this.#letters} ADD COLUMN IF NOT EXISTS range_max text COLLATE "C"`);
      await runner.query(`CREATE INDEX IF NOT EXISTS "${this.#table}_change" ON ${this.#letters} (document_id, lsn)`);
      await runner.query(
        `CREATE TABLE IF NOT EXISTS ${this.#fences} (min_inclusive text COLLATE "C" NOT NULL, max_exclusive text COLLATE "C" NOT NULL,
          epoch bigint NOT NULL, PRIMARY KEY (min_inclusive, max_exclusive))`,
      );
      return runner;
    })().catch((error: unknown) => {
      this.#runner = undefined;
      throw error;
    });
    return this.#runner;
  }

  /** Writes dead letters in one transaction, refused with `DeadLetterFencedError` for a writer whose epoch is below one seen for an overlapping range. */
  async write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void> {
    const runner = await this.ready();
    const range = writerRange(writer);
    await runner.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.#fences]);
      const { rows } = await tx.query<{ min_inclusive: string; max_exclusive: string; epoch: string | number }>(
        `SELECT min_inclusive, max_exclusive, epoch FROM ${this.#fences} WHERE min_inclusive < $2 AND $1 < max_exclusive`,
        [range.minInclusive, range.maxExclusive],
      );
      // The shared rule (throws when fenced) over the entries overlapping the writer's range.
      raiseFence(rows.map((r) => ({ minInclusive: r.min_inclusive, maxExclusive: r.max_exclusive, epoch: Number(r.epoch) })), writer);
      await tx.query(
        `INSERT INTO ${this.#fences} (min_inclusive, max_exclusive, epoch) VALUES ($1, $2, $3)
         ON CONFLICT (min_inclusive, max_exclusive) DO UPDATE SET epoch = GREATEST(${this.#fences}.epoch, EXCLUDED.epoch)`,
        [range.minInclusive, range.maxExclusive, writer.epoch],
      );
      if (letters.length === 0) return;
      const records = letters.map((l) => ({
        id: l.id,
        lease_token: l.leaseToken,
        lsn: l.lsn,
        document_id: l.documentId,
        operation: l.operation,
        document: l.document ?? null,
        partition_key: l.partitionKey === undefined ? null : l.partitionKey,
        error: l.error,
        attempts: l.attempts,
        epoch: l.epoch,
        dead_lettered_at_ms: l.deadLetteredAtMs,
      }));
      // A letter of a change already stored along the lineage (same document, LSN and partition key, by a
      // writer over an overlapping range) is not added: the first one stays.
      await tx.query(
        `INSERT INTO ${this.#letters} (id, lease_token, lsn, document_id, operation, document, partition_key, error, attempts, epoch,
          dead_lettered_at_ms, range_min, range_max)
         SELECT x.*, $2, $3 FROM jsonb_to_recordset($1::jsonb) AS x(id text, lease_token text, lsn bigint, document_id text,
          operation text, document jsonb, partition_key jsonb, error jsonb, attempts int, epoch bigint, dead_lettered_at_ms bigint)
         WHERE NOT EXISTS (SELECT 1 FROM ${this.#letters} l WHERE l.document_id = x.document_id AND l.lsn = x.lsn
           AND l.partition_key IS NOT DISTINCT FROM x.partition_key
           AND (l.range_min IS NULL OR l.range_min < $3) AND (l.range_max IS NULL OR $2 < l.range_max))
         ON CONFLICT (id) DO NOTHING`,
        [JSON.stringify(records), range.minInclusive, range.maxExclusive],
      );
    });
  }

  /** The dead letters matching `query` (all by default), oldest first. */
  async list(query?: DeadLetterQuery): Promise<DeadLetter<T>[]> {
    const limit = queryLimit(query);
    const runner = await this.ready();
    const { rows } = await runner.query<LetterRow>(
      `SELECT * FROM ${this.#letters} WHERE ($1::text IS NULL OR lease_token = $1)
       ORDER BY dead_lettered_at_ms, lease_token, lsn LIMIT $2`,
      [query?.leaseToken ?? null, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      leaseToken: r.lease_token,
      lsn: Number(r.lsn),
      documentId: r.document_id,
      operation: r.operation,
      document: (r.document ?? undefined) as T | undefined,
      ...(r.partition_key !== null && r.partition_key !== undefined ? { partitionKey: r.partition_key } : {}),
      error: r.error,
      attempts: r.attempts,
      epoch: Number(r.epoch),
      deadLetteredAtMs: Number(r.dead_lettered_at_ms),
    }));
  }

  /** Removes the dead letters with these ids (after a redrive). */
  async remove(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const runner = await this.ready();
    await runner.query(`DELETE FROM ${this.#letters} WHERE id = ANY($1::text[])`, [[...ids]]);
  }

  /** Closes what the store opened itself (a pool from a connection string, an in-memory PGlite). */
  async close(): Promise<void> {
    const runner = this.#runner;
    this.#runner = undefined;
    if (runner) await (await runner).close();
  }
}
