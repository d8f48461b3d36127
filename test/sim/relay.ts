import { type MonoTypeOperatorFunction, pipe, tap } from 'rxjs';
import { publishToAmqp } from '../../src/amqp/publishToAmqp.js';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Lease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { AmqpConfirmChannelLike, AmqpConnectionLike } from '../../src/amqp/publishToAmqp.js';
import { type JetStreamClientLike, publishToJetStream } from '../../src/nats/publishToJetStream.js';
import { changeEnvelope, RelayStats } from '../../src/relay/relay.js';
import { type HeldMessage, MemoryAmqp, MemoryJetStream } from '../support/brokers/memoryBrokers.js';
import { type BrokerFaultPlan, type FaultEnv, faultyAmqp, faultyJetStream, gateAmqp, gateJetStream, type HostClock } from '../support/faults/index.js';
import type { Sim } from './context.js';
import { type Doc, lsnOf, type World } from './world.js';

/** Which broker the `--relay` variant relays to. */
export type RelayKind = 'jetstream' | 'amqp';

/** The relay options every host uses (virtual ms). */
const RELAY_TIMINGS = { ackTimeoutMs: 1_500, confirmTimeoutMs: 2_000, backoff: { initialMs: 50, maxMs: 1_000 } } as const;

/**
 * The broker faults of the `broker` fault set, drawn from the relay's own PRNG: connections that drop
 * mid-batch (and stay down a while), refusals for now (a full stream, a nack), refusals for good (rare: the
 * pipeline errors and restarts), slow and lost acknowledgements, flow control.
 */
function drawBrokerPlan(random: () => number): BrokerFaultPlan {
  const int = (n: number) => Math.floor(random() * n);
  return {
    publish: [
      { kind: 'drop', probability: 0.003, ms: int(500) },
      { kind: 'full', probability: 0.006 },
      { kind: 'slowAck', probability: 0.02, ms: 50 + int(1_500) },
      { kind: 'lostAck', probability: 0.003 },
      { kind: 'blocked', probability: 0.002, ms: 200 + int(1_800) },
      { kind: 'refuse', probability: 0.0003 },
    ],
  };
}

/** One publish of a message as the relay made it: when, and whether its batch's ownership was live then. */
interface Send {
  readonly atMs: number;
  readonly live: boolean;
}

/** A change as the relay's messages carry it (the default envelope). */
interface Arrival {
  readonly key: string;
  readonly id: string;
  readonly lsn: number;
  readonly message: HeldMessage;
}

/**
 * The `--relay jetstream|amqp` variant: each host's Rx pipeline relays its batches (after the views, before
 * `checkpointEvery`) through the real `publishToJetStream` or `publishToAmqp` to an in-memory broker model
 * (`test/support/brokers/memoryBrokers.ts`) with the `broker` fault set at its seam, each host behind its
 * gate. It draws only from PRNGs of its own (`relay`, `relay.faults`), so the rest of a seed stays as it was.
 *
 * Invariants:
 * - `checkpoint-before-broker-confirmed`: a checkpoint accepted at LSN L for a lease covers a change the
 *   writing host handed to the relay (same lease, same epoch, LSN <= L) that the broker does not hold;
 * - `broker-key-order`: a document's changes, taken at their first arrival at the broker, are not in LSN order
 *   (also across splits). Counted instead, when the late message was published while its batch's ownership was
 *   live (its tracker's signal not aborted: the relay must send nothing of an ended ownership): a message the
 *   broker held (flow control) from before the later change arrived until after it (`relay.heldDisorder`: a
 *   publisher cannot take back what it sent, and no broker fences publishers; a drain shorter than the hold
 *   ends the ownership meanwhile), and a late first arrival from a host that was ever paused (a zombie's
 *   publish, held while it was frozen: `relay.zombieDisorder`);
 *   so is the first arrival of a change written before the run's start once an operator rewound the leases
 *   (to the beginning or a time before the start: such changes were never published before, and arrive
 *   after their documents' later changes; `relay.rewindDisorder`), and, once an operator reset the leases, the
 *   first arrival of a change written before the start or not delivered when the reset ran (it starts over
 *   from `startFrom`, which can lie before such changes: a time read on a merged partition, a run's pinned
 *   "now"; `relay.resetDisorder`);
 * - `broker-duplicate`: JetStream stored one change twice within its duplicate window (the id must be the same
 *   whichever host or partition of the lineage publishes it); AMQP cannot de-duplicate: its duplicates are
 *   counted (`relay.amqp.duplicates`), and `message-id-unstable` holds that they carry the same `messageId`;
 * - at quiescence, `relay-change-missing`: a change that passed the relay (reached the checkpoint step) is not
 *   in the broker.
 */
export class SimRelay {
  readonly stats = new RelayStats();
  readonly #broker: MemoryJetStream | MemoryAmqp;
  readonly #env: FaultEnv;
  readonly #plan: BrokerFaultPlan;
  /** Changes each host handed to the relay, by `host|lease|epoch`, LSN-ascending as read. */
  readonly #handed = new Map<string, { readonly key: string; readonly lsn: number }[]>();
  /** First arrival of every change (`id@lsn`). */
  readonly #arrived = new Map<string, Arrival>();
  /** Highest LSN of each document among first arrivals. */
  readonly #newest = new Map<string, number>();
  /** The batch each message body was built from (the body object the relay hands to the client). */
  readonly #builtFrom = new WeakMap<object, AbortSignal | undefined>();
  /** Every publish the relay made, by `host|message id`, in order. */
  readonly #sends = new Map<string, Send[]>();
  #scanned = 0;
  #duplicates = 0;
  #duplicatesBeyondWindow = 0;
  #zombieDisorder = 0;
  #heldDisorder = 0;
  #rewindDisorder = 0;
  #resetDisorder = 0;

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
    readonly kind: RelayKind,
    /** Whether any incarnation of a host name was ever paused. */
    private readonly everPaused: (name: string) => boolean,
  ) {
    this.#broker = kind === 'jetstream' ? new MemoryJetStream({ scheduler: sim.clock }) : new MemoryAmqp({ scheduler: sim.clock });
    const random = sim.randomFor('relay.faults');
    this.#plan = sim.faults.has('broker') ? drawBrokerPlan(random) : {};
    this.#env = sim.env.withRandom(random);
  }

  /**
   * The relay step of one host: records what the host hands to the relay, then publishes through the real
   * operator to the model, behind the host's gate and the broker faults.
   */
  operator(name: string, host: HostClock): MonoTypeOperatorFunction<ChangeBatch<Doc>> {
    const env = this.#env.withScheduler(host);
    // The default envelope's bytes, as a body object of its own per message, so that a publish can be traced back
    // to its batch (and whether that batch's ownership was live when it was sent).
    const payload = (change: Change<Doc>, batch: ChangeBatch<Doc>): Buffer => {
      const body = Buffer.from(changeEnvelope(change, batch));
      this.#builtFrom.set(body, batch.origin?.tracker.signal);
      return body;
    };
    const common = { stats: this.stats, scheduler: host, backoff: RELAY_TIMINGS.backoff, payload };
    const relay =
      this.#broker instanceof MemoryJetStream
        ? publishToJetStream<ChangeBatch<Doc>>(this.#watchJetStream(name, gateJetStream(faultyJetStream(this.#broker.client(name), this.#plan, env), host)), { ...common, subject: (c) => `docs.${c.id}`, ackTimeoutMs: RELAY_TIMINGS.ackTimeoutMs })
        : publishToAmqp<ChangeBatch<Doc>>(
            { connect: this.#watchAmqp(name, gateAmqp(faultyAmqp(() => (this.#broker as MemoryAmqp).connect(name), this.#plan, env).connect, host)) },
            { ...common, exchange: 'docs', routingKey: (c) => `docs.${c.id}`, confirmTimeoutMs: RELAY_TIMINGS.confirmTimeoutMs },
          );
    return pipe(
      tap((batch: ChangeBatch<Doc>) => {
        if (batch.epoch === undefined) return;
        const at = `${name}|${batch.partition}|${batch.epoch}`;
        let handed = this.#handed.get(at);
        if (!handed) this.#handed.set(at, (handed = []));
        for (const c of batch.changes) handed.push({ key: `${c.id}@${c.lsn}`, lsn: c.lsn });
      }),
      relay,
    );
  }

  /** Records a publish the relay made (outside the faults and the host's gate: when the relay sent it). */
  #sent(name: string, msgId: string | undefined, body: unknown): void {
    if (msgId === undefined) return;
    const signal = typeof body === 'object' && body !== null ? this.#builtFrom.get(body) : undefined;
    const at = `${name}|${msgId}`;
    let sends = this.#sends.get(at);
    if (!sends) this.#sends.set(at, (sends = []));
    sends.push({ atMs: this.sim.clock.now(), live: signal?.aborted === false });
  }

  #watchJetStream(name: string, js: JetStreamClientLike): JetStreamClientLike {
    return {
      publish: (subject, payload, options) => {
        this.#sent(name, options?.msgID, payload);
        return js.publish(subject, payload, options);
      },
    };
  }

  #watchAmqp(name: string, open: () => Promise<AmqpConnectionLike>): () => Promise<AmqpConnectionLike> {
    return async () => {
      const connection = await open();
      return {
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one listener type for the overloads of `on`
        on: (event: 'error' | 'close', listener: (error: any) => void) => connection.on(event as 'error', listener),
        close: () => connection.close(),
        createConfirmChannel: async () => {
          const channel = await connection.createConfirmChannel();
          const watched: AmqpConfirmChannelLike = {
            once: (event, listener) => channel.once(event, listener),
            // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one listener type for the overloads of `on`
            on: (event: 'error' | 'close', listener: (error: any) => void) => channel.on(event as 'error', listener),
            close: () => channel.close(),
            publish: (exchange, routingKey, content, options, callback) => {
              this.#sent(name, options.messageId, content);
              return channel.publish(exchange, routingKey, content, options, callback);
            },
          };
          return watched;
        },
      } as AmqpConnectionLike;
    };
  }

  /**
   * The publish a message that arrived came from: the host's last publish of its id before it arrived (a
   * connection keeps order, so the one that landed was made then or before; ownership only ever ends, so if
   * that one was live, so was the one that landed).
   */
  #sendOf(message: HeldMessage): Send | undefined {
    const sends = this.#sends.get(`${message.from}|${message.msgId}`) ?? [];
    let last: Send | undefined;
    for (const send of sends) if (send.atMs <= message.atMs) last = send;
    return last;
  }

  /**
   * One host's lease store, watched: each checkpoint the store accepted is checked against the broker
   * (`checkpoint-before-broker-confirmed`).
   */
  watchCheckpoints(store: LeaseStore, name: string): LeaseStore {
    return {
      ...store,
      list: (prefix) => store.list(prefix),
      read: (id) => store.read(id),
      createIfAbsent: (lease) => store.createIfAbsent(lease),
      delete: (lease) => store.delete(lease),
      ...(store.tombstone ? { tombstone: (lease: Lease) => store.tombstone!(lease) } : {}),
      replace: async (lease) => {
        const stored = await store.replace(lease);
        if (stored.owner === name) this.#checkCheckpoint(name, stored.leaseToken, stored.epoch, lsnOf(stored.continuation));
        return stored;
      },
    };
  }

  #checkCheckpoint(name: string, lease: string, epoch: number, lsn: number): void {
    const handed = this.#handed.get(`${name}|${lease}|${epoch}`);
    if (!handed) return;
    this.check();
    const covered = handed.filter((h) => h.lsn <= lsn);
    const missing = covered.filter((h) => !this.#arrived.has(h.key));
    if (missing.length > 0) {
      this.sim.violations.report(
        'checkpoint-before-broker-confirmed',
        `${name} checkpointed ${lease} at lsn ${lsn} (epoch ${epoch}) with ${missing.length} changes it relayed not in ${this.kind}, e.g. ${missing.slice(0, 3).map((m) => m.key).join(', ')}`,
        `unconfirmed:${name}:${lease}:${epoch}`,
      );
    }
    this.#handed.set(`${name}|${lease}|${epoch}`, handed.filter((h) => h.lsn > lsn));
  }

  /** Looks at every message that arrived since the last call (`broker-key-order`, `broker-duplicate`). */
  check(): void {
    const messages = this.#broker.messages;
    for (; this.#scanned < messages.length; this.#scanned++) {
      const message = messages[this.#scanned]!;
      const { id, lsn } = JSON.parse(message.body) as { id: string; lsn: number };
      const key = `${id}@${lsn}`;
      const first = this.#arrived.get(key);
      if (first) {
        this.#duplicate(first, message);
        continue;
      }
      this.#arrived.set(key, { key, id, lsn, message });
      const newest = this.#newest.get(id) ?? -1;
      if (lsn < newest) {
        const send = this.#sendOf(message);
        const newer = this.#arrived.get(`${id}@${newest}`)!.message;
        // Sent while its ownership was live, before the later change reached the broker, and held by the broker
        // (flow control) until after: nothing the publisher can take back; the handover's drain was shorter.
        if (send?.live && send.atMs < newer.atMs) this.#heldDisorder++;
        else if (send?.live && this.everPaused(message.from)) this.#zombieDisorder++;
        // An operator's rewind to before the run's start (the beginning, or a time before it) delivers, for the
        // first time, changes written before the start: after every change of theirs published since.
        else if ((this.sim.events.get('admin.rewind') ?? 0) > 0 && this.world.isBeforeStart(key)) this.#rewindDisorder++;
        // An operator's reset starts over from `startFrom` (a time, or a run's pinned "now", that can lie before
        // changes it had not delivered; on a merged partition a time also reads older changes of the other
        // parent): it delivers, for the first time, changes written before the start or not delivered when it
        // ran (World.beforeStart), after their documents' later changes.
        else if ((this.sim.events.get('admin.reset') ?? 0) > 0 && this.world.isBeforeStart(key)) this.#resetDisorder++;
        else this.sim.violations.report('broker-key-order', `${id}@${lsn} (from ${message.from}) reached ${this.kind} first after ${id}@${newest}`, `order:${id}`);
      }
      this.#newest.set(id, Math.max(newest, lsn));
    }
  }

  #duplicate(first: Arrival, message: HeldMessage): void {
    if (first.message.msgId !== message.msgId) {
      this.sim.violations.report('message-id-unstable', `${first.key} published as ${first.message.msgId} by ${first.message.from}, then as ${message.msgId} by ${message.from}`, `msgid:${first.key}`);
    }
    if (this.#broker instanceof MemoryAmqp) {
      this.#duplicates++;
      return;
    }
    if (message.atMs - first.message.atMs < this.#broker.duplicateWindowMs) {
      this.sim.violations.report('broker-duplicate', `${first.key} stored twice by JetStream within its duplicate window (by ${first.message.from}, then ${message.from})`, `dup:${first.key}`);
    } else {
      this.#duplicatesBeyondWindow++;
    }
  }

  /** At quiescence: `relay-change-missing`; then the relay's counters into the run's stats. */
  finish(): void {
    this.check();
    const missing = [...this.world.delivered].filter((key) => !this.#arrived.has(key));
    if (missing.length > 0) {
      this.sim.violations.report('relay-change-missing', `${missing.length} changes passed the relay but are not in ${this.kind}, e.g. ${missing.slice(0, 3).join(', ')}`);
    }
    const counts: [string, number][] = [
      [`relay.${this.kind}.messages`, this.#broker.messages.length],
      [`relay.${this.kind}.duplicates`, this.#duplicates],
      [`relay.${this.kind}.duplicatesBeyondWindow`, this.#duplicatesBeyondWindow],
      [`relay.${this.kind}.dedupedByBroker`, this.#broker instanceof MemoryJetStream ? this.#broker.duplicatesDropped : 0],
      ['relay.resent', this.stats.resent],
      ['relay.retries', this.stats.retries],
      ['relay.zombieDisorder', this.#zombieDisorder],
      ['relay.heldDisorder', this.#heldDisorder],
      ['relay.rewindDisorder', this.#rewindDisorder],
      ['relay.resetDisorder', this.#resetDisorder],
    ];
    for (const [name, n] of counts) for (let i = 0; i < n; i++) this.sim.tally(name);
  }
}
