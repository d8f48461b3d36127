/**
 * A database blip must not kill the worker: with a connection string (rxfeed's own pg pool), PostgreSQL
 * closing an idle connection (restart, failover, a proxy's idle timeout) is an `error` event on the pool.
 * Without a listener Node ends the process; with one, the next write opens a new connection and works.
 * Real PostgreSQL (127.0.0.1:5432, db `test`): the server side of the pool's idle connection is terminated.
 * And a sink outage must not end processing: connections killed while a processor writes are retried inside
 * the sink (57P01 admin shutdown, connection terminated), the leases kept, nothing lost.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresDeadLetterStore } from '../../src/postgres/PostgresDeadLetterStore.js';
import { checkpointEvery, createChangeFeed, type FeedEvent, materializeToView, MemoryLeaseStore, MemorySource } from '../../src/index.js';
import { PostgresViewStore } from '../../src/postgres/PostgresViewStore.js';
import { letter } from '../support/deadLetterStoreConformance.js';
import { change, type ConformanceRow, writeOf } from '../support/viewStoreConformance.js';
import { PG_URL, postgresUnavailable, uniqueSchema } from './postgres.js';

const pgSkip = await postgresUnavailable();
const schema = uniqueSchema('rxfeed_blip');

/** Terminates every backend of `application`, as a server restart or failover would. Resolves with how many. */
async function killConnections(admin: pg.Client, application: string): Promise<number> {
  const { rows } = await admin.query<{ killed: boolean }>(
    'SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
    [application],
  );
  return rows.filter((r) => r.killed).length;
}

describe.skipIf(pgSkip !== undefined)('a PostgreSQL connection closed by the server', () => {
  const admin = new pg.Client({ connectionString: PG_URL });
  const adminReady = admin.connect();
  /** `uncaughtException`s seen while the test ran (an unhandled pg `error` event would be one). */
  const uncaught: Error[] = [];
  const onUncaught = (error: Error) => uncaught.push(error);

  afterAll(async () => {
    await adminReady;
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it('does not crash the process, and the view store writes again', async () => {
    await adminReady;
    const application = `rxfeed_blip_view_${process.pid}`;
    const view = await PostgresViewStore.create<ConformanceRow>({ connection: `${PG_URL}?application_name=${application}`, table: 'v', schema });
    process.prependListener('uncaughtException', onUncaught);
    try {
      await view.write(writeOf([change('0', 'a', 1, 1)]));
      expect(await killConnections(admin, application)).toBeGreaterThan(0);
      // The pool hears of it (an `error` event on an idle client): give the socket's close time to arrive.
      await new Promise((resolve) => setTimeout(resolve, 200));
      await view.write(writeOf([change('0', 'b', 2, 1)]));
      expect((await view.get('b'))?.row).toEqual({ id: 'b', version: 1 });
      expect(uncaught).toEqual([]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      await view.close();
    }
  });

  it('does not crash the process, and the dead-letter store writes again', async () => {
    await adminReady;
    const application = `rxfeed_blip_letters_${process.pid}`;
    const store = new PostgresDeadLetterStore({ connection: `${PG_URL}?application_name=${application}`, schema });
    process.prependListener('uncaughtException', onUncaught);
    try {
      await store.write([letter('0', 1)], { leaseToken: '0', range: undefined, epoch: 1 });
      expect(await killConnections(admin, application)).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await store.write([letter('0', 2)], { leaseToken: '0', range: undefined, epoch: 1 });
      expect((await store.list()).map((l) => l.lsn).sort()).toEqual([1, 2]);
      expect(uncaught).toEqual([]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      await store.close();
    }
  });

  it('a processor writing to the view rides out its connections being killed mid-run: nothing lost, the stream goes on', async () => {
    await adminReady;
    const application = `rxfeed_blip_run_${process.pid}`;
    const view = await PostgresViewStore.create<{ n: number }>({ connection: `${PG_URL}?application_name=${application}`, table: 'run', schema, poolMax: 2 });
    const source = new MemorySource<{ id: string; n: number }>({ partitions: 4 });
    const events: FeedEvent[] = [];
    const feed = createChangeFeed({ source, leases: new MemoryLeaseStore(), instanceName: 'a', leasePrefix: 'k.', startFrom: 'beginning', pollIntervalMs: 20, maxItemCount: 10, events: (e) => events.push(e) });
    let failure: unknown;
    const subscription = feed.changes$
      .pipe(materializeToView(view, { project: (c) => ({ n: c.document!.n }) }), checkpointEvery({ count: 10, ms: 50 }))
      .subscribe({ error: (e: unknown) => (failure = e) });
    process.prependListener('uncaughtException', onUncaught);
    try {
      let killed = 0;
      for (let round = 0; round < 10; round++) {
        for (let i = 0; i < 30; i++) source.write({ id: `r${round}-${i}`, n: i });
        await new Promise((resolve) => setTimeout(resolve, 30));
        killed += await killConnections(admin, application);
      }
      expect(killed).toBeGreaterThan(0);
      for (let end = Date.now() + 20_000; Date.now() < end; ) {
        const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}"."run"`);
        if (rows[0]!.n === 300) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // The last round's kills may have hit the pool's idle connections: pg-pool drops one when its error event
      // comes, which a read issued in the same instant can beat (writes retry; a plain read fails once).
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await view.rows()).length).toBe(300);
      expect(failure).toBeUndefined();
      expect(uncaught).toEqual([]);
      expect(events.filter((e) => e.type === 'leaseLost' || e.type === 'leaseReleased')).toEqual([]);
      // The outage was reported as infrastructure errors, not item failures.
      expect(events.filter((e) => e.type === 'error' && e.kind !== 'infrastructure')).toEqual([]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      subscription.unsubscribe();
      await feed.stop();
      await view.close();
    }
  }, 40_000);
});
