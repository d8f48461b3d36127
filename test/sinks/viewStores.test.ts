import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionsError, RxfeedError } from '../../src/errors/index.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import { PGliteViewStore } from '../../src/postgres/PGliteViewStore.js';
import { PostgresViewStore } from '../../src/postgres/PostgresViewStore.js';
import { importOptional } from '../../src/internal/importOptional.js';
import { pgPoolRunner } from '../../src/postgres/sql/SqlRunner.js';
import type { PgPoolLike, SqlRunner, SqlSession } from '../../src/postgres/sql/SqlRunner.js';
import { SqlViewStore } from '../../src/postgres/sql/SqlViewStore.js';
import { openPGlite } from '../../src/postgres/PGliteViewStore.js';
import { PostgresSearchIndex } from '../../src/postgres/PostgresSearchIndex.js';
import type { PostgresSearchIndexOptions } from '../../src/postgres/PostgresSearchIndex.js';
import { syncToIndex } from '../../src/sinks/syncToIndex.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Change } from '../../src/core/Change.js';
import { lastValueFrom, of } from 'rxjs';
import { change, ranged, viewStoreConformance, writeOf } from '../support/viewStoreConformance.js';
import type { ConformanceRow } from '../support/viewStoreConformance.js';
import { PG_URL, postgresUnavailable, uniqueSchema } from './postgres.js';

// PGlite takes seconds to start: one instance for the whole file, never one per test.
let pglite: PGlite;
const pgliteReady = PGlite.create().then((db) => (pglite = db));
const pgSkip = await postgresUnavailable();
const schema = uniqueSchema('rxfeed_views');
let tables = 0;
const nextTable = () => `v${++tables}`;

afterAll(async () => {
  await pglite?.close();
  if (pgSkip === undefined) {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
});

viewStoreConformance('MemoryViewStore', async () => {
  const store = new MemoryViewStore<ConformanceRow>();
  return { store, reopen: async () => store };
});

viewStoreConformance('PGliteViewStore', async () => {
  const table = nextTable();
  const options = { table, schema, pglite: pgliteReady };
  const store = await PGliteViewStore.create<ConformanceRow>(options);
  return { store, reopen: () => PGliteViewStore.create<ConformanceRow>(options) };
});

describe.skipIf(pgSkip !== undefined)('PostgreSQL', () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 6 });
  afterAll(async () => {
    await pool.end();
  });

  // Alternate between a pool we own and a connection string (rxfeed's own pool), and between prepared and
  // unnamed statements, across tests.
  viewStoreConformance('PostgresViewStore', async () => {
    const table = nextTable();
    const connection = tables % 2 === 0 ? pool : PG_URL;
    const prepare = tables % 3 !== 0;
    const store = await PostgresViewStore.create<ConformanceRow>({ connection, table, schema, prepare });
    return { store, reopen: () => PostgresViewStore.create<ConformanceRow>({ connection: PG_URL, table, schema, prepare }) };
  });

  it('runs over a single pg Client, one transaction at a time', async () => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const store = await PostgresViewStore.create<ConformanceRow>({ connection: client, table: nextTable(), schema });
      await Promise.all(
        Array.from({ length: 5 }, (_, p) =>
          store.write({
            mode: 'guarded',
            changes: [{ key: `k${p}`, row: { id: `k${p}`, version: p }, lsn: 1, timestampMs: 0, partition: `p${p}` }],
            partitions: [{ partition: `p${p}`, epoch: 1, position: 'x', lsn: 1 }],
          }),
        ),
      );
      expect((await store.rows()).map((r) => r.key)).toEqual(['k0', 'k1', 'k2', 'k3', 'k4']);
      await store.close();
      // The client is the caller's: still usable.
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('copies typed columns out of the row for reporting queries', async () => {
    const table = nextTable();
    const store = await PostgresViewStore.create<{ customer: string; total: number; at: string; meta: object }>({
      connection: pool,
      table,
      schema,
      columns: { customer: 'text', total: 'numeric(12,2)', at: 'timestamptz', meta: 'jsonb' },
    });
    const row = { customer: 'ada', total: 12.5, at: '2026-01-01T00:00:00Z', meta: { vip: true } };
    await store.write({
      mode: 'guarded',
      changes: [{ key: 'o1', row, lsn: 1, timestampMs: 0, partition: 'p0' }],
      partitions: [{ partition: 'p0', epoch: 1, position: 'x', lsn: 1 }],
    });
    const result = await pool.query(`SELECT customer, total::text AS total, extract(year FROM at) AS year, meta FROM ${store.tableName}`);
    expect(result.rows).toEqual([{ customer: 'ada', total: '12.50', year: '2026', meta: { vip: true } }]);
    await store.write({
      mode: 'guarded',
      changes: [{ key: 'o1', row: { ...row, total: 20 }, lsn: 2, timestampMs: 0, partition: 'p0' }],
      partitions: [],
    });
    expect((await pool.query(`SELECT total::float8 AS total FROM ${store.tableName}`)).rows).toEqual([{ total: 20 }]);
    await store.close();
  });

  it('never writes through a snapshot taken before a concurrent write of the partition committed', async () => {
    const table = nextTable();
    const store = await PostgresViewStore.create<ConformanceRow>({ connection: pool, table, schema });
    await store.write(writeOf([change('p0', 'a', 1, 1)])); // from now on the store plans p0's writes on what it wrote
    // Another writer of p0 deletes `a` at LSN 10, leaving p0's epoch and LSN mark as they were, and holds p0's row.
    const other = await pool.connect();
    try {
      await other.query('BEGIN');
      const { rows } = await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await other.query(`INSERT INTO "${schema}"."${table}_tombstones" VALUES ('a', 10, 0)`);
      await other.query(`DELETE FROM ${store.tableName} WHERE key = 'a'`);
      await other.query(`UPDATE "${schema}"."${table}_positions" SET updated_at = now() WHERE partition_id = 'p0'`);
      // An older change of `a`: its write starts (and takes its snapshot) before the delete commits.
      const write = store.write(writeOf([change('p0', 'a', 5, 5)]));
      let waiting = 0;
      while (waiting === 0) {
        const blocked = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [rows[0]!.pid]);
        waiting = blocked.rows[0]!.n;
      }
      await other.query('COMMIT');
      expect(await write).toEqual({ written: 0, deleted: 0, skipped: 1 });
    } finally {
      other.release();
    }
    expect(await store.get('a')).toBeUndefined();
    await store.close();
  });

  it("never accepts a split parent's write through a snapshot taken before a child's first write committed", async () => {
    const table = nextTable();
    const store = await PostgresViewStore.create<ConformanceRow>({ connection: pool, table, schema });
    const parent = (lsn: number, version: number) => ({ mode: 'exactlyOnce' as const, changes: [change('P', 'x', lsn, version)], partitions: [ranged('P', '', 'FF', 1, lsn)] });
    await store.write(parent(1, 1));
    await store.write(parent(2, 2)); // from now on the store plans P's writes on what it wrote: one statement each
    // The child L [,80) writes its first batch as a child's first write does: the lineage row locked
    // exclusively, its row stored with its range and epoch 2, the generation bumped.
    const child = await pool.connect();
    try {
      await child.query('BEGIN');
      const { rows } = await child.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await child.query(`SELECT generation FROM "${schema}"."${table}_lineage" WHERE id = 1 FOR UPDATE`);
      await child.query(`INSERT INTO "${schema}"."${table}_positions" (partition_id, position, epoch, lsn, range_min, range_max) VALUES ('L', 'pos:L:3', 2, 3, '', '80')`);
      await child.query(`UPDATE ${store.tableName} SET doc = '{"id":"x","version":3}', lsn = 3, partition_id = 'L' WHERE key = 'x'`);
      await child.query(`UPDATE "${schema}"."${table}_lineage" SET generation = generation + 1`);
      // The parent's late write starts (and takes its snapshot) before the child's commits.
      const late = store.write(parent(3, 9)).catch((e: unknown) => e);
      let waiting = 0;
      while (waiting === 0) {
        const blocked = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [rows[0]!.pid]);
        waiting = blocked.rows[0]!.n;
      }
      await child.query('COMMIT');
      expect(await late).toMatchObject({ name: 'ViewFencedError', leaseToken: 'P', epoch: 1, currentEpoch: 2 });
    } finally {
      child.release();
    }
    expect((await store.get('x'))?.row.version).toBe(3);
    await store.close();
  });

  /** A pool that counts the transactions run on it (each checks out a client). */
  const countingPool = () => {
    const counted = { transactions: 0 };
    const proxy: PgPoolLike = {
      query: ((query: unknown, values?: unknown[]) => pool.query(query as string, values)) as PgPoolLike['query'],
      connect: () => {
        counted.transactions++;
        return pool.connect();
      },
      end: async () => undefined,
      get totalCount() {
        return pool.totalCount;
      },
    };
    return { proxy, counted };
  };
  const lineageOf = async (table: string) =>
    Number((await pool.query<{ generation: string }>(`SELECT generation FROM "${schema}"."${table}_lineage"`)).rows[0]!.generation);
  const blockedBy = async (pid: number) =>
    (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])).rows[0]!.n;

  it("stores a first range over no other partition's without waiting for writes in flight, then writes in one statement", async () => {
    const table = nextTable();
    const { proxy, counted } = countingPool();
    const store = await PostgresViewStore.create<ConformanceRow>({ connection: proxy, table, schema });
    await store.write({ mode: 'exactlyOnce', changes: [change('A', 'a', 1, 1)], partitions: [ranged('A', '', '80', 1, 1)] });
    // A write of A in flight holds the lineage row in key-share mode until it commits.
    const inFlight = await pool.connect();
    try {
      await inFlight.query('BEGIN');
      await inFlight.query(`SELECT generation FROM "${schema}"."${table}_lineage" WHERE id = 1 FOR KEY SHARE`);
      counted.transactions = 0;
      const write = { mode: 'exactlyOnce' as const, changes: [change('B', 'b', 1, 1), change('B', 'c', 2, 1)], partitions: [ranged('B', '80', 'FF', 1, 2)] };
      expect(await store.write(write)).toEqual({ written: 2, deleted: 0, skipped: 0 });
      expect(counted.transactions).toBe(1); // the range store; the write itself is one statement
    } finally {
      await inFlight.query('ROLLBACK');
      inFlight.release();
    }
    expect(await lineageOf(table)).toBe(0); // no write planned before has to plan again
    // Replayed, B's changes apply nothing twice: the mark the first write stored holds.
    expect(await store.write({ mode: 'exactlyOnce', changes: [change('B', 'b', 1, 7)], partitions: [ranged('B', '80', 'FF', 1, 1)] })).toEqual({ written: 0, deleted: 0, skipped: 1 });
    expect((await store.positions()).get('B')).toMatchObject({ epoch: 1, lsn: 2, range: { minInclusive: '80', maxExclusive: 'FF' } });
    await store.close();
  });

  it('stores the ranges of first writes that come at once in one transaction, each write then one statement', async () => {
    const table = nextTable();
    const { proxy, counted } = countingPool();
    const store = await PostgresViewStore.create<ConformanceRow>({ connection: proxy, table, schema });
    counted.transactions = 0;
    const first = (partition: string, min: string, max: string) =>
      store.write({ mode: 'guarded', changes: [change(partition, `k${partition}`, 1, 1)], partitions: [ranged(partition, min, max, 1, 1)] });
    const results = await Promise.all([first('p0', '', '40'), first('p1', '40', '80'), first('p2', '80', 'C0'), first('p3', 'C0', 'FF')]);
    expect(results).toEqual(results.map(() => ({ written: 1, deleted: 0, skipped: 0 })));
    expect(counted.transactions).toBe(1);
    expect(await lineageOf(table)).toBe(0);
    // Their next writes are planned on what the range store committed for each: one statement each.
    await Promise.all(['p0', 'p1', 'p2', 'p3'].map((p, i) => store.write({ mode: 'guarded', changes: [change(p, `k${p}`, 2, 2)], partitions: [ranged(p, ['', '40', '80', 'C0'][i]!, ['40', '80', 'C0', 'FF'][i]!, 1, 2)] })));
    expect(counted.transactions).toBe(1);
    expect(Object.fromEntries((await store.rows()).map((r) => [r.key, r.row.version]))).toEqual({ kp0: 2, kp1: 2, kp2: 2, kp3: 2 });
    await store.close();
  });

  it("stores a range over part of another partition's exclusively: it waits for writes in flight and makes the next ones plan again", async () => {
    const table = nextTable();
    const store = await PostgresViewStore.create<ConformanceRow>({ connection: pool, table, schema });
    const parent = (lsn: number, version: number) => ({ mode: 'exactlyOnce' as const, changes: [change('P', 'x', lsn, version)], partitions: [ranged('P', '', 'FF', 1, lsn)] });
    await store.write(parent(1, 1));
    await store.write(parent(2, 2));
    const other = await PostgresViewStore.create<ConformanceRow>({ connection: pool, table, schema });
    const inFlight = await pool.connect();
    let child: Promise<unknown>;
    try {
      await inFlight.query('BEGIN');
      const { rows } = await inFlight.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await inFlight.query(`SELECT generation FROM "${schema}"."${table}_lineage" WHERE id = 1 FOR KEY SHARE`);
      // The child L [,80) inherits P's mark 2: its change at LSN 2 was applied as P's, the one at 3 is new.
      child = other.write({ mode: 'exactlyOnce', changes: [change('L', 'x', 2, 20), change('L', 'y', 3, 3)], partitions: [ranged('L', '', '80', 2, 3)] });
      while ((await blockedBy(rows[0]!.pid)) === 0);
    } finally {
      await inFlight.query('ROLLBACK');
      inFlight.release();
    }
    expect(await child).toEqual({ written: 1, deleted: 0, skipped: 1 });
    expect(await lineageOf(table)).toBe(1);
    // The parent's next write, planned on what the store wrote, plans again and is refused.
    await expect(store.write(parent(3, 3))).rejects.toMatchObject({ name: 'ViewFencedError', leaseToken: 'P', epoch: 1, currentEpoch: 2 });
    expect((await store.get('x'))?.row.version).toBe(2);
    await store.close();
    await other.close();
  });

  it("fences a write in its range store against its own partitions' stored ranges too: refused, it stores no range", async () => {
    const table = nextTable();
    const store = await PostgresViewStore.create<ConformanceRow>({ connection: pool, table, schema });
    await store.write({ mode: 'guarded', changes: [change('P', 'x', 1, 1)], partitions: [ranged('P', '', '80', 1, 1)] });
    await store.write({ mode: 'guarded', changes: [change('L', 'x', 2, 2)], partitions: [ranged('L', '', '40', 2, 2)] });
    // Another store (a restart) knows no range: the write stores X's, and fences P against L, both its own.
    const other = await PostgresViewStore.create<ConformanceRow>({ connection: pool, table, schema });
    const write = {
      mode: 'guarded' as const,
      changes: [change('X', 'y', 1, 1)],
      partitions: [ranged('P', '', '80', 1, 3), ranged('L', '', '40', 2, 3), ranged('X', '80', 'FF', 1, 1)],
    };
    await expect(other.write(write)).rejects.toMatchObject({ name: 'ViewFencedError', leaseToken: 'P', epoch: 1, currentEpoch: 2 });
    const { rows } = await pool.query(`SELECT partition_id FROM "${schema}"."${table}_positions" WHERE partition_id = 'X'`);
    expect(rows).toEqual([]);
    await store.close();
    await other.close();
  });

  it('creates its tables once when several processes start at the same time', async () => {
    const table = nextTable();
    const stores = Array.from({ length: 4 }, () => new PostgresViewStore<ConformanceRow>({ connection: PG_URL, table, schema }));
    await Promise.all(stores.map((s) => s.ready()));
    await Promise.all(stores.map((s) => s.close()));
  });
});

/**
 * A SQL store whose statements are shown to `onStatement` as they are sent, with whether they run in one of the
 * store's transactions (BEGIN, COMMIT and ROLLBACK are the runner's own, not shown): where a test aborts a write's
 * signal while the write runs.
 */
class WatchedStore extends SqlViewStore<ConformanceRow> {
  onStatement: (text: string, inTransaction: boolean) => void = () => undefined;
  constructor(table: string, open: () => Promise<SqlRunner>) {
    super({ schema, table }, `watched ${table}`, async () => {
      const runner = await open();
      const watched = (session: SqlSession, inTransaction: boolean): SqlSession['query'] => (text, params, name) => {
        this.onStatement(text, inTransaction);
        return session.query(text, params, name);
      };
      return { ...runner, query: watched(runner, false), transaction: (fn) => runner.transaction((tx) => fn({ query: watched(tx, true) })) };
    });
  }
}

/** The statements of a store's writes, by kind. */
const isWriteStatement = (text: string) => text.startsWith('WITH expected');
const isRangeStore = (text: string) => text.includes('_positions" AS p SET range_min');

/** A write's `signal` honoured by a SQL store (see SqlViewStore.write), on one driver. */
function abortSuite(name: string, open: () => Promise<SqlRunner>) {
  describe(`${name}: a write's signal`, () => {
    const reason = new Error('every lease of the write ended');
    const plain = (lsn: number) => ({ mode: 'guarded' as const, changes: [change('p0', 'a', lsn, lsn)], partitions: [{ partition: 'p0', epoch: 1, position: `pos:p0:${lsn}`, lsn }] });
    const withRange = (lsn: number) => ({ mode: 'guarded' as const, changes: [change('p0', 'a', lsn, lsn)], partitions: [ranged('p0', '', 'FF', 1, lsn)] });
    /** Whether the store's connection is outside any transaction block (a savepoint is refused there, and only there). */
    const outsideTransaction = async (store: WatchedStore) =>
      (await store.ready()).query('SAVEPOINT probe').then(
        () => false,
        (error: Error) => /transaction blocks/.test(error.message),
      );

    it('aborted before the write: rejects with its reason and sends nothing', async () => {
      const store = new WatchedStore(nextTable(), open);
      await store.ready();
      const sent: string[] = [];
      store.onStatement = (text) => sent.push(text);
      await expect(store.write(withRange(1), { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
      expect(sent).toEqual([]);
      expect(await store.rows()).toEqual([]);
      await store.close();
    });

    it('aborted in its transaction: rolls back instead of committing, rejects with its reason, and leaves no transaction open', async () => {
      const store = new WatchedStore(nextTable(), open);
      const aborting = new AbortController();
      // The first write of a partition without a range: a transaction that locks and reads its row, then writes.
      store.onStatement = (text, inTransaction) => {
        if (isWriteStatement(text) && inTransaction) aborting.abort(reason);
      };
      await expect(store.write(plain(1), { signal: aborting.signal })).rejects.toBe(reason);
      expect(await store.rows()).toEqual([]);
      expect(await store.positions()).toEqual(new Map());
      expect(await outsideTransaction(store)).toBe(true);
      store.onStatement = () => undefined;
      expect(await store.write(plain(1))).toEqual({ written: 1, deleted: 0, skipped: 0 });
      expect((await store.positions()).get('p0')).toMatchObject({ position: 'pos:p0:1', epoch: 1, lsn: 1 });
      await store.close();
    });

    it('aborted while its range is stored: the range store commits (it is shared), the write sends nothing after it and rejects', async () => {
      const store = new WatchedStore(nextTable(), open);
      const aborting = new AbortController();
      const sent: string[] = [];
      store.onStatement = (text) => {
        sent.push(text);
        if (isRangeStore(text)) aborting.abort(reason);
      };
      await expect(store.write(withRange(1), { signal: aborting.signal })).rejects.toBe(reason);
      expect(sent.filter(isWriteStatement)).toEqual([]);
      expect(await store.rows()).toEqual([]);
      expect(await outsideTransaction(store)).toBe(true);
      expect(await store.write(withRange(1))).toEqual({ written: 1, deleted: 0, skipped: 0 });
      await store.close();
    });

    it('aborted while its one statement runs: that statement commits as it runs, and the write resolves with its result', async () => {
      const store = new WatchedStore(nextTable(), open);
      await store.write(withRange(1));
      const aborting = new AbortController();
      store.onStatement = (text, inTransaction) => {
        if (isWriteStatement(text) && !inTransaction) aborting.abort(reason);
      };
      expect(await store.write(withRange(2), { signal: aborting.signal })).toEqual({ written: 1, deleted: 0, skipped: 0 });
      expect((await store.get('a'))?.row.version).toBe(2);
      await store.close();
    });
  });
}

abortSuite('PGlite', () => openPGlite(pgliteReady, undefined, 'watched'));

if (pgSkip === undefined) {
  // One connection: a transaction left open on it would show in the next statement.
  const abortPool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  afterAll(() => abortPool.end());
  abortSuite('PostgreSQL', async () => pgPoolRunner(abortPool, 'watched pool', false));
}

describe('MemoryViewStore: a write\'s signal', () => {
  it('aborted before the write: rejects with its reason and writes nothing', async () => {
    const store = new MemoryViewStore<ConformanceRow>();
    const reason = new Error('every lease of the write ended');
    await expect(store.write(writeOf([change('p0', 'a', 1, 1)]), { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(await store.rows()).toEqual([]);
    expect(await store.positions()).toEqual(new Map());
  });
});

/** A SQL store over a runner that fails the first transactions with a given PostgreSQL error code. */
class FlakyStore extends SqlViewStore<ConformanceRow> {
  attempts = 0;
  failures = 0;
  constructor(code: string) {
    super({ schema: 'public', table: 'flaky' }, 'flaky', async () => {
      const runner = await openPGlite(pgliteReady, undefined, 'flaky');
      return {
        ...runner,
        transaction: async <T>(fn: (s: SqlSession) => Promise<T>) => {
          this.attempts++;
          if (this.failures-- > 0) throw Object.assign(new Error(`simulated ${code}`), { code });
          return runner.transaction(fn);
        },
      };
    });
  }
}

describe('view store options and drivers', () => {
  const oneRow = {
    mode: 'guarded' as const,
    changes: [{ key: 'k', row: { id: 'k', version: 1 }, lsn: 1, timestampMs: 0, partition: 'p0' }],
    partitions: [],
  };

  it('retries a write that hit a deadlock or serialization failure, and nothing else', async () => {
    const deadlocked = new FlakyStore('40P01');
    await deadlocked.ready();
    deadlocked.attempts = 0;
    deadlocked.failures = 3;
    expect(await deadlocked.write(oneRow)).toEqual({ written: 1, deleted: 0, skipped: 0 });
    expect(deadlocked.attempts).toBe(4);
    const broken = new FlakyStore('23505');
    await broken.ready();
    broken.attempts = 0;
    broken.failures = 1;
    await expect(broken.write(oneRow)).rejects.toThrow('simulated 23505');
    expect(broken.attempts).toBe(1);
  });

  it('adds the range columns to a positions table created by an earlier version, keeping its rows', async () => {
    const db = await pgliteReady;
    const table = nextTable();
    await db.exec(`CREATE SCHEMA IF NOT EXISTS "${schema}";
      CREATE TABLE "${schema}"."${table}_positions" (partition_id text PRIMARY KEY, position text, epoch bigint NOT NULL DEFAULT 0,
        lsn bigint, updated_at timestamptz NOT NULL DEFAULT now());
      INSERT INTO "${schema}"."${table}_positions" (partition_id, position, epoch, lsn) VALUES ('p0', 'pos:p0:7', 4, 7);`);
    const store = await PGliteViewStore.create<ConformanceRow>({ table, schema, pglite: pgliteReady });
    expect(await store.positions()).toEqual(new Map([['p0', { position: 'pos:p0:7', epoch: 4, lsn: 7 }]]));
    const range = { minInclusive: '', maxExclusive: '80' };
    await store.write({ mode: 'exactlyOnce', changes: [], partitions: [{ partition: 'p0', epoch: 4, position: 'pos:p0:9', lsn: 9, range }] });
    expect((await store.positions()).get('p0')).toEqual({ position: 'pos:p0:9', epoch: 4, lsn: 9, range });
  });

  it('rejects bad names and types at construction, saying what to fix', () => {
    expect(() => new PGliteViewStore({ table: 'Orders; drop' })).toThrow(InvalidOptionsError);
    expect(() => new PGliteViewStore({ table: 'orders', schema: 'bad-schema' })).toThrow(/schema/);
    expect(() => new PGliteViewStore({ table: 'orders', columns: { total: 'numeric; drop table x' } })).toThrow(/SQL type/);
    expect(() => new PGliteViewStore({ table: 'orders', columns: { lsn: 'bigint' } })).toThrow(/not one of/);
    expect(() => new PostgresViewStore({ connection: PG_URL, table: 'orders', poolMax: 0 })).toThrow(/poolMax/);
    expect(() => new PostgresViewStore({ connection: PG_URL, table: 'orders', prepare: 'no' as unknown as boolean })).toThrow(/prepare/);
    expect(() => new PostgresViewStore({ connection: undefined as unknown as string, table: 'orders' })).toThrow(/connection/);
  });

  it('runs the statements a store names as prepared statements, unless told not to', async () => {
    const sent: unknown[] = [];
    const pool: PgPoolLike = {
      query: async (query: unknown) => {
        sent.push(query);
        return { rows: [], rowCount: 0 };
      },
      connect: () => Promise.reject(new Error('not used')),
      end: async () => undefined,
      totalCount: 0,
    };
    await pgPoolRunner(pool, 'fake', false).query('SELECT $1', [1], 'rxfeed_s');
    await pgPoolRunner(pool, 'fake', false, false).query('SELECT $1', [2], 'rxfeed_s');
    expect(sent).toEqual([{ name: 'rxfeed_s', text: 'SELECT $1', values: [1] }, 'SELECT $1']);
  });

  it('says which package to install when an optional driver is missing', async () => {
    const missing = 'rxfeed-package-that-does-not-exist';
    const error = await importOptional('pg', () => import(missing), 'PostgresViewStore').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RxfeedError);
    expect((error as Error).message).toContain('npm install pg');
  });

  it('reports an unreachable database on first use, and never leaks the password in its description', async () => {
    const store = new PostgresViewStore({ connection: 'postgresql://u:secret@127.0.0.1:1/none', table: 'orders' });
    expect(store.description).not.toContain('secret');
    await expect(store.rows()).rejects.toThrow();
    await store.close();
  });
});

beforeAll(async () => {
  await pgliteReady;
});

interface Product {
  readonly name: string;
  readonly description: string;
  readonly price: number;
}

function searchIndexSuite(name: string, connection: () => PostgresSearchIndexOptions['connection']) {
  describe(`PostgresSearchIndex on ${name}`, () => {
    let lsn = 0;
    const product = (id: string, doc: Product | undefined): Change<Product> => ({
      id,
      operation: doc ? 'upsert' : 'delete',
      document: doc,
      lsn: ++lsn,
      timestampMs: Date.UTC(2026, 0, 1) + lsn,
    });
    const batchOf = (changes: Change<Product>[], partition = 'p0') =>
      new ChangeBatch<Product>({ partition, changes, position: `${partition}@${lsn}`, epoch: 1 });
    const sync = (index: PostgresSearchIndex) =>
      syncToIndex<ChangeBatch<Product>>(index, {
        document: (c) => ({ title: c.document!.name, text: c.document!.description, data: { price: c.document!.price } }),
      });

    it('syncs documents in bulk and ranks title matches above text matches', async () => {
      const index = await PostgresSearchIndex.create({ connection: connection(), table: nextTable(), schema });
      try {
        const first = batchOf([
          product('1', { name: 'Rain jacket', description: 'Waterproof shell for hiking', price: 120 }),
          product('2', { name: 'Hiking boots', description: 'Leather boots, pair well with a rain jacket', price: 150 }),
          product('3', { name: 'Wool socks', description: 'Warm socks', price: 15 }),
          product('3', { name: 'Wool socks', description: 'Warm socks for boots', price: 12 }),
        ]);
        await lastValueFrom(of(first).pipe(sync(index)));
        const hits = await index.search('jackets');
        expect(hits.map((h) => h.id)).toEqual(['1', '2']);
        expect(hits[0]?.rank).toBeGreaterThan(hits[1]?.rank ?? Infinity);
        expect(hits[0]?.document).toEqual({ title: 'Rain jacket', text: 'Waterproof shell for hiking', data: { price: 120 } });
        // Several changes of one id in the batch collapsed to the last.
        expect((await index.search('boots')).map((h) => [h.id, h.document.data])).toEqual([
          ['2', { price: 150 }],
          ['3', { price: 12 }],
        ]);
        expect(await index.search('boots', { limit: 1 })).toHaveLength(1);
        expect(await index.search('"rain jacket" -leather')).toHaveLength(1);

        // A delete takes the document out; a replay of the older version does not bring it back.
        await lastValueFrom(of(batchOf([product('1', undefined)])).pipe(sync(index)));
        await lastValueFrom(of(first).pipe(sync(index)));
        expect((await index.search('jacket')).map((h) => h.id)).toEqual(['2']);
      } finally {
        await index.close();
      }
    });

    it('rejects an unknown language name at construction', () => {
      expect(() => new PostgresSearchIndex({ connection: connection(), table: 'x', language: "english'; --" })).toThrow(/language/);
    });
  });
}

searchIndexSuite('PGlite', () => pgliteReady);
describe.skipIf(pgSkip !== undefined)('PostgreSQL search', () => {
  searchIndexSuite('PostgreSQL', () => PG_URL);
});
