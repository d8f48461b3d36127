/**
 * @summary Search sync: products in a Cosmos DB container kept in a PostgreSQL full-text index by the change feed, then searched.
 *
 * Run: `npx tsx examples/search-sync.ts` (or `npx tsx examples/search-sync.ts "rain jacket"` to search for something else)
 *
 * Settings (environment):
 * - `COSMOS_ENDPOINT`, `COSMOS_KEY`: the account to use. Default: start the embedded emulator.
 * - `COSMOS_DATABASE`: database to create the `products` and `leases` containers in. Default `rxfeed-examples`.
 * - `DATABASE_URL`: PostgreSQL for the index (e.g. `postgresql://postgres@127.0.0.1:5432/test`). Default: PGlite
 *   (embedded PostgreSQL, in memory).
 *
 * Every product change becomes an upsert in a table with a weighted `tsvector` (name above description);
 * discontinued products leave the index. Ends by checking that the index holds exactly the active products
 * and that searches find what they should (an edited product by its new words, never a discontinued one).
 */
import type { Container } from '@azure/cosmos';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, syncToIndex } from 'rxfeed';
import { PostgresSearchIndex } from 'rxfeed/postgres';
import type { Change, SearchHit } from 'rxfeed';
import { connectCosmos } from './shared.js';

interface Product {
  id: string;
  category: string;
  name: string;
  description: string;
  priceCents: number;
  discontinued?: boolean;
}

const CATALOG: readonly [category: string, name: string, description: string][] = [
  ['outdoor', 'Storm shell jacket', 'Waterproof, breathable three-layer jacket with taped seams and an adjustable hood.'],
  ['outdoor', 'Trail running shoes', 'Light shoes with a grippy sole for muddy trails and rocky paths.'],
  ['outdoor', 'Down sleeping bag', 'Warm goose down bag rated to minus ten degrees, packs small.'],
  ['outdoor', 'Two-person tent', 'Freestanding tent with two doors, aluminium poles and a waterproof fly.'],
  ['outdoor', 'Insulated water bottle', 'Steel bottle that keeps drinks cold for a day or hot for twelve hours.'],
  ['outdoor', 'Rain poncho', 'Packable poncho that covers you and your backpack in a downpour.'],
  ['outdoor', 'Headlamp', 'Rechargeable headlamp, 400 lumens, red night mode.'],
  ['outdoor', 'Fleece pullover', 'Soft recycled fleece for cool evenings at camp.'],
  ['kitchen', 'Cast iron skillet', 'Pre-seasoned skillet that goes from stove to oven to campfire.'],
  ['kitchen', 'Chef knife', 'Twenty centimetre stainless steel knife with a full tang.'],
  ['kitchen', 'French press', 'Glass coffee maker for four cups with a steel filter.'],
  ['kitchen', 'Stand mixer', 'Five litre bowl, ten speeds, dough hook and whisk included.'],
  ['kitchen', 'Bamboo cutting board', 'Large board with a juice groove, kind to knife edges.'],
  ['kitchen', 'Espresso grinder', 'Burr grinder with forty grind settings for espresso and filter coffee.'],
  ['home', 'Linen duvet cover', 'Stonewashed linen that gets softer with every wash.'],
  ['home', 'Reading lamp', 'Dimmable floor lamp with a warm LED and a flexible neck.'],
  ['home', 'Wool throw blanket', 'Merino wool blanket woven in a herringbone pattern.'],
  ['home', 'Ceramic plant pot', 'Glazed pot with a drainage hole and saucer for indoor plants.'],
  ['home', 'Wall clock', 'Silent sweep movement, oak frame, thirty centimetres across.'],
  ['home', 'Doormat', 'Coir doormat that scrapes mud off boots.'],
];

/** What {@link main} found. */
export interface SearchSyncResult {
  /** The index holds exactly the active products, and every probe search found what it should. */
  readonly ok: boolean;
  /** Documents in the index. */
  readonly indexed: number;
  /** The search that was asked for (default "waterproof jacket") and its hits. */
  readonly query: string;
  readonly hits: readonly SearchHit[];
}

async function openIndex(databaseUrl: string | undefined, fresh: boolean): Promise<{ index: PostgresSearchIndex; close: () => Promise<void> }> {
  const table = 'product_search';
  if (databaseUrl) {
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    const schema = 'rxfeed_example_search';
    // A fresh emulator has no history: drop what a previous run left (its lease epochs would not match).
    if (fresh) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    const index = await PostgresSearchIndex.create({ connection: pool, schema, table });
    return {
      index,
      close: async () => {
        await index.close();
        await pool.end();
      },
    };
  }
  // PGlite: embedded PostgreSQL with the same full-text search. The index never closes a PGlite it was given.
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create();
  const index = await PostgresSearchIndex.create({ connection: db, table });
  return {
    index,
    close: async () => {
      await index.close();
      await db.close();
    },
  };
}

async function upsertAll(products: Container, items: readonly Product[]): Promise<void> {
  await Promise.all(items.map((p) => products.items.upsert(p)));
}

/**
 * Runs the example: writes a catalog, syncs it into a full-text index through the change feed, edits and
 * discontinues products while it runs, searches, and checks the index against the container.
 *
 * @example
 * ```ts
 * const { ok, hits } = await main(process.env, 'rain jacket');
 * ```
 */
export async function main(env: NodeJS.ProcessEnv = process.env, query = 'waterproof jacket'): Promise<SearchSyncResult> {
  const cosmos = await connectCosmos(env, { initialRangeCount: 2 });
  const { index, close } = await openIndex(env.DATABASE_URL, cosmos.fresh);
  try {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: env.COSMOS_DATABASE ?? 'rxfeed-examples' });
    const { container: products } = await database.containers.createIfNotExists({ id: 'products', partitionKey: { paths: ['/category'], version: 2 } });
    const { container: leases } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });

    const catalog = CATALOG.map(([category, name, description], i): Product => ({
      id: `product-${i}`,
      category,
      name,
      description,
      priceCents: 990 + i * 250,
    }));
    await upsertAll(products, catalog);
    console.log(`wrote ${catalog.length} products; starting the change feed processor`);

    // Leases and view go together: an in-memory view starts empty, so on an account that outlives this process
    // it needs leases of its own (a new prefix) that start from the beginning, not the last run's checkpoints.
    const leasePrefix = env.DATABASE_URL || cosmos.fresh ? 'search-sync.' : `search-sync.${Date.now().toString(36)}.`;
    const feed = createChangeFeed<Product>({
      source: new CosmosSource<Product>(products),
      leases: new CosmosLeaseStore({ container: leases }),
      leasePrefix,
      instanceName: `search-example-${process.pid}`,
      startFrom: 'beginning',
      pollIntervalMs: 250,
      events: (e) => {
        if (e.type === 'error' || e.type === 'stall') console.error(`[${e.type}] ${e.type === 'error' ? e.error.message : e.message}`);
      },
    });
    const subscription = feed.changes$
      .pipe(
        syncToIndex(index, {
          document: (c: Change<Product>) =>
            c.document && { title: c.document.name, text: c.document.description, data: { category: c.document.category, priceCents: c.document.priceCents } },
          isDeleted: (c: Change<Product>) => c.document?.discontinued === true,
        }),
        // Checkpoints only cover what is already searchable.
        checkpointEvery({ count: 500, ms: 1_000 }),
      )
      .subscribe({ error: (error: unknown) => console.error('pipeline failed:', error) });

    // While it runs: the poncho becomes a jacket, the doormat is discontinued.
    const poncho = catalog.find((p) => p.name === 'Rain poncho')!;
    const doormat = catalog.find((p) => p.name === 'Doormat')!;
    await upsertAll(products, [
      { ...poncho, name: 'Packable rain jacket', description: 'Waterproof jacket that packs into its own pocket; covers a small backpack too.' },
      { ...doormat, discontinued: true },
    ]);
    console.log(`edited ${poncho.id} (now a rain jacket) and discontinued ${doormat.id} while the processor runs`);

    // Wait until the index holds exactly the active products in their latest version.
    const expected = async (): Promise<Map<string, Product>> => {
      const { resources } = await products.items.readAll<Product>().fetchAll();
      return new Map(resources.filter((p) => !p.discontinued).map((p) => [p.id, p]));
    };
    const inStep = async (): Promise<boolean> => {
      const [want, rows] = await Promise.all([expected(), index.rows()]);
      return rows.length === want.size && rows.every((r) => want.get(r.key)?.name === r.row.title && want.get(r.key)?.description === r.row.text);
    };
    let synced = await inStep();
    for (const deadline = Date.now() + 60_000; !synced && Date.now() < deadline; ) {
      await sleep(250);
      synced = await inStep();
    }
    await feed.stop();
    subscription.unsubscribe();

    const hits = await index.search(query, { limit: 5 });
    console.log(`search "${query}":`);
    for (const h of hits) console.log(`  ${h.rank.toFixed(3)}  ${h.id.padEnd(11)} ${h.document.title}`);

    // Probes with known answers: the edited product by its new words, the discontinued one never.
    const jackets = (await index.search('waterproof jacket', { limit: 10 })).map((h) => h.id);
    const doormats = (await index.search('doormat', { limit: 10 })).map((h) => h.id);
    const coffee = (await index.search('coffee', { limit: 10 })).map((h) => h.id).sort();
    const checks: [string, boolean][] = [
      ['index holds exactly the active products, latest version', synced],
      ['"waterproof jacket" finds the edited poncho', jackets.includes(poncho.id)],
      ['"waterproof jacket" ranks a jacket first', /jacket/i.test((await index.get(jackets[0] ?? ''))?.row.title ?? '')],
      ['"doormat" finds nothing (discontinued)', doormats.length === 0],
      ['"coffee" finds the French press and the grinder', JSON.stringify(coffee) === JSON.stringify(catalog.filter((p) => /coffee/i.test(p.description)).map((p) => p.id).sort())],
    ];
    for (const [what, passed] of checks) console.log(`  ${passed ? 'ok  ' : 'FAIL'} ${what}`);
    const ok = checks.every(([, passed]) => passed);
    const indexed = (await index.rows()).length;
    console.log(`check: ${ok ? 'OK' : 'FAILED'}: ${indexed} products indexed`);
    return { ok, indexed, query, hits };
  } finally {
    await close();
    await cosmos.stop();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.env, process.argv[2]).then(
    (result) => process.exit(result.ok ? 0 : 1),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
