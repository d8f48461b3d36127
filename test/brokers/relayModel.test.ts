import { lastValueFrom, of, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { publishToAmqp } from '../../src/amqp/publishToAmqp.js';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { publishToJetStream } from '../../src/nats/publishToJetStream.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { RelayError, RelayStats } from '../../src/relay/relay.js';
import { batch, ownedBatch, type RelayDoc } from '../support/brokers/relayScenario.js';
import { type HeldMessage, MemoryAmqp, MemoryJetStream } from '../support/brokers/memoryBrokers.js';
import { type BrokerFaultPlan, FaultEnv, faultyAmqp, faultyJetStream, faultyLeaseStore, VirtualClock } from '../support/faults/index.js';

/** `id@lsn` of each message, in arrival order. */
const arrivals = (messages: readonly HeldMessage[]) => messages.map((m) => JSON.parse(m.body) as { id: string; lsn: number }).map((b) => `${b.id}@${b.lsn}`);

/** Runs `work` to its end on virtual time. */
async function run<T>(clock: VirtualClock, work: Promise<T>): Promise<T> {
  let done = false;
  const result = work.finally(() => (done = true));
  await clock.advanceUntil(() => done, 600_000, 10);
  return result;
}

/** The two relays over their broker models, on one virtual clock, with `plan` at the broker seam. */
function relays(plan: BrokerFaultPlan) {
  const clock = new VirtualClock(1_000_000);
  const env = new FaultEnv({ seed: 1, scheduler: clock });
  const stats = new RelayStats();
  const common = { stats, scheduler: clock, backoff: { initialMs: 10, maxMs: 100 } };
  const jetstream = new MemoryJetStream({ scheduler: clock });
  const amqp = new MemoryAmqp({ scheduler: clock });
  const faultyAmqpBroker = faultyAmqp(() => amqp.connect('a'), plan, env);
  return {
    clock,
    env,
    stats,
    jetstream: { broker: jetstream, operator: publishToJetStream(faultyJetStream(jetstream.client('a'), plan, env), { ...common, subject: (c) => `docs.${c.id}`, ackTimeoutMs: 500 }) },
    amqp: { broker: amqp, faulty: faultyAmqpBroker, operator: publishToAmqp(faultyAmqpBroker, { ...common, exchange: 'docs', routingKey: (c) => c.id, confirmTimeoutMs: 500 }) },
  };
}

describe('relays over the broker models (virtual time, fault wrappers)', () => {
  for (const kind of ['jetstream', 'amqp'] as const) {
    it(`${kind}: a refused message never lets its document's next change arrive first (the sim's broker-key-order)`, async () => {
      // The 1st publish is refused for now (a full stream, a nack); a@2 follows a@1 in the same batch.
      const r = relays({ publish: [{ kind: 'full', count: 1 }] });
      const { broker, operator } = r[kind];
      const emitted = await run(r.clock, lastValueFrom(of(batch('0', ['a', 'a', 'b'])).pipe(operator, toArray())));
      expect(emitted).toHaveLength(1);
      expect(arrivals(broker.messages)).toEqual(['a@1', 'a@2', 'b@3']);
      expect(r.stats.retries).toBe(1);
    });

    it(`${kind}: a connection dropped mid-batch loses the acknowledgements in flight; the retry stores nothing twice in JetStream, and order holds`, async () => {
      const r = relays({ publish: [{ kind: 'drop', after: 2, count: 1, ms: 50 }] });
      const { broker, operator } = r[kind];
      const emitted = await run(r.clock, lastValueFrom(of(batch('0', ['a', 'b', 'c', 'd'])).pipe(operator, toArray())));
      expect(emitted).toHaveLength(1);
      // a and b reached the broker before the drop (their acknowledgements were lost), c and d did not.
      expect(arrivals(broker.messages)).toEqual(kind === 'jetstream' ? ['a@1', 'b@2', 'c@3', 'd@4'] : ['a@1', 'b@2', 'a@1', 'b@2', 'c@3', 'd@4']);
      if (kind === 'jetstream') expect(r.jetstream.broker.duplicatesDropped).toBe(2);
      else expect(r.amqp.faulty.connections).toBe(2);
      expect(r.env.counts().get('broker.drop')).toBe(1);
    });

    it(`${kind}: a lost acknowledgement is waited out (timeout), then the message is sent again`, async () => {
      const r = relays({ publish: [{ kind: 'lostAck', after: 1, count: 1 }] });
      const { broker, operator } = r[kind];
      const started = r.clock.now();
      await run(r.clock, lastValueFrom(of(batch('0', ['a', 'b'])).pipe(operator, toArray())));
      expect(r.clock.now() - started).toBeGreaterThanOrEqual(500); // the ack timeout, on virtual time
      expect(arrivals(broker.messages)).toEqual(kind === 'jetstream' ? ['a@1', 'b@2'] : ['a@1', 'b@2', 'b@2']);
      expect(r.stats.confirmed).toBe(2);
    });

    it(`${kind}: a slow acknowledgement and flow control hold the value back without a retry`, async () => {
      const r = relays({ publish: [{ kind: 'slowAck', count: 1, ms: 300 }, { kind: 'blocked', after: 1, count: 1, ms: 400 }] });
      const { broker, operator } = r[kind];
      const started = r.clock.now();
      await run(r.clock, lastValueFrom(of(batch('0', ['a', 'b', 'c'])).pipe(operator, toArray())));
      expect(r.clock.now() - started).toBeGreaterThanOrEqual(400);
      expect(arrivals(broker.messages)).toEqual(['a@1', 'b@2', 'c@3']);
      expect(r.stats.retries).toBe(0);
    });

    it(`${kind}: a refusal for good ends the stream with a RelayError; what the broker holds stays in order`, async () => {
      const r = relays({ publish: [{ kind: 'refuse', after: 1, count: 1 }] });
      const { operator } = r[kind];
      const error = await run(r.clock, lastValueFrom(of(batch('0', ['a', 'b'])).pipe(operator)).catch((e: unknown) => e));
      expect(error).toBeInstanceOf(RelayError);
    });
  }

  it("amqp: a round held by flow control sends nothing more once its batch's ownership ended (the sim's broker-key-order, seed 53)", async () => {
    // b is held by flow control for 400 ms (the relay waits for 'drain' before sending c); the lease
    // is handed over meanwhile (a drain that timed out). a and b were sent and land; c, sent after the
    // handover, would land after the next owner published the document's later change.
    const r = relays({ publish: [{ kind: 'blocked', after: 1, count: 1, ms: 400 }] });
    const { broker, operator } = r.amqp;
    const { batch: b, ownership, calls } = ownedBatch(batch('0', ['a', 'b', 'c']));
    r.clock.schedule(() => ownership.abort(), 200);
    const emitted = await run(r.clock, lastValueFrom(of(b).pipe(operator, toArray())));
    expect(emitted).toEqual([]);
    expect(calls).toEqual(['drop 7']);
    expect(arrivals(broker.messages)).toEqual(['a@1', 'b@2']);
    expect(r.stats.retries).toBe(0);
  });

  it("jetstream: a split parent whose relay is behind publishes nothing more once its children may be read (the sim's broker-key-order, seed 1722)", async () => {
    // One change a batch; x@1's acknowledgement 1.2 s late: it holds the parent's relay, a@2 waits behind it.
    // The split parent is read to its end (drainGone), its drain gives up after 500 ms and the host replaces
    // its lease by the children from checkpoint 0, owning it until the parent's slow delete lands. A child
    // reads a@3 (a@2 superseded: latest-version) and publishes it at 1.1 s; without the hand-over, a@2, sent
    // once x@1 is acknowledged (1.2 s, the parent still owned), landed after it.
    const clock = new VirtualClock(1_000_000);
    const env = new FaultEnv({ seed: 1, scheduler: clock });
    const jetstream = new MemoryJetStream({ scheduler: clock });
    const source = new MemorySource<RelayDoc>({ partitions: 1, drainGone: true });
    source.write({ id: 'x', n: 1 });
    source.write({ id: 'a', n: 2 });
    const feed = createChangeFeed<RelayDoc>({
      source,
      leases: faultyLeaseStore(new MemoryLeaseStore(), { delete: [{ kind: 'slow', key: 'relay.0', count: 1, ms: 900 }] }, env),
      instanceName: 'host-a',
      leasePrefix: 'relay.',
      scheduler: clock,
      maxItemCount: 1,
      drainTimeoutMs: 500,
      pollIntervalMs: 50,
      leaseAcquireIntervalMs: 100,
      leaseRenewIntervalMs: 300,
      leaseExpirationMs: 1_000,
      telemetry: false,
    });
    const relay = publishToJetStream(faultyJetStream(jetstream.client('host-a'), { publish: [{ kind: 'slowAck', count: 1, ms: 1_200 }] }, env), {
      subject: (c) => `docs.${c.id}`,
      ackTimeoutMs: 10_000,
      scheduler: clock,
    });
    const subscription = feed.changes$.pipe(relay, checkpointEvery({ count: 1, scheduler: clock })).subscribe();
    await clock.advance(100);
    source.split('0');
    source.write({ id: 'a', n: 3 });
    await clock.advance(10_000);
    subscription.unsubscribe();
    const a = arrivals(jetstream.messages).filter((m) => m.startsWith('a@'));
    expect(a).toContain('a@3');
    expect(a).toEqual([...a].sort((x, y) => Number(x.slice(2)) - Number(y.slice(2))));
  });

  it('a change toMessage throws for takes its LSN group with it: dead-lettered together, never published in part', async () => {
    const clock = new VirtualClock(1_000_000);
    const jetstream = new MemoryJetStream({ scheduler: clock });
    const deadLetter = new MemoryDeadLetterStore<RelayDoc>();
    // b and c share LSN 2 (one transactional batch): [a@1, b@2, c@2, d@3].
    const changes = ([['a', 1], ['b', 2], ['c', 2], ['d', 3]] as const).map(([id, lsn], n) => ({ id, operation: 'upsert' as const, document: { id, n }, lsn, timestampMs: 0 }));
    const transactional = new ChangeBatch<RelayDoc>({ partition: '0', changes, position: 'pos:3', epoch: 1 });
    const subject = (c: { id: string }) => {
      if (c.id === 'c') throw new Error('no subject for c (injected)');
      return `docs.${c.id}`;
    };
    const operator = publishToJetStream<ChangeBatch<RelayDoc>>(jetstream.client('a'), { subject, scheduler: clock, onFailure: { retry: { attempts: 1 }, deadLetter, scheduler: clock } });
    await run(clock, lastValueFrom(of(transactional).pipe(operator)));
    expect(arrivals(jetstream.messages)).toEqual(['a@1', 'd@3']);
    expect((await deadLetter.list()).map((l) => `${l.documentId}@${l.lsn}`)).toEqual(['b@2', 'c@2']);
  });

  it('JetStream model: an id is de-duplicated within the window and stored again after it', async () => {
    const clock = new VirtualClock();
    const stream = new MemoryJetStream({ scheduler: clock, duplicateWindowMs: 1_000 });
    const js = stream.client('a');
    const first = await run(clock, js.publish('s', 'x', { msgID: 'm1' }));
    const again = await run(clock, js.publish('s', 'x', { msgID: 'm1' }));
    await clock.advance(1_000);
    const later = await run(clock, js.publish('s', 'x', { msgID: 'm1' }));
    expect([first.duplicate, again.duplicate, later.duplicate]).toEqual([false, true, false]);
    expect(again.seq).toBe(first.seq);
    expect(stream.messages).toHaveLength(2);
  });
});
