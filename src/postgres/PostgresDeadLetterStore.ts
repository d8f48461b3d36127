import { InvalidOptionsError } from '../errors/index.js';
import { openPGlite } from './PGliteViewStore.js';
import { describeConnectionString, type PGliteLike, pgRunner, type PostgresConnection } from './sql/SqlRunner.js';
import { SqlDeadLetterStore } from './SqlDeadLetterStore.js';

/** Options of {@link PostgresDeadLetterStore}. */
export interface PostgresDeadLetterStoreOptions {
  /** A connection string (rxfeed opens and closes its own `pg` pool), or a `pg` `Pool` or connected `Client` you own. */
  readonly connection: PostgresConnection;
  /** Table name (lower-case SQL name); `<table>_fences` is created next to it. Default `'rxfeed_dead_letters'`. */
  readonly table?: string;
  /** Schema, created if missing. Default `'public'`. */
  readonly schema?: string;
  /** Pool size when `connection` is a string. Default `2` (connections). */
  readonly poolMax?: number;
}

/**
 * A dead-letter table in PostgreSQL through `pg` (an optional peer dependency, loaded on first use), fenced
 * by lease epoch per key range. Letters can be listed, removed and re-driven.
 *
 * @example
 * ```ts
 * import { PostgresDeadLetterStore } from 'rxfeed/postgres';
 * const deadLetter = new PostgresDeadLetterStore({ connection: process.env.DATABASE_URL!, table: 'orders_poison' });
 * ```
 */
export class PostgresDeadLetterStore<T = unknown> extends SqlDeadLetterStore<T> {
  constructor(options: PostgresDeadLetterStoreOptions) {
    const { connection, table = 'rxfeed_dead_letters', schema = 'public', poolMax = 2 } = options ?? ({} as PostgresDeadLetterStoreOptions);
    if (connection === undefined || connection === null || (typeof connection !== 'string' && typeof connection !== 'object')) {
      throw new InvalidOptionsError('connection', 'give a PostgreSQL connection string, a pg Pool or a connected pg Client');
    }
    if (!Number.isInteger(poolMax) || poolMax < 1) throw new InvalidOptionsError('poolMax', `${poolMax} must be a whole number of connections, at least 1`);
    const description = `postgres dead letters ${schema}.${table} (${typeof connection === 'string' ? describeConnectionString(connection) : 'pg'})`;
    super(schema, table, description, () => pgRunner(connection, description, poolMax));
  }
}

/** Options of {@link PGliteDeadLetterStore}. */
export interface PGliteDeadLetterStoreOptions {
  /** A PGlite instance you own (shared with a `PGliteViewStore`, say); default: a new one rxfeed opens. */
  readonly pglite?: PGliteLike | Promise<PGliteLike>;
  /** Where a new PGlite keeps its data; default in memory. */
  readonly dataDir?: string;
  /** Table name (lower-case SQL name). Default `'rxfeed_dead_letters'`. */
  readonly table?: string;
  /** Schema, created if missing. Default `'public'`. */
  readonly schema?: string;
}

/**
 * A dead-letter table in embedded PostgreSQL (PGlite, an optional peer dependency), with the same schema and
 * fencing as {@link PostgresDeadLetterStore}.
 *
 * @example
 * ```ts
 * import { PGliteDeadLetterStore } from 'rxfeed/postgres';
 * const deadLetter = new PGliteDeadLetterStore({ dataDir: './data/poison' });
 * ```
 */
export class PGliteDeadLetterStore<T = unknown> extends SqlDeadLetterStore<T> {
  constructor(options: PGliteDeadLetterStoreOptions = {}) {
    const { pglite, dataDir, table = 'rxfeed_dead_letters', schema = 'public' } = options;
    if (dataDir !== undefined && (typeof dataDir !== 'string' || dataDir === '')) {
      throw new InvalidOptionsError('dataDir', 'give a directory path, or leave it out for an in-memory database');
    }
    const description = `pglite dead letters ${schema}.${table}${dataDir ? ` (${dataDir})` : ''}`;
    super(schema, table, description, () => openPGlite(pglite, dataDir, description));
  }
}
