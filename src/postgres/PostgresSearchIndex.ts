import { InvalidOptionsError } from '../errors/index.js';
import type { SearchDocument, SearchHit, SearchIndex, SearchOptions } from '../sinks/SearchIndex.js';
import { openPGlite } from './PGliteViewStore.js';
import { SqlViewStore } from './sql/SqlViewStore.js';
import { describeConnectionString, isPGlite, pgRunner } from './sql/SqlRunner.js';
import type { PGliteLike, PostgresConnection } from './sql/SqlRunner.js';

/** Options of {@link PostgresSearchIndex}. */
export interface PostgresSearchIndexOptions {
  /**
   * Where the index lives: a PostgreSQL connection string, a `pg` `Pool` or connected `Client`, or a PGlite
   * instance (or a promise of one). Only a connection string opens (and later closes) its own pool.
   */
  readonly connection: PostgresConnection | PGliteLike | Promise<PGliteLike>;
  /** Table name (lower-case SQL name); `<table>_tombstones`, `<table>_positions` and `<table>_lineage` are created too. */
  readonly table: string;
  /** Schema, created if missing. Default `'public'`. */
  readonly schema?: string;
  /** PostgreSQL text search configuration (stemming, stop words): `'english'`, `'simple'`, `'german'`… Default `'english'`. */
  readonly language?: string;
  /** As `PostgresViewStoreOptions.prepare` (ignored by PGlite). Default `true`. */
  readonly prepare?: boolean;
}

/**
 * A {@link SearchIndex} on PostgreSQL full-text search (pg or PGlite): documents in a table with a stored,
 * generated `tsvector` column (title weighted A, text weighted B) and a GIN index; writes are the same
 * set-based, version-guarded transactions as the view stores; `search` ranks by `ts_rank`.
 *
 * @example
 * ```ts
 * import { syncToIndex, checkpointEvery } from 'rxfeed';
 * import { PostgresSearchIndex } from 'rxfeed/postgres';
 * const index = new PostgresSearchIndex({ connection: process.env.DATABASE_URL!, table: 'product_search' });
 * feed$.pipe(syncToIndex(index, { document: (c) => ({ title: c.document!.name, text: c.document!.description }) }), checkpointEvery(500));
 * console.log(await index.search('red shoes', { limit: 5 }));
 * ```
 */
export class PostgresSearchIndex extends SqlViewStore<SearchDocument> implements SearchIndex {
  readonly #search: string;

  constructor(options: PostgresSearchIndexOptions) {
    const { connection, table, schema = 'public', language = 'english', prepare = true } = options ?? ({} as PostgresSearchIndexOptions);
    if (connection === undefined || connection === null || (typeof connection !== 'string' && typeof connection !== 'object')) {
      throw new InvalidOptionsError('connection', 'give a PostgreSQL connection string, a pg Pool or Client, or a PGlite instance');
    }
    if (typeof language !== 'string' || !/^[a-z_]+$/.test(language)) {
      throw new InvalidOptionsError('language', `${JSON.stringify(language)} must be a text search configuration name such as 'english' or 'simple'`);
    }
    if (typeof prepare !== 'boolean') throw new InvalidOptionsError('prepare', `${String(prepare)} must be true or false`);
    const config = `'${language}'::regconfig`;
    const pglite = typeof connection === 'object' && (connection instanceof Promise || isPGlite(connection));
    const where = typeof connection === 'string' ? describeConnectionString(connection) : pglite ? 'pglite' : 'pg';
    const description = `search index ${schema}.${table} (${where})`;
    super(
      {
        schema,
        table,
        generated: [
          {
            name: 'tsv',
            type: 'tsvector',
            expression:
              `setweight(to_tsvector(${config}, coalesce(doc->>'title', '')), 'A') || ` +
              `setweight(to_tsvector(${config}, coalesce(doc->>'text', '')), 'B')`,
          },
        ],
        extraDdl: [`CREATE INDEX IF NOT EXISTS "${table}_tsv" ON {table} USING gin (tsv)`],
      },
      description,
      () =>
        pglite
          ? openPGlite(connection as PGliteLike | Promise<PGliteLike>, undefined, description)
          : pgRunner(connection as PostgresConnection, description, 4, prepare),
    );
    this.#search = `SELECT key, doc, ts_rank(t.tsv, q) AS rank
      FROM ${this.tableName} AS t, websearch_to_tsquery(${config}, $1) AS q
      WHERE t.tsv @@ q ORDER BY rank DESC, key LIMIT $2`;
  }

  /** Full-text search (`websearch_to_tsquery`): the best matches first, ranked by `ts_rank`. */
  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    const limit = options.limit ?? 10;
    if (!Number.isInteger(limit) || limit < 1) throw new InvalidOptionsError('limit', `${limit} must be a whole number of hits, at least 1`);
    const rows = await this.query<{ key: string; doc: SearchDocument; rank: number | string }>(this.#search, [query, limit]);
    return rows.map((r) => ({ id: r.key, document: r.doc, rank: Number(r.rank) }));
  }

  /** Creates the index and its table; rejects when the database cannot be reached or a driver is missing. */
  static async create(options: PostgresSearchIndexOptions): Promise<PostgresSearchIndex> {
    const index = new PostgresSearchIndex(options);
    await index.ready();
    return index;
  }
}
