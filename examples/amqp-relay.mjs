/**
 * @summary The outbox pattern on RabbitMQ: every change published to a topic exchange as a persistent message
 * with publisher confirms, checkpointed only once confirmed; consumers de-duplicate by `messageId`. Ends by
 * consuming the queue: every change arrived, each order's changes in LSN order.
 *
 * Run: `npm run build && node examples/amqp-relay.mjs` (imports `rxfeed` by package name, like your code would).
 * Settings: `AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672`). Needs `amqplib`.
 */
import amqp from 'amqplib';
import { checkpointEvery, createChangeFeed, MemoryLeaseStore, MemorySource } from 'rxfeed';
import { publishToAmqp, RelayStats } from 'rxfeed/amqp';

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const exchange = `example.orders.${process.pid}`;
const connection = await amqp.connect(url);
const channel = await connection.createChannel();
await channel.assertExchange(exchange, 'topic', { autoDelete: true });
const { queue } = await channel.assertQueue('', { exclusive: true });
await channel.bindQueue(queue, exchange, 'order.#');
const received = new Map(); // messageId → { id, lsn }: consumers de-duplicate by messageId
const lastLsn = new Map();
let ordered = true;
await channel.consume(queue, (message) => {
  if (!message || received.has(message.properties.messageId)) return;
  const { id, lsn } = JSON.parse(message.content.toString());
  received.set(message.properties.messageId, { id, lsn });
  if ((lastLsn.get(id) ?? -1) >= lsn) ordered = false;
  lastLsn.set(id, lsn);
}, { noAck: true });

const source = new MemorySource({ partitions: 4, mode: 'allVersionsAndDeletes' }); // your Cosmos DB container
for (let i = 0; i < 1000; i++) source.upsert({ id: `order-${i % 100}`, status: i < 500 ? 'open' : 'paid', total: i });

const stats = new RelayStats();
const feed = createChangeFeed({ source, leases: new MemoryLeaseStore(), instanceName: 'example', leasePrefix: 'example.', pollIntervalMs: 50 });
const subscription = feed.changes$
  .pipe(
    publishToAmqp(url, { exchange, routingKey: (c) => `order.${c.document?.status ?? 'deleted'}`, stats }),
    checkpointEvery({ count: 200, ms: 1000 }),
  )
  .subscribe({ error: (error) => console.error('relay failed:', error) });

for (let waited = 0; waited < 20_000 && received.size < 1000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
await feed.stop();
subscription.unsubscribe();
const ok = received.size === 1000 && ordered;
console.log(`${received.size} distinct messages received; relay: ${JSON.stringify(stats)}`);
console.log(`check: ${ok ? 'OK' : 'FAILED'} (every change arrived, each order's changes in LSN order)`);
await connection.close();
process.exitCode = ok ? 0 : 1;
