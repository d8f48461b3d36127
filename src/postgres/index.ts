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
export { PostgresViewStore, type PostgresViewStoreOptions } from './PostgresViewStore.js';
export { PGliteViewStore, type PGliteViewStoreOptions } from './PGliteViewStore.js';
export { PostgresSearchIndex, type PostgresSearchIndexOptions } from './PostgresSearchIndex.js';
export type { SqlViewStore } from './sql/SqlViewStore.js';
export type { SqlDeadLetterStore } from './SqlDeadLetterStore.js';
export type { SqlRunner, SqlSession, SqlResult, PgQueryResultLike, PgNamedQuery, PgPoolLike, PgPoolClientLike, PgClientLike, PGliteLike, PostgresConnection } from './sql/SqlRunner.js';
export {
  PGliteDeadLetterStore,
  PostgresDeadLetterStore,
  type PGliteDeadLetterStoreOptions,
  type PostgresDeadLetterStoreOptions,
} from './PostgresDeadLetterStore.js';
