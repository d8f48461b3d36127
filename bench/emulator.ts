/**
 * @summary Emulator throughput: SDK writes, change feed drains and idle polls over HTTP, and the raw change log.
 *
 * Run: npx tsx bench/emulator.ts [documents=20000]
 */
import { ChangeFeedStartFrom, CosmosClient, type Container } from '@azure/cosmos';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { readChanges } from '../src/emulator/feedReader.js';
import { CosmosEmulator } from '../src/emulator/index.js';
import { Store } from '../src/emulator/store/Store.js';

const N = Number(process.argv[2] ?? 20_000);

function rate(label: string, count: number, ms: number, unit = 'ops'): void {
  console.log(`${label.padEnd(52)} ${String(count).padStart(7)} ${unit} in ${ms.toFixed(0).padStart(6)} ms = ${Math.round((count * 1000) / ms)} ${unit}/s`);
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const out = await fn();
  return [out, performance.now() - t0];
}

async function writeAll(c: Container, count: number, concurrency: number, prefix: string): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        await c.items.create({ id: `${prefix}${i}`, pk: `p${i % 97}`, n: i, body: 'x'.repeat(200) });
      }
    }),
  );
}

async function drain(c: Container, maxItemCount: number): Promise<number> {
  const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount });
  let total = 0;
  for (;;) {
    const res = await it.readNext();
    if (res.statusCode === 304) return total;
    total += res.result.length;
  }
}

const emulator = await CosmosEmulator.start({ initialRangeCount: 4 });
const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
const { database } = await client.databases.createIfNotExists({ id: 'bench' });
const { container } = await database.containers.createIfNotExists({ id: 'items', partitionKey: { paths: ['/pk'] } });

console.log(`node ${process.version}, ${cpus().length} cores, load ${loadavg()[0]!.toFixed(1)}; ${N} documents of ~250 bytes, 4 ranges`);
let [, ms] = await timed(() => writeAll(container, N / 4, 1, 'seq-'));
rate('SDK create, sequential', N / 4, ms);
[, ms] = await timed(() => writeAll(container, N - N / 4, 16, 'par-'));
rate('SDK create, 16 concurrent', N - N / 4, ms);

for (const pageSize of [100, 1000]) {
  const [count, t] = await timed(() => drain(container, pageSize));
  rate(`SDK change feed drain from beginning, maxItemCount ${pageSize}`, count, t, 'docs');
}

const idle = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now() });
await idle.readNext();
const polls = 500;
[, ms] = await timed(async () => {
  for (let i = 0; i < polls; i++) await idle.readNext();
});
rate('SDK idle poll (304 on each of 4 ranges per readNext)', polls, ms, 'polls');

const [matches, qms] = await timed(async () => (await container.items.query('SELECT * FROM c WHERE STARTSWITH(c.id, "seq-1")').fetchAll()).resources.length);
console.log(`${'SDK query, STARTSWITH over the whole container'.padEnd(52)} ${String(matches).padStart(7)} rows in ${qms.toFixed(0).padStart(6)} ms (pages of 100)`);

// The change log alone, without HTTP or the SDK: what a poll costs the emulator itself.
const store = new Store({ now: Date.now, initialRangeCount: () => 1, defaultPartitionKeyVersion: 2 });
store.createDatabase({ id: 'db' });
const c = store.createContainer('db', { id: 'c', partitionKey: { paths: ['/pk'] } });
[, ms] = await timed(async () => {
  for (let i = 0; i < N * 5; i++) store.createDocument(c, { id: `d${i % N}`, pk: `p${i % 97}` }, [`p${i % 97}`], true);
});
rate('store upsert (in process)', N * 5, ms);
const range = c.ranges[0]!;
[, ms] = await timed(async () => {
  let lsn = 0;
  let pages = 0;
  for (;;) {
    const page = readChanges(range, { kind: 'afterLsn', lsn }, false, 1000, () => true);
    if (page.entries.length === 0) break;
    lsn = page.continuationLsn;
    pages++;
  }
  return pages;
});
rate('store LatestVersion read of a 5x-overwritten log, all pages', N, ms, 'docs');

client.dispose();
await emulator.stop();
