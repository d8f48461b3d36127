/**
 * @summary CQRS read model: orders in a Cosmos DB container, flattened by the change feed into an `order_summary` SQL table, then reported on with plain SQL.
 *
 * Run: `npx tsx examples/cqrs-order-summary.ts`
 *
 * Settings (environment):
 * - `COSMOS_ENDPOINT`, `COSMOS_KEY`: the account to use. Default: start the embedded emulator.
 * - `COSMOS_DATABASE`: database to create the `orders` and `leases` containers in. Default `rxfeed-examples`.
 * - `DATABASE_URL`: PostgreSQL for the view (e.g. `postgresql://postgres@127.0.0.1:5432/test`). Default: PGlite
 *   (embedded PostgreSQL, in memory).
 *
 * The command side writes orders to Cosmos DB; the query side is a SQL table with one row per open order
 * (customer, status, line count, total), which reporting tools can query. Cancelled orders leave the table.
 * Ends by checking that the table equals the orders in the container, and exits non-zero when it does not.
 */
import type { Container } from '@azure/cosmos';
import { filter, bufferTime } from 'rxjs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, materializeToView } from 'rxfeed';
import { PGliteViewStore, PostgresViewStore } from 'rxfeed/postgres';
import type { Change, ViewStore } from 'rxfeed';
import { connectCosmos } from './shared.js';

interface Order {
  id: string;
  customerId: string;
  status: 'new' | 'paid' | 'shipped' | 'cancelled';
  lines: { sku: string; qty: number; priceCents: number }[];
}

/** One row of the read model (snake_case: the properties become SQL columns). */
interface OrderSummary {
  customer: string;
  status: string;
  line_count: number;
  total_cents: number;
}

const summarize = (o: Order): OrderSummary => ({
  customer: o.customerId,
  status: o.status,
  line_count: o.lines.length,
  total_cents: o.lines.reduce((sum, l) => sum + l.qty * l.priceCents, 0),
});

/** What {@link main} found. */
export interface CqrsResult {
  /** The view equals the container's open orders, and the SQL report adds up to the container's totals. */
  readonly ok: boolean;
  readonly orders: number;
  readonly rows: number;
  /** The report: the five biggest customers by open order value. */
  readonly topCustomers: readonly { customer: string; orders: number; total_cents: number }[];
}

/** A SQL view store plus a way to run the report query on the same database. */
interface SqlView {
  readonly view: ViewStore<OrderSummary>;
  /** Runs SQL on the view's database; `{table}` stands for the view's rows table (`view.tableName`). */
  readonly query: <Row>(text: string) => Promise<Row[]>;
  readonly close: () => Promise<void>;
}

async function openView(databaseUrl: string | undefined, fresh: boolean): Promise<SqlView> {
  const table = 'order_summary';
  const columns = { customer: 'text', status: 'text', line_count: 'integer', total_cents: 'bigint' };
  if (databaseUrl) {
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    const schema = 'rxfeed_example_cqrs';
    // A fresh emulator has no history: drop the view a previous run left, or its positions and lease epochs
    // would not match the new lease container (the store would reject the writes as from a deposed owner).
    if (fresh) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    const view = await PostgresViewStore.create<OrderSummary>({ connection: pool, schema, table, columns });
    return {
      view,
      query: async <Row>(text: string) => (await pool.query(text.replaceAll('{table}', view.tableName))).rows as Row[],
      close: async () => {
        await view.close();
        await pool.end();
      },
    };
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create();
  const view = await PGliteViewStore.create<OrderSummary>({ pglite: db, table, columns });
  return {
    view,
    query: async <Row>(text: string) => (await db.query<Row>(text.replaceAll('{table}', view.tableName))).rows,
    close: async () => {
      await view.close();
      await db.close();
    },
  };
}

/** Orders of 25 customers, then changes to them: payments, extra lines, cancellations. */
async function writeOrders(orders: Container, from: number, count: number): Promise<Order[]> {
  const written: Order[] = [];
  for (let i = from; i < from + count; i += 25) {
    const chunk = Array.from({ length: Math.min(25, from + count - i) }, (_, k): Order => {
      const n = i + k;
      return {
        id: `order-${n}`,
        customerId: `customer-${n % 25}`,
        status: 'new',
        lines: [{ sku: `sku-${n % 40}`, qty: 1 + (n % 3), priceCents: 500 + ((n * 37) % 4_500) }],
      };
    });
    await Promise.all(chunk.map((o) => orders.items.upsert(o)));
    written.push(...chunk);
  }
  return written;
}

async function updateOrders(orders: Container, all: readonly Order[]): Promise<void> {
  const changed = all.flatMap((o, n): Order[] => {
    if (n % 10 === 0) return [{ ...o, status: 'cancelled' }];
    if (n % 3 === 0) return [{ ...o, status: 'paid' }];
    if (n % 7 === 0) return [{ ...o, lines: [...o.lines, { sku: 'gift-wrap', qty: 1, priceCents: 299 }] }];
    return [];
  });
  for (let i = 0; i < changed.length; i += 25) await Promise.all(changed.slice(i, i + 25).map((o) => orders.items.upsert(o)));
}

/** Compares the view with every order in the container: open ones present and equal, cancelled ones absent. */
async function compare(view: ViewStore<OrderSummary>, orders: Container): Promise<{ equal: boolean; orders: Order[]; rows: number }> {
  const { resources } = await orders.items.readAll<Order>().fetchAll();
  const expected = new Map(resources.filter((o) => o.status !== 'cancelled').map((o) => [o.id, summarize(o)]));
  const rows = await view.rows();
  const same = (a: OrderSummary | undefined, b: OrderSummary): boolean =>
    a !== undefined && a.customer === b.customer && a.status === b.status && a.line_count === b.line_count && a.total_cents === b.total_cents;
  const equal = rows.length === expected.size && rows.every((r) => same(expected.get(r.key), r.row));
  return { equal, orders: resources, rows: rows.length };
}

/**
 * Runs the example: writes orders, keeps the `order_summary` table in step through the change feed, prints
 * a SQL report and checks the table against the container.
 *
 * @example
 * ```ts
 * const { ok } = await main({ ...process.env, DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/test' });
 * ```
 */
export async function main(env: NodeJS.ProcessEnv = process.env): Promise<CqrsResult> {
  const cosmos = await connectCosmos(env, { initialRangeCount: 4 });
  const sql = await openView(env.DATABASE_URL, cosmos.fresh);
  try {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: env.COSMOS_DATABASE ?? 'rxfeed-examples' });
    const { container: orders } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/customerId'], version: 2 } });
    const { container: leases } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });

    const first = await writeOrders(orders, 0, 300);
    console.log(`wrote ${first.length} orders; starting the change feed processor`);

    // Leases and view go together: an in-memory view starts empty, so on an account that outlives this process
    // it needs leases of its own (a new prefix) that start from the beginning, not the last run's checkpoints.
    const leasePrefix = env.DATABASE_URL || cosmos.fresh ? 'cqrs-order-summary.' : `cqrs-order-summary.${Date.now().toString(36)}.`;
    const feed = createChangeFeed<Order>({
      source: new CosmosSource<Order>(orders),
      leases: new CosmosLeaseStore({ container: leases }),
      leasePrefix,
      instanceName: `cqrs-example-${process.pid}`,
      startFrom: 'beginning',
      pollIntervalMs: 250,
      events: (e) => {
        if (e.type === 'error' || e.type === 'stall') console.error(`[${e.type}] ${e.type === 'error' ? e.error.message : e.message}`);
      },
    });
    const subscription = feed.changes$
      .pipe(
        // Up to 1000 changes or 250 ms per transaction; several partitions' batches in one write.
        bufferTime(250, null, 1_000),
        filter((batches) => batches.length > 0),
        materializeToView(sql.view, {
          project: (c: Change<Order>) => c.document && summarize(c.document),
          isDeleted: (c: Change<Order>) => c.document?.status === 'cancelled',
        }),
        checkpointEvery({ count: 1_000, ms: 1_000 }),
      )
      .subscribe({ error: (error: unknown) => console.error('pipeline failed:', error) });

    // The command side keeps working while the read model follows.
    await updateOrders(orders, first);
    await writeOrders(orders, 300, 100);
    console.log('updated orders (paid, extra lines, cancellations) and wrote 100 more while the processor runs');

    let state = await compare(sql.view, orders);
    for (const deadline = Date.now() + 60_000; !state.equal && Date.now() < deadline; ) {
      await sleep(250);
      state = await compare(sql.view, orders);
    }
    await feed.stop();
    subscription.unsubscribe();

    // The query side: plain SQL on the typed columns.
    const report = await sql.query<{ customer: string; orders: number | string; total_cents: number | string }>(
      `SELECT customer, count(*) AS orders, sum(total_cents) AS total_cents FROM {table}
       GROUP BY customer ORDER BY sum(total_cents) DESC, customer LIMIT 5`,
    );
    const topCustomers = report.map((r) => ({ customer: r.customer, orders: Number(r.orders), total_cents: Number(r.total_cents) }));
    console.log('top customers by open order value:');
    for (const r of topCustomers) console.log(`  ${r.customer.padEnd(12)} ${String(r.orders).padStart(3)} orders  ${(r.total_cents / 100).toFixed(2).padStart(10)}`);

    // The check: the table equals the container, and SQL's sum equals the sum over the source.
    const [{ total } = { total: 0 }] = await sql.query<{ total: number | string | null }>('SELECT sum(total_cents) AS total FROM {table}');
    const sourceTotal = state.orders.filter((o) => o.status !== 'cancelled').reduce((sum, o) => sum + summarize(o).total_cents, 0);
    const ok = state.equal && Number(total) === sourceTotal;
    console.log(
      `check: ${ok ? 'OK' : 'FAILED'}: ${state.rows} rows in order_summary for ${state.orders.length} orders ` +
        `(${state.orders.filter((o) => o.status === 'cancelled').length} cancelled); ` +
        `${state.equal ? 'every row equals its order' : 'rows differ from the orders'}; ` +
        `SQL total ${Number(total)} ${Number(total) === sourceTotal ? '=' : '≠'} source total ${sourceTotal} cents`,
    );
    return { ok, orders: state.orders.length, rows: state.rows, topCustomers };
  } finally {
    await sql.close();
    await cosmos.stop();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    (result) => process.exit(result.ok ? 0 : 1),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
