import { InvalidOptionsError } from '../errors/index.js';
import { SqlViewStore } from './sql/SqlViewStore.js';
import { importOptional } from '../internal/importOptional.js';
import { isPGlite, pgliteRunner } from './sql/SqlRunner.js';
import type { PGliteLike, SqlRunner } from './sql/SqlRunner.js';

/** Options of {@link PGliteViewStore}. */
export interface PGliteViewStoreOptions {
  /** Rows table name (lower-case SQL name). rxfeed also creates `<table>_tombstones`, `<table>_positions` and `<table>_lineage`. */
  readonly table: string;
  /** Schema, created if missing. Default `'public'`. */
  readonly schema?: string;
  /** Typed columns copied from each row's top-level properties, name → SQL type. Default none. */
  readonly columns?: Readonly<Record<string, string>>;
  /**
   * A PGlite instance to share (or a promise of one). Starting PGlite takes seconds, so share one per
   * process between stores; rxfeed never closes an instance you pass. Default: the store starts its own.
   */
  readonly pglite?: PGliteLike | Promise<PGliteLike>;
  /**
   * Where the store's own PGlite keeps its files (a directory, or any PGlite data URL such as
   * `idb://name`). Ignored with `pglite`. Default: in memory (the view is lost when the process ends).
   */
  readonly dataDir?: string;
}

/**
 * A `ViewStore` (see `rxfeed`) in embedded PostgreSQL (PGlite, an optional peer dependency loaded on first use): the
 * zero-setup default. Same SQL, tables and semantics as `PostgresViewStore`.
 *
 * @example
 * ```ts
 * import { materializeToView, checkpointEvery } from 'rxfeed';
 * import { PGliteViewStore } from 'rxfeed/postgres';
 * const view = new PGliteViewStore<{ total: number }>({ table: 'order_summary', dataDir: './.rxfeed-views' });
 * feed$.pipe(materializeToView(view, { project: (c) => c.document && { total: c.document.total } }), checkpointEvery(500));
 * ```
 */
export class PGliteViewStore<R> extends SqlViewStore<R> {
  constructor(options: PGliteViewStoreOptions) {
    const { table, schema = 'public', columns, pglite, dataDir } = options ?? ({} as PGliteViewStoreOptions);
    if (dataDir !== undefined && (typeof dataDir !== 'string' || dataDir === '')) {
      throw new InvalidOptionsError('dataDir', 'give a directory path, or leave it out for an in-memory database');
    }
    const description = `pglite view ${schema}.${table}${dataDir ? ` (${dataDir})` : pglite ? '' : ' (memory)'}`;
    super({ schema, table, columns }, description, () => openPGlite(pglite, dataDir, description));
  }

  /** Creates the store and its tables; rejects when `@electric-sql/pglite` is missing. */
  static async create<R>(options: PGliteViewStoreOptions): Promise<PGliteViewStore<R>> {
    const store = new PGliteViewStore<R>(options);
    await store.ready();
    return store;
  }
}

/** A runner over a given PGlite (not owned) or a new one (owned, closed with the store). */
export async function openPGlite(
  given: PGliteLike | Promise<PGliteLike> | undefined,
  dataDir: string | undefined,
  description: string,
): Promise<SqlRunner> {
  if (given !== undefined) {
    const db = await given;
    if (!isPGlite(db)) throw new InvalidOptionsError('pglite', 'expected a PGlite instance (from @electric-sql/pglite)');
    return pgliteRunner(db, description, false);
  }
  const { PGlite } = await importOptional('@electric-sql/pglite', () => import('@electric-sql/pglite'), 'PGliteViewStore');
  const db = await PGlite.create(dataDir);
  return pgliteRunner(db as unknown as PGliteLike, description, true);
}
