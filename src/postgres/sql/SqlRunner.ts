import { importOptional } from '../../internal/importOptional.js';
import { logger } from '../../internal/log.js';

/** Result of one statement, the same for pg and PGlite. */
export interface SqlResult<Row> {
  /** The rows the statement returned. */
  readonly rows: Row[];
  /** Rows inserted, updated or deleted by the statement. */
  readonly rowCount: number;
}

/** Something that runs one statement with `$1`-style parameters. */
export interface SqlSession {
  /**
   * Runs one statement; `params` fill `$1`, `$2`, … With `name`, the statement is prepared under that name on
   * each connection the first time it runs there, then only bound and executed (`name` must always come with
   * the same text). Runners that do not prepare statements ignore it.
   */
  query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[], name?: string): Promise<SqlResult<Row>>;
}

/**
 * The one seam between rxfeed's SQL and a PostgreSQL driver: pg (pool, client or connection string) and
 * PGlite both speak PostgreSQL, so every statement is written once against this. A SQL view store's
 * `ready()` resolves with its runner, to query the view over the same connection.
 *
 * @example
 * ```ts
 * const runner = await view.ready();
 * const { rows } = await runner.query<{ n: number }>('select count(*)::int as n from order_summary');
 * ```
 */
export interface SqlRunner extends SqlSession {
  /** Names the database in logs and errors, without credentials. */
  readonly description: string;
  /** Runs `fn` in one transaction: commits when it resolves, rolls back when it rejects. */
  transaction<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  /** Releases what the runner opened itself. */
  close(): Promise<void>;
}

/** The part of a `pg` query result rxfeed uses. */
export interface PgQueryResultLike {
  /** The rows returned. */
  rows: unknown[];
  /** Rows the statement changed, when it reports them. */
  rowCount: number | null;
}

/** A statement `pg` prepares under `name` on a connection the first time it runs there. */
export interface PgNamedQuery {
  /** Name of the prepared statement, the same for the same text. */
  readonly name: string;
  /** The statement. */
  readonly text: string;
  /** Values of `$1`, `$2`, … */
  readonly values?: unknown[];
}

/** The part of a `pg` `Pool` rxfeed uses (structural, so rxfeed's types do not need `@types/pg`). */
export interface PgPoolLike {
  /** Runs one statement on a pooled connection. */
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  /** Runs a named (prepared) statement on a pooled connection. */
  query(query: PgNamedQuery): Promise<PgQueryResultLike>;
  /** Checks a client out of the pool (for transactions). */
  connect(): Promise<PgPoolClientLike>;
  /** Closes every connection of the pool. */
  end(): Promise<void>;
  /** Connections open in the pool. */
  readonly totalCount: number;
  /** pg pools emit `error` when an idle connection dies; rxfeed listens on the pools it creates. */
  on?(event: 'error', listener: (error: Error) => void): unknown;
  /** pg pools emit `connect` with each new client. */
  on?(event: 'connect', listener: (client: { on(event: 'error', listener: (error: Error) => void): unknown }) => void): unknown;
}

/** A client checked out of a `pg` pool. */
export interface PgPoolClientLike {
  /** Runs one statement on this client. */
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  /** Runs a named (prepared) statement on this client. */
  query(query: PgNamedQuery): Promise<PgQueryResultLike>;
  /** Returns the client to the pool (an error, or `true`, discards it). */
  release(err?: Error | boolean): void;
  /** A checked-out client emits `error` when its connection dies between statements. */
  on?(event: 'error', listener: (error: Error) => void): unknown;
  /** Removes an `error` listener. */
  off?(event: 'error', listener: (error: Error) => void): unknown;
}

/** The part of a connected `pg` `Client` rxfeed uses. */
export interface PgClientLike {
  /** Runs one statement. */
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  /** Runs a named (prepared) statement. */
  query(query: PgNamedQuery): Promise<PgQueryResultLike>;
}

/** The part of a PGlite instance rxfeed uses. */
export interface PGliteLike {
  /** Runs one statement. */
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[]; affectedRows?: number }>;
  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: { query(text: string, params?: unknown[]): Promise<{ rows: unknown[]; affectedRows?: number }> }) => Promise<T>): Promise<T>;
  /** Closes the database. */
  close(): Promise<void>;
}

function pgResult<Row>(result: PgQueryResultLike): SqlResult<Row> {
  return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
}

/** Runs `text` on a pg pool or client, as a named prepared statement when `name` is given. */
function pgQuery(target: Pick<PgClientLike, 'query'>, text: string, params: readonly unknown[] | undefined, name: string | undefined) {
  const values = params ? [...params] : undefined;
  return name ? target.query({ name, text, values }) : target.query(text, values);
}

/**
 * A runner over a `pg` pool; `ownsPool` ends the pool on close. With `prepare` (default), statements the
 * store names are prepared once per connection.
 */
export function pgPoolRunner(pool: PgPoolLike, description: string, ownsPool: boolean, prepare = true): SqlRunner {
  return {
    description,
    async query<Row>(text: string, params?: readonly unknown[], name?: string) {
      return pgResult<Row>(await pgQuery(pool, text, params, prepare ? name : undefined));
    },
    async transaction<T>(fn: (session: SqlSession) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      // A connection that dies between two statements emits `error` on the checked-out client (an unhandled
      // `error` event ends the process); the next statement then rejects, which is what the caller sees.
      let broken: Error | undefined;
      const onError = (error: Error) => {
        broken = error;
        logger('sql')('%s: connection of a transaction failed: %s', description, error.message);
      };
      client.on?.('error', onError);
      const release = (error?: Error) => {
        client.off?.('error', onError);
        client.release(error ?? broken);
      };
      const session: SqlSession = {
        query: async <Row>(text: string, params?: readonly unknown[], name?: string) =>
          pgResult<Row>(await pgQuery(client, text, params, prepare ? name : undefined)),
      };
      try {
        await client.query('BEGIN');
        const value = await fn(session);
        await client.query('COMMIT');
        release();
        return value;
      } catch (error) {
        try {
          await client.query('ROLLBACK');
          release();
        } catch (rollbackError) {
          // The connection is unusable: drop it from the pool instead of handing it out again.
          release(rollbackError as Error);
        }
        throw error;
      }
    },
    async close() {
      if (ownsPool) await pool.end();
    },
  };
}

/**
 * A runner over one connected `pg` client. A client runs one transaction at a time, so transactions (and
 * statements outside them) are queued. With `prepare` (default), statements the store names are prepared once.
 */
export function pgClientRunner(client: PgClientLike, description: string, prepare = true): SqlRunner {
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
  const session: SqlSession = {
    query: async <Row>(text: string, params?: readonly unknown[], name?: string) =>
      pgResult<Row>(await pgQuery(client, text, params, prepare ? name : undefined)),
  };
  return {
    description,
    query: (text, params, name) => serial(() => session.query(text, params, name)),
    transaction: <T>(fn: (s: SqlSession) => Promise<T>) =>
      serial(async () => {
        await client.query('BEGIN');
        try {
          const value = await fn(session);
          await client.query('COMMIT');
          return value;
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        }
      }),
    async close() {},
  };
}

/** A runner over a PGlite instance (which serializes transactions itself); `owns` closes it on close. */
export function pgliteRunner(db: PGliteLike, description: string, owns: boolean): SqlRunner {
  const wrap = (target: Pick<PGliteLike, 'query'>): SqlSession => ({
    async query<Row>(text: string, params?: readonly unknown[]) {
      const result = await target.query(text, params ? [...params] : undefined);
      return { rows: result.rows as Row[], rowCount: result.affectedRows ?? 0 };
    },
  });
  return {
    description,
    ...wrap(db),
    transaction: (fn) => db.transaction((tx) => fn(wrap(tx))),
    async close() {
      if (owns) await db.close();
    },
  };
}

/** True for a PGlite instance (it has `exec` and `transaction`, a pg pool or client has neither). */
export function isPGlite(value: unknown): value is PGliteLike {
  const v = value as Partial<Record<string, unknown>> | null;
  return typeof v === 'object' && v !== null && typeof v.transaction === 'function' && typeof v.exec === 'function';
}

/** True for a `pg` pool (it counts its clients). */
export function isPgPool(value: unknown): value is PgPoolLike {
  const v = value as Partial<Record<string, unknown>> | null;
  return typeof v === 'object' && v !== null && typeof v.connect === 'function' && typeof v.totalCount === 'number';
}

/** A PostgreSQL connection rxfeed can write through. */
export type PostgresConnection = string | PgPoolLike | PgClientLike;

/**
 * Opens a runner for a pg connection string, pool or client (loading `pg` only for a string). `prepare`: see
 * {@link pgPoolRunner}.
 */
export async function pgRunner(connection: PostgresConnection, description: string, poolMax: number, prepare = true): Promise<SqlRunner> {
  if (typeof connection === 'string') {
    type PoolConstructor = new (config: { connectionString: string; max: number }) => PgPoolLike;
    // pg is CommonJS: its exports sit on `default` when imported from ESM.
    const mod = (await importOptional('pg', () => import('pg'), 'A PostgreSQL connection string')) as unknown as {
      Pool?: PoolConstructor;
      default?: { Pool?: PoolConstructor };
    };
    const Pool = mod.default?.Pool ?? mod.Pool;
    if (!Pool) throw new Error('the installed pg package has no Pool export');
    const pool = new Pool({ connectionString: connection, max: poolMax });
    // An idle connection closed by the server (restart, failover, a proxy's idle timeout) is reported here;
    // without a listener Node ends the process. The pool drops that connection and opens a new one on demand.
    pool.on?.('error', (error) => logger('sql')('%s: idle connection closed: %s', description, error.message));
    // And a connection can die while checked out with no statement running, between pg-pool's listeners
    // (a server's FATAL message read in the same chunk as the last reply): every client of the pool listens
    // for its whole life; the statement that uses it next rejects, and that is what the caller sees.
    pool.on?.('connect', (client) => client.on('error', (error) => logger('sql')('%s: connection closed: %s', description, error.message)));
    return pgPoolRunner(pool, description, true, prepare);
  }
  if (isPgPool(connection)) return pgPoolRunner(connection, description, false, prepare);
  // A PGlite instance also looks like a client (it has `query`), but reports row counts differently.
  if (isPGlite(connection)) return pgliteRunner(connection, description, false);
  return pgClientRunner(connection, description, prepare);
}

/** Error codes worth retrying a whole transaction for: deadlock and serialization failure. */
export function isRetryableSqlError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** Describes a connection string for logs without its password. */
export function describeConnectionString(connection: string): string {
  try {
    const url = new URL(connection);
    return `${url.protocol}//${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname}`;
  } catch {
    return 'postgresql';
  }
}
