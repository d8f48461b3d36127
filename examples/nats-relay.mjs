/**
 * @summary The outbox pattern on NATS JetStream: every change relayed to a subject, checkpointed only after
 * JetStream acknowledged it, with de-duplication ids so a replay (after a crash, a split) is not stored twice.
 * Ends by reading the stream back: every change once, each order's changes in LSN order.
 *
 * Run: `npm run build && node examples/nats-relay.mjs` (imports `rxfeed` by package name, like your code would).
 * Settings: `NATS_URL` (default `nats://127.0.0.1:4222`, JetStream enabled). Needs `@nats-io/jetstream` and
 * `@nats-io/transport-node`.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { checkpointEvery, createChangeFeed, MemoryLeaseStore, MemorySource } from 'rxfeed';
import { publishToJetStream, RelayStats } from 'rxfeed/nats';

const nc = await connect({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
const jsm = await jetstreamManager(nc);
const stream = `EXAMPLE_ORDERS_${process.pid}`;
await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], duplicate_window: 120_000_000_000 }); // 2 min

const source = new MemorySource({ partitions: 4, mode: 'allVersionsAndDeletes' }); // your Cosmos DB container
for (let i = 0; i < 1000; i++) source.upsert({ id: `order-${i % 100}`, status: i < 500 ? 'open' : 'paid', total: i });

const stats = new RelayStats();
const feed = createChangeFeed({ source, leases: new MemoryLeaseStore(), instanceName: 'example', leasePrefix: 'example.', pollIntervalMs: 50 });
const subscription = feed.changes$
  .pipe(
    publishToJetStream(jetstream(nc), { subject: (c) => `${stream}.${c.document?.status ?? 'deleted'}.${c.id}`, stats }),
    checkpointEvery({ count: 200, ms: 1000 }),
  )
  .subscribe({ error: (error) => console.error('relay failed:', error) });

for (let waited = 0; waited < 20_000 && stats.confirmed < 1000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
await feed.stop();
subscription.unsubscribe();

// Read the stream back, as a consumer would.
const { state } = await jsm.streams.info(stream);
const lastLsn = new Map();
let ordered = true;
for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
  const { id, lsn } = (await jsm.streams.getMessage(stream, { seq })).json();
  if ((lastLsn.get(id) ?? -1) >= lsn) ordered = false;
  lastLsn.set(id, lsn);
}
const ok = state.messages === 1000 && ordered;
console.log(`${state.messages} messages in ${stream}; relay: ${JSON.stringify(stats)}`);
console.log(`check: ${ok ? 'OK' : 'FAILED'} (every change once, each order's changes in LSN order)`);
await jsm.streams.delete(stream);
await nc.close();
process.exitCode = ok ? 0 : 1;
