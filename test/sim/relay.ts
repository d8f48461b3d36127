import { type MonoTypeOperatorFunction, pipe, tap } from 'rxjs';
import { publishToAmqp } from '../../src/amqp/publishToAmqp.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { publishToJetStream } from '../../src/nats/publishToJetStream.js';
import { RelayStats } from '../../src/relay/relay.js';
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
 *   (also across splits); a late first arrival from a host that was ever paused (a zombie's publish, held
 *   while it was frozen: no broker fences publishers) is counted (`relay.zombieDisorder`), not a violation;
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
  #scanned = 0;
  #duplicates = 0;
  #duplicatesBeyondWindow = 0;
  #zombieDisorder = 0;
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
    const common = { stats: this.stats, scheduler: host, backoff: RELAY_TIMINGS.backoff };
    const relay =
      this.#broker instanceof MemoryJetStream
        ? publishToJetStream<ChangeBatch<Doc>>(gateJetStream(faultyJetStream(this.#broker.client(name), this.#plan, env), host), { ...common, subject: (c) => `docs.${c.id}`, ackTimeoutMs: RELAY_TIMINGS.ackTimeoutMs })
        : publishToAmqp<ChangeBatch<Doc>>(
            { connect: gateAmqp(faultyAmqp(() => (this.#broker as MemoryAmqp).connect(name), this.#plan, env).connect, host) },
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
        if (this.everPaused(message.from)) this.#zombieDisorder++;
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
      ['relay.rewindDisorder', this.#rewindDisorder],
      ['relay.resetDisorder', this.#resetDisorder],
    ];
    for (const [name, n] of counts) for (let i = 0; i < n; i++) this.sim.tally(name);
  }
}
