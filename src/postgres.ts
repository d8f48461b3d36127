/**
 * `rxfeed/postgres`: views, full-text search and dead letters on PostgreSQL (`pg`) or PGlite
 * (`@electric-sql/pglite`). Install the driver you use; neither is needed by the `rxfeed` entry point.
 *
 * @example
 * ```ts
 * import { PGliteViewStore } from 'rxfeed/postgres';
 * const view = await PGliteViewStore.create<{ total: number }>({ table: 'order_summary', dataDir: './views' });
 * ```
 *
 * @packageDocumentation
 */
export { PostgresViewStore, type PostgresViewStoreOptions } from './sinks/PostgresViewStore.js';
export { PGliteViewStore, type PGliteViewStoreOptions } from './sinks/PGliteViewStore.js';
export { PostgresSearchIndex, type PostgresSearchIndexOptions } from './sinks/PostgresSearchIndex.js';
export type { SqlViewStore } from './sinks/sql/SqlViewStore.js';
export type { SqlDeadLetterStore } from './deadletter/SqlDeadLetterStore.js';
export type { SqlRunner, SqlSession, SqlResult, PgQueryResultLike, PgNamedQuery, PgPoolLike, PgPoolClientLike, PgClientLike, PGliteLike, PostgresConnection } from './sinks/sql/SqlRunner.js';
export * from './deadletter/postgres.js';
