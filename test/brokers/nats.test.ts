import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DiscardPolicy, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { asyncScheduler, lastValueFrom, of, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { publishToJetStream, type JetStreamClientLike } from '../../src/nats/publishToJetStream.js';
import { RelayError, RelayStats } from '../../src/relay/relay.js';
import { NATS_SERVERS, serviceUnavailable, uniqueName } from '../support/brokers/services.js';
import { batch, orderAndDuplicates, relayCrashScenario, type StoredMessage } from '../support/brokers/relayScenario.js';
import { TcpProxy } from '../support/brokers/tcpProxy.js';
import { confirmingJetStream } from '../support/brokers/relayScenario.js';
import { FaultEnv, faultyJetStream } from '../support/faults/index.js';

const skip = await serviceUnavailable('NATS JetStream', NATS_SERVERS);

describe.skipIf(skip !== undefined)('publishToJetStream (real NATS JetStream)', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const streams: string[] = [];
  beforeAll(async () => {
    nc = await connect({ servers: NATS_SERVERS });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    for (const name of streams) await jsm.streams.delete(name).catch(() => undefined);
    await nc?.close();
  });

  const newStream = async (limits: { max_msgs?: number; discard?: DiscardPolicy } = {}) => {
    const name = uniqueName('rxfeed');
    streams.push(name);
    await jsm.streams.add({ name, subjects: [`${name}.>`], duplicate_window: 120_000_000_000, ...limits });
    return name;
  };
  const readStream = async (name: string): Promise<StoredMessage[]> => {
    const { state } = await jsm.streams.info(name);
    const out: StoredMessage[] = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(name, { seq });
      if (!m) continue;
      const body = m.json<{ id: string; lsn: number }>();
      out.push({ msgId: m.header.get('Nats-Msg-Id'), id: body.id, lsn: body.lsn });
    }
    return out;
  };

  it('publishes every change, keeps per-key order across a split, and de-duplicates the replay after a crash between publish and checkpoint', async () => {
    const name = await newStream();
    const client = confirmingJetStream(jetstream(nc));
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(NATS_SERVERS).port) });
    const viaProxy = await connect({ servers: `127.0.0.1:${proxy.port}`, maxReconnectAttempts: -1, reconnectTimeWait: 50 });
    const proxied = confirmingJetStream(jetstream(viaProxy), client.confirmed);
    try {
      const outcome = await relayCrashScenario({
        // Host A goes through the proxy (its connection is cut twice mid-batch), host B straight to NATS.
        relay: (stats, host) => publishToJetStream(host === 'host-a' ? proxied : client, { subject: (c) => `${name}.${c.id}`, stats, ackTimeoutMs: 300, backoff: { initialMs: 20, maxMs: 200 } }),
        confirmed: client.confirmed,
        readBack: () => readStream(name),
        // Acknowledgements held back, then the connection cut with publishes in flight; later a plain cut.
        disturb: (tick) => (tick === 8 ? proxy.stall() : tick === 10 || tick === 20 ? (proxy.cut(), proxy.flow()) : undefined),
      });
      const { disordered, duplicates } = orderAndDuplicates(outcome.stored);
      expect(new Set(outcome.stored.map((s) => `${s.id}@${s.lsn}`))).toEqual(new Set(outcome.written.map((w) => w.msgId)));
      expect(disordered).toEqual([]);
      expect(duplicates).toBe(0); // JetStream dropped every replayed message by its id
      expect(outcome.statsB.duplicates).toBeGreaterThan(0); // B replayed what A published past its checkpoint
      expect(outcome.unconfirmedAtCheckpoint).toEqual([]);
      expect(proxy.cuts).toBeGreaterThan(0);
      expect(outcome.statsA.retries).toBeGreaterThan(0); // the cut lost acknowledgements of messages in flight
      console.log(`nats scenario: ${outcome.written.length} changes, A ${JSON.stringify(outcome.statsA)}, B ${JSON.stringify(outcome.statsB)}, cuts ${proxy.cuts}`);
    } finally {
      await viaProxy.close();
      await proxy.close();
    }
  }, 60_000);

  it('retries a full stream (discard new) while the partition is owned, reporting error events, and emits only after the acknowledgement', async () => {
    const name = await newStream({ max_msgs: 3, discard: DiscardPolicy.New });
    const js = jetstream(nc);
    const events: FeedEvent[] = [];
    const stats = new RelayStats();
    const b = batch('0', ['a', 'b', 'c', 'd', 'e'], events);
    const out = lastValueFrom(of(b).pipe(publishToJetStream(js, { subject: (c) => `${name}.${c.id}`, stats, backoff: { initialMs: 10, maxMs: 50 } }), toArray()));
    // The stream holds 3: the 4th message is refused until a consumer (here: a purge) makes room.
    await waitFor(() => stats.retries >= 3);
    expect(await readStream(name)).toHaveLength(3);
    await jsm.streams.purge(name);
    const emitted = await out;
    expect(emitted).toHaveLength(1);
    expect((await readStream(name)).map((m) => m.id)).toEqual(['d', 'e']);
    expect(events.some((e) => e.type === 'error' && e.kind === 'infrastructure' && (e.attempts ?? 0) >= 3)).toBe(true);
  });

  it('ends the stream with a RelayError when no stream captures the subject', async () => {
    const js = jetstream(nc);
    const error = await lastValueFrom(of(batch('0', ['a'])).pipe(publishToJetStream(js, { subject: () => `${uniqueName('nowhere')}.x` }))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RelayError);
  });

  it('waits out lost and slow acknowledgements and a connection dropped mid-batch (transient), via the fault wrapper', async () => {
    const name = await newStream();
    const stats = new RelayStats();
    // Rounds: [a@1 b@2] [a@3 c@4] [a@5]. b@2's acknowledgement is lost (it was stored), its resend's comes late;
    // the connection drops as c@4 is sent, losing a@3's acknowledgement in flight (stored) and c@4 (never sent).
    const plan = { publish: [{ kind: 'lostAck', key: '2::b', count: 1 }, { kind: 'slowAck', key: '2::b', count: 1, ms: 200 }, { kind: 'drop', key: '4::c', count: 1 }] } as const;
    const js = faultyJetStream(jetstream(nc), plan, new FaultEnv({ seed: 1, scheduler: asyncScheduler }));
    const emitted = await lastValueFrom(
      of(batch('0', ['a', 'b', 'a', 'c', 'a'])).pipe(publishToJetStream(js, { subject: (c) => `${name}.${c.id}`, stats, ackTimeoutMs: 300, backoff: { initialMs: 5, maxMs: 20 } }), toArray()),
    );
    expect(emitted).toHaveLength(1);
    const stored = await readStream(name);
    expect(orderAndDuplicates(stored)).toEqual({ disordered: [], duplicates: 0 });
    expect(stored.map((m) => `${m.id}@${m.lsn}`)).toEqual(['a@1', 'b@2', 'a@3', 'c@4', 'a@5']);
    expect(stats.retries).toBe(2);
    expect(stats.duplicates).toBe(2); // b@2 and a@3 were sent again: JetStream knew them
    expect(js.drops).toBe(1);
  });

  it('keeps trying to connect while the server refuses connections, then publishes ({ servers })', async () => {
    const name = await newStream();
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(NATS_SERVERS).port) });
    proxy.refuse();
    try {
      const stats = new RelayStats();
      const out = lastValueFrom(
        of(batch('0', ['x', 'y'])).pipe(publishToJetStream({ servers: `nats://127.0.0.1:${proxy.port}` }, { subject: (c) => `${name}.${c.id}`, stats, backoff: { initialMs: 10, maxMs: 40 } }), toArray()),
      );
      await waitFor(() => stats.retries >= 2);
      expect(await readStream(name)).toEqual([]);
      proxy.accept();
      expect(await out).toHaveLength(1);
      expect((await readStream(name)).map((m) => m.id)).toEqual(['x', 'y']);
    } finally {
      await proxy.close();
    }
  });

  it('connects by itself with { servers } and says what to fix for bad options', async () => {
    const name = await newStream();
    const emitted = await lastValueFrom(of(batch('0', ['x'])).pipe(publishToJetStream({ servers: NATS_SERVERS }, { subject: (c) => `${name}.${c.id}` }), toArray()));
    expect(emitted).toHaveLength(1);
    expect(await readStream(name)).toHaveLength(1);
    expect(() => publishToJetStream({} as JetStreamClientLike, { subject: () => 'x' })).toThrow(InvalidOptionsError);
    expect(() => publishToJetStream(jetstream(nc), {} as never)).toThrow(/subject/);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  expect(condition()).toBe(true);
}
