/**
 * @summary Broker sinks against hand-written loops: RedisViewStore (materializeToView), publishToJetStream and
 * publishToAmqp, each beside a loop making the same pipelined broker calls; ratio = rxfeed / loop (target ≥ 0.9).
 *
 * Run: npx tsx bench/brokers.ts [changes=10000] [rounds=3] [only=redis,nats,amqp]
 * Both sides see the same batches (4 partitions, 100 changes a batch, interleaved), work on 4 partitions at once
 * and one batch of a partition at a time, and build the same messages (the default JSON envelope, the same
 * de-duplication ids, the same Lua script and arguments). Rounds alternate loop / rxfeed (which goes first alternates too) on connections opened
 * and warmed before the first round; each round publishes fresh ids (JetStream would otherwise acknowledge
 * duplicates, which is faster). Reported: median changes/s per side, the ratio of the medians, each round's ratio, and the median client CPU
 * per change of each side (steadier than wall time when the machine is shared).
 * Services: RXFEED_BENCH_REDIS_URL, RXFEED_BENCH_NATS_URL, RXFEED_BENCH_AMQP_URL (defaults: this machine's);
 * a service that does not answer is skipped with a note.
 */
import { performance } from 'node:perf_hooks';
import { createHash } from 'node:crypto';
import { DiscardPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { Redis } from 'ioredis';
import { from, lastValueFrom, type OperatorFunction } from 'rxjs';
import type { Change } from '../src/core/Change.js';
import { ChangeBatch } from '../src/core/ChangeBatch.js';
import { publishToAmqp } from '../src/amqp/publishToAmqp.js';
import { publishToJetStream } from '../src/nats/publishToJetStream.js';
import { changeEnvelope, messageId } from '../src/relay/relay.js';
import { RedisViewStore } from '../src/redis/RedisViewStore.js';
import { WRITE_SCRIPT } from '../src/redis/writeScript.js';
import { materializeToView } from '../src/sinks/materializeToView.js';

const CHANGES = Number(process.argv[2] ?? 10_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const ONLY = (process.argv[4] ?? 'redis,nats,amqp').split(',');
const PARTITIONS = 4;
const BATCH = 100;
const REDIS_URL = process.env.RXFEED_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const NATS_URL = process.env.RXFEED_BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';
const AMQP_URL = process.env.RXFEED_BENCH_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const tag = `rxfeed_bench_${process.pid}`;

interface Order {
  readonly customer: string;
  readonly total: number;
}

/** The batches of one round, LSNs starting above `base` (fresh ids per round), partitions interleaved. */
function feed(base: number): ChangeBatch<Order>[] {
  const perPartition = Math.ceil(CHANGES / PARTITIONS);
  const byPartition: ChangeBatch<Order>[][] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const batches: ChangeBatch<Order>[] = [];
    for (let i = 0; i < perPartition; i += BATCH) {
      const changes: Change<Order>[] = [];
      for (let j = i; j < Math.min(perPartition, i + BATCH); j++) {
        const lsn = base + j + 1;
        changes.push({ id: `order-${p}-${j % 500}`, operation: 'upsert', document: { customer: `c${j % 97}`, total: j % 1000 }, lsn, timestampMs: Date.UTC(2026, 0, 1) + j });
      }
      batches.push(new ChangeBatch({ partition: `p${p}`, changes, position: `p${p}@${base + i + changes.length}`, epoch: 1 }));
    }
    byPartition.push(batches);
  }
  const interleaved: ChangeBatch<Order>[] = [];
  for (let i = 0; byPartition.some((b) => i < b.length); i++) for (const b of byPartition) if (b[i]) interleaved.push(b[i]!);
  return interleaved;
}

/** The hand-written side: each partition's batches one after the other, the partitions at once. */
async function handLoop(batches: readonly ChangeBatch<Order>[], send: (batch: ChangeBatch<Order>) => Promise<void>): Promise<void> {
  const partitions = [...new Set(batches.map((b) => b.partition))];
  await Promise.all(
    partitions.map(async (p) => {
      for (const batch of batches) if (batch.partition === p) await send(batch);
    }),
  );
}

/** Client CPU per change (µs) of the last measured run: steadier than wall time on a loaded machine. */
let lastCpuUs = 0;

async function throughput(work: () => Promise<void>): Promise<number> {
  const start = performance.now();
  const cpu = process.cpuUsage();
  await work();
  const used = process.cpuUsage(cpu);
  lastCpuUs = (used.user + used.system) / CHANGES;
  return CHANGES / ((performance.now() - start) / 1000);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Pair {
  readonly name: string;
  loop(batches: ChangeBatch<Order>[]): Promise<void>;
  rxfeed(batches: ChangeBatch<Order>[]): Promise<void>;
  /** Before each timed side, untimed: an empty stream or queue. */
  reset?(): Promise<void>;
  close(): Promise<void>;
}

async function compare(pair: Pair): Promise<string> {
  const loop: number[] = [];
  const ours: number[] = [];
  const cpu: [number[], number[]] = [[], []];
  let base = 1_000_000;
  await pair.loop(feed((base += CHANGES))); // warm-up, both sides
  await pair.rxfeed(feed((base += CHANGES)));
  // Which side goes first alternates: a stream or queue that grows during the run slows later rounds.
  for (let r = 0; r < ROUNDS; r++) {
    const sides = [() => pair.loop(feed((base += CHANGES))), () => pair.rxfeed(feed((base += CHANGES)))] as const;
    for (const side of r % 2 === 0 ? [0, 1] : [1, 0]) {
      await pair.reset?.();
      (side === 0 ? loop : ours).push(await throughput(sides[side]!));
      cpu[side]!.push(lastCpuUs);
    }
  }
  await pair.close();
  const [l, o] = [median(loop), median(ours)];
  const pairs = ours.map((x, i) => (x / loop[i]!).toFixed(2)).join(' ');
  const [cl, co] = [median(cpu[0]), median(cpu[1])];
  return (
    `${pair.name.padEnd(34)} loop ${Math.round(l).toString().padStart(7)}/s   rxfeed ${Math.round(o).toString().padStart(7)}/s   ratio ${(o / l).toFixed(2)}` +
    `   (per round: ${pairs})   client CPU/change: loop ${cl.toFixed(0)} µs, rxfeed ${co.toFixed(0)} µs`
  );
}

const drain = (operator: OperatorFunction<ChangeBatch<Order>, ChangeBatch<Order>>) => (batches: ChangeBatch<Order>[]) =>
  lastValueFrom(from(batches).pipe(operator), { defaultValue: undefined }).then(() => undefined);

async function redisPair(): Promise<Pair> {
  const client = new Redis(REDIS_URL, { lazyConnect: true });
  await client.connect();
  const sha = createHash('sha1').update(WRITE_SCRIPT).digest('hex');
  await client.script('LOAD', WRITE_SCRIPT);
  let view = 0;
  const keysOf = (name: string) => ['rows', 'tombstones', 'partitions', 'fences'].map((k) => `${tag}:{${name}}:${k}`);
  return {
    name: 'Redis view (guarded, 1 script/batch)',
    async loop(batches) {
      const keys = keysOf(`loop${++view}`);
      await handLoop(batches, async (batch) => {
        const args: (string | number)[] = ['guarded', 1, batch.partition, batch.epoch, batch.position, batch.readLsn ?? '', '', ''];
        for (const c of batch.changes) args.push(c.id, c.lsn, batch.partition, c.timestampMs, JSON.stringify([c.lsn, c.timestampMs, batch.partition, { total: c.document!.total }]));
        await client.evalsha(sha, 4, ...keys, ...args);
      });
    },
    rxfeed: async (batches) => {
      const store = new RedisViewStore<{ total: number }>({ name: `ours${++view}`, keyPrefix: `${tag}:`, client });
      await drain(materializeToView(store, { project: (c) => ({ total: c.document!.total }) }))(batches);
    },
    async close() {
      const keys = await client.keys(`${tag}:*`);
      if (keys.length) await client.del(...keys);
      await client.quit();
    },
  };
}

async function natsPair(): Promise<Pair> {
  const nc = await natsConnect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const stream = { name: tag, subjects: [`${tag}.>`], max_msgs: 200_000, discard: DiscardPolicy.Old };
  await jsm.streams.add(stream);
  const js = jetstream(nc);
  const subject = (c: Change<Order>) => `${tag}.${c.id}`;
  return {
    name: 'NATS JetStream (msg ids, acks)',
    loop: (batches) =>
      handLoop(batches, async (batch) => {
        await Promise.all(batch.changes.map((c) => js.publish(subject(c), changeEnvelope(c, batch), { msgID: messageId(c), timeout: 5000 })));
      }),
    rxfeed: drain(publishToJetStream(js, { subject })),
    async reset() {
      await jsm.streams.delete(tag);
      await jsm.streams.add(stream);
    },
    async close() {
      await jsm.streams.delete(tag);
      await nc.close();
    },
  };
}

async function amqpPair(): Promise<Pair> {
  const connection = await amqp.connect(AMQP_URL);
  const admin = await connection.createChannel();
  await admin.assertExchange(tag, 'topic', { autoDelete: true });
  await admin.assertQueue(tag, { autoDelete: true });
  await admin.bindQueue(tag, tag, '#');
  const channel = await connection.createConfirmChannel();
  const routingKey = (c: Change<Order>) => `order.${c.id}`;
  return {
    name: 'RabbitMQ (persistent, confirms)',
    loop: (batches) =>
      handLoop(batches, async (batch) => {
        await Promise.all(
          batch.changes.map(
            (c) =>
              new Promise<void>((resolve, reject) => {
                channel.publish(
                  tag,
                  routingKey(c),
                  Buffer.from(changeEnvelope(c, batch)),
                  { persistent: true, messageId: messageId(c), contentType: 'application/json', timestamp: Math.floor(c.timestampMs / 1000), headers: { 'x-rxfeed-lsn': c.lsn, 'x-rxfeed-partition': batch.partition } },
                  (error: unknown) => (error ? reject(error as Error) : resolve()),
                );
              }),
          ),
        );
      }),
    rxfeed: async (batches) => {
      // The warmed connection, as the loop has it (the relay opens its own confirm channel on it).
      const shared = { connect: async () => ({ createConfirmChannel: () => connection.createConfirmChannel(), on: () => undefined, close: async () => undefined }) };
      const operator = publishToAmqp<ChangeBatch<Order>>(shared, { exchange: tag, routingKey });
      await lastValueFrom(from(batches).pipe(operator), { defaultValue: undefined });
    },
    async reset() {
      await admin.purgeQueue(tag);
    },
    async close() {
      await connection.close();
    },
  };
}

console.log(`broker sinks: ${CHANGES} changes a round, ${PARTITIONS} partitions, batches of ${BATCH}, ${ROUNDS} rounds (medians)`);
for (const [name, make] of [
  ['Redis', redisPair],
  ['NATS', natsPair],
  ['RabbitMQ', amqpPair],
] as const) {
  if (!ONLY.includes(name === 'RabbitMQ' ? 'amqp' : name.toLowerCase())) continue;
  try {
    console.log(await compare(await make()));
  } catch (error) {
    console.log(`${name}: skipped (${(error as Error).message})`);
  }
}
