import amqp, { type Channel, type ChannelModel } from 'amqplib';
import { asyncScheduler, lastValueFrom, of, Subject, toArray } from 'rxjs';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { type AmqpConnectionLike, publishToAmqp } from '../../src/amqp/publishToAmqp.js';
import { RelayError, RelayStats } from '../../src/relay/relay.js';
import { AMQP_URL, serviceUnavailable, uniqueName } from '../support/brokers/services.js';
import { batch, orderAndDuplicates, relayCrashScenario, type RelayDoc, type StoredMessage } from '../support/brokers/relayScenario.js';
import { TcpProxy } from '../support/brokers/tcpProxy.js';
import { FaultEnv, faultyAmqp } from '../support/faults/index.js';

const skip = await serviceUnavailable('RabbitMQ', AMQP_URL);

describe.skipIf(skip !== undefined)('publishToAmqp (real RabbitMQ)', () => {
  let connection: ChannelModel;
  let admin: Channel;
  beforeAll(async () => {
    connection = await amqp.connect(AMQP_URL);
    admin = await connection.createChannel();
  });
  afterAll(async () => {
    await connection?.close();
  });

  /** A topic exchange and a queue bound to all of it, auto-deleted; `received` collects what the queue gets. */
  const topology = async (queueArgs: Record<string, unknown> = {}) => {
    const exchange = uniqueName('rxfeed_x');
    const queue = uniqueName('rxfeed_q');
    await admin.assertExchange(exchange, 'topic', { autoDelete: true });
    await admin.assertQueue(queue, { autoDelete: true, arguments: queueArgs });
    await admin.bindQueue(queue, exchange, '#');
    const received: StoredMessage[] = [];
    const consume = async () =>
      admin.consume(queue, (m) => {
        if (!m) return;
        const body = JSON.parse(m.content.toString()) as { id: string; lsn: number };
        received.push({ msgId: String(m.properties.messageId), id: body.id, lsn: body.lsn });
      }, { noAck: true });
    return { exchange, queue, received, consume };
  };
  const open = (url = AMQP_URL) => async () => (await amqp.connect(url)) as unknown as AmqpConnectionLike;

  it('publishes every change with confirms, keeps per-key order across a split, and counts the duplicates a crash between publish and checkpoint leaves', async () => {
    const { exchange, received, consume } = await topology();
    await consume();
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(AMQP_URL).port || 5672) });
    const viaProxy = AMQP_URL.replace(/:\d+$/, `:${proxy.port}`).replace(/@[^:/]+:/, '@127.0.0.1:');
    const env = new FaultEnv({ seed: 1, scheduler: asyncScheduler });
    const direct = faultyAmqp(open(), {}, env);
    const proxied = faultyAmqp(open(viaProxy), {}, env, direct.confirmed);
    try {
      const outcome = await relayCrashScenario({
        relay: (stats, host) =>
          publishToAmqp(host === 'host-a' ? proxied : direct, { exchange, routingKey: (c) => `doc.${c.id}`, stats, confirmTimeoutMs: 1000, backoff: { initialMs: 20, maxMs: 200 } }),
        confirmed: direct.confirmed,
        readBack: async () => received,
        // Confirms held back, then the connection cut with messages unconfirmed; later a plain cut.
        disturb: (tick) => (tick === 8 ? proxy.stall() : tick === 10 || tick === 20 ? (proxy.cut(), proxy.flow()) : undefined),
      });
      const { disordered, duplicates } = orderAndDuplicates(outcome.stored);
      expect(new Set(outcome.stored.map((s) => `${s.id}@${s.lsn}`))).toEqual(new Set(outcome.written.map((w) => w.msgId)));
      expect(disordered).toEqual([]);
      expect(outcome.unconfirmedAtCheckpoint).toEqual([]);
      expect(outcome.statsA.retries).toBeGreaterThan(0);
      expect(proxied.connections).toBeGreaterThan(1); // reconnected after the cuts
      // AMQP cannot de-duplicate: B's replay of what A published past its checkpoint arrives twice (by messageId).
      expect(duplicates).toBeGreaterThan(0);
      console.log(
        `amqp scenario: ${outcome.written.length} changes, ${outcome.stored.length} messages, ${duplicates} duplicates; A ${JSON.stringify(outcome.statsA)}, B ${JSON.stringify(outcome.statsB)}`,
      );
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('retries a queue that refuses (reject-publish overflow: nacks) while the partition is owned, reporting error events', async () => {
    const { exchange, queue, received } = await topology({ 'x-max-length': 2, 'x-overflow': 'reject-publish' });
    const events: FeedEvent[] = [];
    const stats = new RelayStats();
    const out = lastValueFrom(of(batch('0', ['a', 'b', 'c', 'd'], events)).pipe(publishToAmqp(AMQP_URL, { exchange, routingKey: (c) => c.id, stats, backoff: { initialMs: 10, maxMs: 50 } }), toArray()));
    for (let i = 0; i < 200 && stats.retries < 3; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(stats.retries).toBeGreaterThanOrEqual(3);
    await admin.purgeQueue(queue); // a consumer made room
    for (let i = 0; i < 200 && stats.confirmed < 4; i++) {
      await admin.purgeQueue(queue);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(await out).toHaveLength(1);
    expect(received).toEqual([]);
    expect(events.some((e) => e.type === 'error' && e.kind === 'infrastructure' && (e.attempts ?? 0) >= 3)).toBe(true);
  });

  it('waits out nacks, lost and slow confirms and a connection dropped mid-batch (fault wrapper); order holds, re-sent messages are counted', async () => {
    const { exchange, received, consume } = await topology();
    await consume();
    const stats = new RelayStats();
    // Rounds: [a@1 b@2] [a@3 c@4] [a@5]. a@1 is nacked (b@2 confirmed after it: re-sent), its resend confirmed
    // late; c@4's confirm never comes (the confirm timeout drops the channel); the connection drops as a@5 is sent.
    const plan = {
      publish: [{ kind: 'full', key: '1::a', count: 1 }, { kind: 'slowAck', key: '1::a', count: 1, ms: 100 }, { kind: 'lostAck', key: '4::c', count: 1 }, { kind: 'drop', key: '5::a', count: 1 }],
    } as const;
    const faulty = faultyAmqp(open(), plan, new FaultEnv({ seed: 1, scheduler: asyncScheduler }));
    const emitted = await lastValueFrom(
      of(batch('0', ['a', 'b', 'a', 'c', 'a'])).pipe(publishToAmqp(faulty, { exchange, routingKey: (c) => c.id, stats, confirmTimeoutMs: 200, backoff: { initialMs: 5, maxMs: 20 } }), toArray()),
    );
    expect(emitted).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const { disordered, duplicates } = orderAndDuplicates(received);
    expect(disordered).toEqual([]);
    expect(received.map((m) => `${m.id}@${m.lsn}`)).toEqual(['b@2', 'a@1', 'b@2', 'a@3', 'c@4', 'c@4', 'a@5']);
    expect(duplicates).toBe(2);
    expect(stats.resent).toBe(1);
    expect(faulty.connections).toBe(2);
    expect(faulty.drops).toBe(1);
  });

  it('waits out confirms held back (a blocked or slow broker) without sending again, and emits only once they came', async () => {
    const { exchange, received, consume } = await topology();
    await consume();
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(AMQP_URL).port || 5672) });
    try {
      const url = AMQP_URL.replace(/:\d+$/, `:${proxy.port}`).replace(/@[^:/]+:/, '@127.0.0.1:');
      const stats = new RelayStats();
      const emitted: unknown[] = [];
      const input = new Subject<ChangeBatch<RelayDoc>>();
      const done = new Promise<void>((resolve) =>
        input.pipe(publishToAmqp(url, { exchange, routingKey: (c) => c.id, stats, confirmTimeoutMs: 10_000 })).subscribe({ next: (v) => emitted.push(v), complete: resolve }),
      );
      input.next(batch('0', ['warm'])); // connects and opens the channel
      for (let i = 0; i < 200 && emitted.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      proxy.stall(); // every reply of the broker held back from now on
      input.next(batch('0', ['a', 'b', 'c']));
      input.complete();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(emitted).toHaveLength(1);
      proxy.flow();
      await done;
      expect(emitted).toHaveLength(2);
      expect(stats.retries).toBe(0);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(received.map((m) => m.id)).toEqual(['warm', 'a', 'b', 'c']);
    } finally {
      await proxy.close();
    }
  });

  it('keeps trying to connect while the broker refuses connections, then publishes', async () => {
    const { exchange, received, consume } = await topology();
    await consume();
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(AMQP_URL).port || 5672) });
    proxy.refuse();
    try {
      const url = AMQP_URL.replace(/:\d+$/, `:${proxy.port}`).replace(/@[^:/]+:/, '@127.0.0.1:');
      const stats = new RelayStats();
      const out = lastValueFrom(of(batch('0', ['x', 'y'])).pipe(publishToAmqp(url, { exchange, routingKey: (c) => c.id, stats, backoff: { initialMs: 10, maxMs: 40 } }), toArray()));
      for (let i = 0; i < 200 && stats.retries < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(stats.retries).toBeGreaterThanOrEqual(2);
      proxy.accept();
      expect(await out).toHaveLength(1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(received.map((m) => m.id)).toEqual(['x', 'y']);
    } finally {
      await proxy.close();
    }
  });

  it('ends the stream with a RelayError for a missing exchange, and says what to fix for bad options', async () => {
    const error = await lastValueFrom(of(batch('0', ['a'])).pipe(publishToAmqp(AMQP_URL, { exchange: uniqueName('missing'), routingKey: () => 'x' }))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RelayError);
    expect(String((error as Error).message)).toMatch(/NOT_FOUND/);
    expect(() => publishToAmqp('http://x', { exchange: 'x', routingKey: () => 'x' })).toThrow(InvalidOptionsError);
    expect(() => publishToAmqp(AMQP_URL, { exchange: 'x' } as never)).toThrow(/routingKey/);
  });
});
