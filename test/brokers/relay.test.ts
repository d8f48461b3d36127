import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { asyncScheduler, lastValueFrom, of, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishToJetStream } from '../../src/nats/publishToJetStream.js';
import { RelayStats } from '../../src/relay/relay.js';
import { FaultEnv, faultyJetStream } from '../support/faults/index.js';
import { batch, ownedBatch } from '../support/brokers/relayScenario.js';
import { NATS_SERVERS, serviceUnavailable, uniqueName } from '../support/brokers/services.js';

const skip = await serviceUnavailable('NATS JetStream', NATS_SERVERS);

describe.skipIf(skip !== undefined)('relay ownership and item failures (real JetStream)', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let stream: string;
  beforeAll(async () => {
    nc = await connect({ servers: NATS_SERVERS });
    jsm = await jetstreamManager(nc);
    stream = uniqueName('rxfeed_relay');
    await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
  });
  afterAll(async () => {
    await jsm?.streams.delete(stream).catch(() => undefined);
    await nc?.close();
  });
  const stored = async () => (await jsm.streams.info(stream)).state.messages;

  it('hands a batch back unpublished and unemitted when its ownership ends while the broker is down', async () => {
    const before = await stored();
    const { batch: b, ownership, calls } = ownedBatch(batch('0', ['a', 'b', 'c']));
    const stats = new RelayStats();
    const js = faultyJetStream(jetstream(nc), { publish: [{ kind: 'drop', count: 1_000 }] }, new FaultEnv({ seed: 1, scheduler: asyncScheduler }));
    const out = lastValueFrom(of(b).pipe(publishToJetStream(js, { subject: (c) => `${stream}.${c.id}`, stats, ackTimeoutMs: 50, backoff: { initialMs: 5, maxMs: 10 } }), toArray()));
    for (let i = 0; i < 200 && stats.retries < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    ownership.abort(); // the lease was lost (or its local deadline passed): the next owner publishes these
    expect(await out).toEqual([]);
    expect(calls).toEqual(['drop 7']);
    expect(await stored()).toBe(before);
    expect(stats.confirmed).toBe(0);
  });

  it('halts the partition (the default onFailure) when subject throws: nothing of the batch is published or emitted', async () => {
    const before = await stored();
    const { batch: b, calls } = ownedBatch(batch('0', ['a', 'bad', 'c']));
    const subject = (c: { id: string }) => {
      if (c.id === 'bad') throw new Error('no subject for this one');
      return `${stream}.${c.id}`;
    };
    expect(await lastValueFrom(of(b).pipe(publishToJetStream(jetstream(nc), { subject }), toArray()))).toEqual([]);
    expect(calls).toEqual(['halt 7 HandlerError']);
    expect(await stored()).toBe(before);
  });
});
