import { bufferTime, filter, type OperatorFunction, type Subscription, tap } from 'rxjs';
import { ChangeBatch } from '../../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../../src/core/events.js';
import { createChangeFeed } from '../../../src/feed/index.js';
import { MemoryLeaseStore } from '../../../src/leases/MemoryLeaseStore.js';
import type { LeaseStore } from '../../../src/leases/LeaseStore.js';
import type { JetStreamClientLike } from '../../../src/nats/publishToJetStream.js';
import { messageId, RelayStats } from '../../../src/relay/relay.js';
import { checkpointEvery } from '../../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../../src/sources/MemorySource.js';
import { CrashableLeaseStore, seededRandom } from '../memory.js';

/** The documents the relay scenarios write. */
export interface RelayDoc {
  readonly id: string;
  readonly n: number;
}

/** One message as read back from the broker: its de-duplication id, document id and LSN. */
export interface StoredMessage {
  readonly msgId: string;
  readonly id: string;
  readonly lsn: number;
}

/** What a relay scenario needs from the broker under test. */
export interface RelayUnderTest {
  /** The relay operator for one host, updating `stats`. */
  relay(stats: RelayStats, host: 'host-a' | 'host-b'): OperatorFunction<ChangeBatch<RelayDoc>[], ChangeBatch<RelayDoc>[]>;
  /** Ids the broker confirmed so far (filled by a wrapper around the client). */
  readonly confirmed: ReadonlySet<string>;
  /** Every message the broker holds for the scenario, in broker order. */
  readBack(): Promise<StoredMessage[]>;
  /** Called now and then while host A runs (e.g. to cut connections mid-batch). */
  disturb?(tick: number): void;
}

/** What happened: every change written, every message stored, the hosts' counters and events. */
export interface RelayOutcome {
  readonly written: readonly StoredMessage[];
  readonly stored: readonly StoredMessage[];
  readonly statsA: RelayStats;
  readonly statsB: RelayStats;
  readonly events: readonly FeedEvent[];
  /** Batches that reached the checkpoint with a change the broker had not confirmed (must stay empty). */
  readonly unconfirmedAtCheckpoint: readonly string[];
}

const timings = { pollIntervalMs: 20, maxItemCount: 10, leaseAcquireIntervalMs: 50, leaseRenewIntervalMs: 100, leaseExpirationMs: 600 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Host A relays a live workload over three partitions (one splits on the way) and crashes between publishing
 * and checkpointing (its lease store hangs, its subscription ends); host B takes the leases over from the
 * last checkpoints and replays. Real time, real broker. Resolves once every change written is stored.
 */
export async function relayCrashScenario(broker: RelayUnderTest, seed = 1): Promise<RelayOutcome> {
  const random = seededRandom(seed);
  const source = new MemorySource<RelayDoc>({ partitions: 3, mode: 'allVersionsAndDeletes' });
  const written: StoredMessage[] = [];
  let n = 0;
  const step = (count: number) => {
    for (let i = 0; i < count; i++) {
      const id = `d${Math.floor(random() * 40)}`;
      const { lsn } = source.upsert({ id, n: ++n });
      written.push({ msgId: `${id}@${lsn}`, id, lsn });
    }
  };
  const events: FeedEvent[] = [];
  const unconfirmedAtCheckpoint: string[] = [];
  const base = new MemoryLeaseStore();
  const run = (leases: LeaseStore, instanceName: 'host-a' | 'host-b', stats: RelayStats): Subscription =>
    createChangeFeed<RelayDoc>({ source, leases, instanceName, leasePrefix: 'relay.', events: (e) => events.push(e), ...timings })
      .changes$.pipe(
        bufferTime(15, null, 4),
        filter((batches) => batches.length > 0),
        broker.relay(stats, instanceName as 'host-a' | 'host-b'),
        tap((batches) => {
          for (const batch of batches) for (const c of batch.changes) if (!broker.confirmed.has(messageId(c))) unconfirmedAtCheckpoint.push(messageId(c));
        }),
        checkpointEvery({ count: 60, ms: 400 }),
      )
      .subscribe({ error: (error: unknown) => events.push({ type: 'error', owner: instanceName, error: error as Error, kind: 'infrastructure' }) });

  step(150);
  const crashable = new CrashableLeaseStore(base);
  const statsA = new RelayStats();
  const a = run(crashable, 'host-a', statsA);
  for (let tick = 0; tick < 30; tick++) {
    step(4);
    if (tick === 10) source.split(source.partitions()[0]!.id);
    broker.disturb?.(tick);
    await sleep(40);
  }
  // Crash between publish and checkpoint: what A published since its last checkpoint is replayed by B.
  crashable.crash();
  a.unsubscribe();
  step(40);
  const statsB = new RelayStats();
  const b = run(base, 'host-b', statsB);
  const want = new Set(written.map((w) => w.msgId));
  let stored: StoredMessage[] = [];
  for (let waited = 0; waited < 40_000; waited += 200) {
    await sleep(200);
    stored = await broker.readBack();
    const have = new Set(stored.map((s) => `${s.id}@${s.lsn}`));
    if ([...want].every((id) => have.has(id))) break;
  }
  b.unsubscribe();
  return { written, stored, statsA, statsB, events, unconfirmedAtCheckpoint };
}

/** Keys whose changes, taken at their first arrival, are not in LSN order; and how many arrivals were repeats. */
export function orderAndDuplicates(stored: readonly StoredMessage[]): { disordered: string[]; duplicates: number } {
  const seen = new Set<string>();
  const last = new Map<string, number>();
  const disordered: string[] = [];
  let duplicates = 0;
  for (const m of stored) {
    if (seen.has(m.msgId)) {
      duplicates++;
      continue;
    }
    seen.add(m.msgId);
    const previous = last.get(m.id);
    if (previous !== undefined && previous >= m.lsn) disordered.push(`${m.id}: ${m.lsn} after ${previous}`);
    last.set(m.id, m.lsn);
  }
  return { disordered, duplicates };
}

/** A batch of upserts of `ids` at LSN 1, 2, …; with `events`, a reader stand-in that collects reports. */
export function batch(partition: string, ids: readonly string[], events?: FeedEvent[]): ChangeBatch<RelayDoc> {
  return new ChangeBatch<RelayDoc>({
    partition,
    changes: ids.map((id, i) => ({ id, operation: 'upsert' as const, document: { id, n: i }, lsn: i + 1, timestampMs: 0 })),
    position: `pos:${ids.length}`,
    epoch: 1,
    ...(events ? { origin: { sequence: 1, readCount: ids.length, tracker: tracker(events) } } : {}),
  });
}

/**
 * `source` as a batch handed out by a reader stand-in whose ownership the test ends (`ownership.abort()`), at
 * sequence 7; `calls` records what the relay hands back (`drop 7`, `halt 7 HandlerError`; a halt ends the
 * ownership too, as a reader's does).
 */
export function ownedBatch(source: ChangeBatch<RelayDoc>): { batch: ChangeBatch<RelayDoc>; ownership: AbortController; calls: string[] } {
  const ownership = new AbortController();
  const calls: string[] = [];
  const tracker = {
    leaseToken: source.partition,
    signal: ownership.signal,
    acknowledge: () => undefined,
    checkpoint: async () => undefined,
    reportError: () => undefined,
    drop: (sequence: number, error?: Error) => void calls.push(`drop ${sequence}${error ? ` ${error.name}` : ''}`),
    halt: (sequence: number, error: Error) => {
      calls.push(`halt ${sequence} ${error.name}`);
      ownership.abort();
    },
  };
  return { batch: new ChangeBatch<RelayDoc>({ ...source, origin: { tracker, sequence: 7, readCount: source.size } }), ownership, calls };
}

function tracker(events: FeedEvent[]) {
  return {
    leaseToken: '0',
    signal: new AbortController().signal,
    acknowledge: () => undefined,
    checkpoint: async () => undefined,
    drop: () => undefined,
    reportError: (error: Error, attempts?: number) => events.push({ type: 'error', owner: 'test', lease: '0', error, kind: 'infrastructure', ...(attempts ? { attempts } : {}) }),
  };
}

/** A JetStream client that records the ids JetStream acknowledged, into `confirmed` (an observer, no faults). */
export function confirmingJetStream(js: JetStreamClientLike, confirmed = new Set<string>()): JetStreamClientLike & { confirmed: Set<string> } {
  return {
    confirmed,
    async publish(subject, payload, options) {
      const ack = await js.publish(subject, payload, options);
      if (options?.msgID) confirmed.add(options.msgID);
      return ack;
    },
  };
}
