/**
 * @summary A Redis read model: order totals per order kept in a RedisViewStore by the change feed, fenced and
 * LSN-guarded, checkpointed only after Redis applied them. Ends by checking the view against the source.
 *
 * Run: `npm run build && node examples/redis-view.mjs` (imports `rxfeed` by package name, like your code would).
 * Settings: `REDIS_URL` (default `redis://127.0.0.1:6379/0`). Needs `ioredis` (`npm install ioredis`).
 */
import { bufferTime, filter } from 'rxjs';
import { checkpointEvery, createChangeFeed, materializeToView, MemoryLeaseStore, MemorySource } from 'rxfeed';
import { RedisViewStore } from 'rxfeed/redis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const source = new MemorySource({ partitions: 4, mode: 'allVersionsAndDeletes' }); // your Cosmos DB container
const view = new RedisViewStore({ name: `example_orders_${process.pid}`, url });

// 2 000 order writes over 300 orders: creates, updates and some deletes.
const expected = new Map();
for (let i = 0; i < 2000; i++) {
  const id = `order-${i % 300}`;
  if (i % 17 === 0 && expected.has(id)) {
    source.delete(id);
    expected.delete(id);
  } else {
    source.upsert({ id, customer: `c${i % 23}`, total: i });
    expected.set(id, i);
  }
}

const feed = createChangeFeed({ source, leases: new MemoryLeaseStore(), instanceName: 'example', leasePrefix: 'example.', pollIntervalMs: 50 });
const subscription = feed.changes$
  .pipe(
    bufferTime(100, null, 20),
    filter((batches) => batches.length > 0),
    materializeToView(view, { project: (c) => ({ customer: c.document.customer, total: c.document.total }) }),
    checkpointEvery({ count: 500, ms: 1000 }),
  )
  .subscribe({ error: (error) => console.error('feed failed:', error) });

let rows = [];
for (let waited = 0; waited < 20_000; waited += 200) {
  await new Promise((resolve) => setTimeout(resolve, 200));
  rows = await view.rows();
  if (rows.length === expected.size && rows.every((r) => expected.get(r.key) === r.row.total)) break;
}
await feed.stop();
subscription.unsubscribe();
const ok = rows.length === expected.size && rows.every((r) => expected.get(r.key) === r.row.total);
console.log(`${rows.length} orders in Redis, ${(await view.positions()).size} partition positions stored with them`);
console.log(`check: ${ok ? 'OK' : 'FAILED'} (the view equals the source)`);
await view.drop();
await view.close();
process.exitCode = ok ? 0 : 1;
