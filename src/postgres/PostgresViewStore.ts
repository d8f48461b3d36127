import { InvalidOptionsError } from '../errors/index.js';
import { SqlViewStore } from './sql/SqlViewStore.js';
import { describeConnectionString, pgRunner } from './sql/SqlRunner.js';
import type { PostgresConnection } from './sql/SqlRunner.js';

/** Options of {@link PostgresViewStore}. */
export interface PostgresViewStoreOptions {
  /**
   * Where to write: a connection string (rxfeed opens and closes its own `pg` pool), or a `pg` `Pool` or
   * connected `Client` you own (never closed by rxfeed; a single client runs one transaction at a time).
   */
  readonly connection: PostgresConnection;
  /** Rows table name (lower-case SQL name). rxfeed also creates `<table>_tombstones`, `<table>_positions` and `<table>_lineage`. */
  readonly table: string;
  /** Schema, created if missing. Default `'public'`. */
  readonly schema?: string;
  /**
   * Typed columns copied from each row's top-level properties next to the JSON `doc` column, name → SQL
   * type, for reporting queries and indexes. Example: `{ customer: 'text', total: 'numeric(12,2)' }`.
   * Default none.
   */
  readonly columns?: Readonly<Record<string, string>>;
  /** Pool size when `connection` is a string. Default 4 (connections). */
  readonly poolMax?: number;
  /**
   * Whether the statement most writes come down to is a named prepared statement, parsed and planned once per
   * connection instead of once per write. Set `false` behind a connection pooler that does not keep prepared
   * statements across transactions (PgBouncer in transaction mode before 1.21). Default `true`.
   */
  readonly prepare?: boolean;
}

/**
 * A `ViewStore` (see `rxfeed`) in PostgreSQL through `pg` (an optional peer dependency, loaded on first use). Rows
 * live in `<schema>.<table>` (`key`, `doc` jsonb, `lsn`, `ts_ms`, `partition_id`, plus your `columns`);
 * tables are created on first use. Each write is atomic: one statement once the store has written the
 * partition before, else one transaction of a few set-based statements.
 *
 * @example
 * ```ts
 * import { materializeToView, checkpointEvery } from 'rxfeed';
 * import { PostgresViewStore } from 'rxfeed/postgres';
 * const view = new PostgresViewStore<{ customer: string; total: number }>({
 *   connection: process.env.DATABASE_URL!, table: 'order_summary', columns: { customer: 'text', total: 'numeric' },
 * });
 * feed$.pipe(materializeToView(view, { project: (c) => c.document && { customer: c.document.customer, total: c.document.total } }), checkpointEvery(500));
 * ```
 */
export class PostgresViewStore<R> extends SqlViewStore<R> {
  constructor(options: PostgresViewStoreOptions) {
    const { connection, table, schema = 'public', columns, poolMax = 4, prepare = true } = options ?? ({} as PostgresViewStoreOptions);
    if (connection === undefined || connection === null || (typeof connection !== 'string' && typeof connection !== 'object')) {
      throw new InvalidOptionsError('connection', 'give a PostgreSQL connection string, a pg Pool or a connected pg Client');
    }
    if (!Number.isInteger(poolMax) || poolMax < 1) {
      throw new InvalidOptionsError('poolMax', `${poolMax} must be a whole number of connections, at least 1`);
    }
    if (typeof prepare !== 'boolean') throw new InvalidOptionsError('prepare', `${String(prepare)} must be true or false`);
    const where = typeof connection === 'string' ? describeConnectionString(connection) : 'pg';
    const description = `postgres view ${schema}.${table} (${where})`;
    super({ schema, table, columns }, description, () => pgRunner(connection, description, poolMax, prepare));
  }

  /** Creates the store and its tables; rejects when PostgreSQL cannot be reached or `pg` is missing. */
  static async create<R>(options: PostgresViewStoreOptions): Promise<PostgresViewStore<R>> {
    const store = new PostgresViewStore<R>(options);
    await store.ready();
    return store;
  }
}
