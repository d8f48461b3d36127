import { identity, retry, type Subscription, tap, timer } from 'rxjs';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
// Public API only (the package entry point), so the reader/coordinator rework can move internals freely.
import {
  type ChangeFeedProcessor,
  checkpointEvery,
  createChangeFeed,
  materializeToView,
  MemoryLeaseStore,
  MemorySource,
  MemoryViewStore,
} from '../../src/index.js';
import { seededRandom } from '../../src/internal/random.js';
import type { Lease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { ViewStore, ViewWrite } from '../../src/sinks/ViewStore.js';
import type { FeedMode } from '../../src/core/Partition.js';
import type { ReadRequest, Source } from '../../src/sources/Source.js';
import {
  FaultEnv,
  faultyLeaseStore,
  faultySource,
  faultyStep,
  faultyViewStore,
  gateLeaseStore,
  gateSource,
  gateViewStore,
  HostClock,
  type LeaseFaultPlan,
  type SourceFaultPlan,
  type StepFaultPlan,
  type ViewFaultPlan,
  VirtualClock,
} from '../support/faults/index.js';

/**
 * Which faults a run injects: lease store, source (errors, throttling, slow reads, splits, storms), reads
 * that hang until aborted (`hang`), view store, hosts (crash, pause past expiry, graceful stop, join), sink
 * step, and a host started under the name of a live one (`twin`: a misconfigured `instanceName`).
 */
export const FAULT_SETS = ['lease', 'source', 'hang', 'view', 'host', 'sink', 'twin'] as const;
export type FaultSet = (typeof FAULT_SETS)[number];

/** One simulation run; everything else is derived from `seed`. */
export interface SimConfig {
  readonly seed: number;
  readonly faults: readonly FaultSet[];
  /** Fewest and most hosts at once (2 to 6). */
  readonly hosts: { readonly min: number; readonly max: number };
  /** Virtual time with faults and writes, in ms. Default 30 000. */
  readonly chaosMs?: number;
  /**
   * What a host does when its pipeline errors: `'retry'` (default) re-subscribes with RxJS `retry`, as the
   * `materializeToView` docs advise; `'restart'` stops the processor and starts a new one under the same name,
   * as a process supervisor would.
   */
  readonly onError?: 'retry' | 'restart';
  /** What the hosts balance: lease counts (default) or the partitions' change rates. */
  readonly balanceBy?: 'count' | 'load';
}

/** An invariant that did not hold. */
export interface Violation {
  readonly invariant: string;
  readonly atMs: number;
  readonly detail: string;
}

/** What a run did and found. */
export interface SimResult {
  readonly config: SimConfig;
  readonly violations: readonly Violation[];
  readonly stats: {
    readonly mode: FeedMode;
    readonly partitions: number;
    readonly writes: number;
    readonly deliveries: number;
    readonly virtualMs: number;
    readonly actions: number;
    readonly faults: Readonly<Record<string, number>>;
  };
}

/** Timings shared by every host (virtual ms). */
export const TIMINGS = {
  leaseExpirationMs: 1_000,
  leaseRenewIntervalMs: 300,
  leaseAcquireIntervalMs: 200,
  pollIntervalMs: 50,
  drainTimeoutMs: 500,
} as const;

/** An owned lease with no read of its partition for this long (virtual ms) is owned-but-unread. */
export const UNREAD_BOUND_MS = 20_000;
/** Most virtual time quiescence may take before what is missing counts as lost. */
export const QUIESCE_MS = 120_000;
/** Times a lease may be taken while everything settles after the faults stopped before that counts as churn. */
export const CHURN_MOVES = 4;
/** Most virtual time a graceful stop may take (drain + the coordinator's final-checkpoint margin + slack). */
export const STOP_BOUND_MS = 15_000;

const PREFIX = 'sim.';
const TICK_MS = 100;

interface Doc {
  readonly id: string;
  readonly v: number;
}

interface ReadActivity {
  last: number;
  readonly inFlight: number[];
}

interface SimHost {
  readonly name: string;
  readonly clock: HostClock;
  readonly feed: ChangeFeedProcessor<Doc>;
  readonly subscription: Subscription;
  readonly reads: Map<string, ReadActivity>;
  /**
   * When this incarnation of the name started: a lease its name owns from an earlier incarnation (restarted
   * or crashed and rejoined) counts as unread only from then.
   */
  readonly joinedAt: number;
  everPaused: boolean;
  /** Set once `stop()` was called; `stopped` once it resolved. */
  stopCalledAt: number | undefined;
  stopped: boolean;
}

function lsnOf(position: string | null | undefined): number {
  if (position === null || position === undefined) return -1;
  const n = Number(position.replace(/^mem:/, ''));
  return Number.isFinite(n) ? n : -1;
}

/** The one-line command that replays `config` exactly. */
export function replayLine(config: SimConfig): string {
  const chaos = config.chaosMs !== undefined ? ` --chaos-ms ${config.chaosMs}` : '';
  const onError = config.onError === 'restart' ? ' --on-error restart' : '';
  const balance = config.balanceBy === 'load' ? ' --balance load' : '';
  return `npm run sim -- --seed ${config.seed} --faults ${config.faults.join(',') || 'none'} --hosts ${config.hosts.min}-${config.hosts.max}${chaos}${onError}${balance}`;
}

/**
 * Runs one seeded simulation: 2–6 hosts in this process on virtual time, each running the real
 * `createChangeFeed` → `materializeToView` → `checkpointEvery` over shared `MemorySource`, `MemoryLeaseStore`
 * and `MemoryViewStore`, with faults at every seam; checks the invariants throughout and at quiescence.
 *
 * @example
 * ```ts
 * const { violations } = await runSimulation({ seed: 7, faults: ['lease', 'host'], hosts: { min: 2, max: 4 } });
 * ```
 */
export async function runSimulation(config: SimConfig): Promise<SimResult> {
  const faults = new Set(config.faults);
  const random = seededRandom(config.seed);
  const int = (n: number) => Math.floor(random() * n);
  const clock = new VirtualClock(1_700_000_000_000);
  const env = new FaultEnv({ seed: (config.seed ^ 0x5bd1e995) >>> 0, scheduler: clock });
  const violations: Violation[] = [];
  const reported = new Set<string>();
  const violate = (invariant: string, detail: string, once = `${invariant}:${detail}`) => {
    if (reported.has(once)) return;
    reported.add(once);
    violations.push({ invariant, atMs: clock.now() - 1_700_000_000_000, detail });
  };

  // ---- the world ---------------------------------------------------------------------------------------
  const mode: FeedMode = random() < 0.5 ? 'latestVersion' : 'allVersionsAndDeletes';
  const partitionCount = 1 + int(4);
  const memory = new MemorySource<Doc>({ partitions: partitionCount, mode, now: () => clock.now(), scheduler: clock });
  const leaseMemory = new MemoryLeaseStore();
  const viewMemory = new MemoryViewStore<{ v: number }>();
  const maxItemCount = 5 + int(20);
  const budget = maxItemCount * (2 + int(8));
  const checkpointCount = 1 + int(50);
  const checkpointMs = 50 + int(500);

  /** Latest document per id (undefined when deleted), and every write as `id@lsn`. */
  const latest = new Map<string, Doc | undefined>();
  const latestKey = new Map<string, string>();
  const written = new Set<string>();
  const delivered = new Set<string>();
  let deliveries = 0;
  let version = 0;
  const parentOf = new Map<string, string>();

  const write = () => {
    const ids = [...latest.keys()];
    const existing = ids.filter((id) => latest.get(id) !== undefined);
    const r = random();
    let result;
    let id: string;
    if (mode === 'allVersionsAndDeletes' && existing.length > 0 && r < 0.1) {
      id = existing[int(existing.length)]!;
      result = memory.delete(id);
      latest.set(id, undefined);
    } else {
      id = ids.length > 0 && r < 0.4 ? ids[int(ids.length)]! : `d${ids.length}`;
      const doc = { id, v: ++version };
      result = memory.upsert(doc);
      latest.set(id, doc);
    }
    const key = `${id}@${result.lsn}`;
    written.add(key);
    latestKey.set(id, key);
  };

  const split = () => {
    const live = memory.partitions();
    if (live.length >= 12) return;
    const parent = live[int(live.length)]!;
    for (const child of memory.split(parent.id)) parentOf.set(child.id, parent.id);
    count('source.split');
  };

  // ---- observers at the stores (innermost: they see what was accepted) ---------------------------------
  const leaseById = (id: string): Lease | undefined => leaseMemory.snapshot().find((l) => l.id === id);
  const lastContinuation = new Map<string, number>();
  const observedLeases: LeaseStore = {
    list: (prefix) => leaseMemory.list(prefix),
    read: (id) => leaseMemory.read(id),
    createIfAbsent: async (lease) => {
      const created = await leaseMemory.createIfAbsent(lease);
      if (created) {
        const parent = parentOf.get(created.leaseToken);
        const parentLsn = parent !== undefined ? lastContinuation.get(parent) : undefined;
        if (parentLsn !== undefined && lsnOf(created.continuation) < parentLsn) {
          violate('checkpoint-moved-backwards', `child lease ${created.leaseToken} created at ${created.continuation} below parent ${parent}'s checkpoint lsn ${parentLsn}`);
        }
        lastContinuation.set(created.leaseToken, lsnOf(created.continuation));
      }
      return created;
    },
    replace: async (lease) => {
      const before = leaseById(lease.id);
      const after = await leaseMemory.replace(lease);
      if (before && after.epoch < before.epoch) {
        violate('deposed-lease-write-accepted', `lease ${after.leaseToken}: epoch ${after.epoch} written over ${before.epoch} by ${after.owner}`);
      }
      if (before && lsnOf(after.continuation) < lsnOf(before.continuation)) {
        violate('checkpoint-moved-backwards', `lease ${after.leaseToken}: ${before.continuation} → ${after.continuation} (owner ${after.owner}, epoch ${after.epoch})`);
      }
      lastContinuation.set(after.leaseToken, Math.max(lastContinuation.get(after.leaseToken) ?? -1, lsnOf(after.continuation)));
      return after;
    },
    delete: (lease) => leaseMemory.delete(lease),
  };

  const viewEpochs = new Map<string, number>();
  const deposedWrites = new WeakMap<ViewWrite<unknown>, string>();
  const observedView: ViewStore<{ v: number }> = {
    description: viewMemory.description,
    write: async (w) => {
      const result = await viewMemory.write(w);
      for (const commit of w.partitions) {
        const highest = viewEpochs.get(commit.partition) ?? 0;
        if (commit.epoch < highest) {
          violate('deposed-view-write-accepted', `partition ${commit.partition}: write at epoch ${commit.epoch} accepted after epoch ${highest}`);
        }
        viewEpochs.set(commit.partition, Math.max(highest, commit.epoch));
      }
      const deposed = deposedWrites.get(w as ViewWrite<unknown>);
      if (deposed) violate('write-after-takeover-accepted', deposed);
      return result;
    },
    get: (key) => viewMemory.get(key),
    rows: () => viewMemory.rows(),
    positions: () => viewMemory.positions(),
    pruneTombstones: (before) => viewMemory.pruneTombstones(before),
    clearPositions: () => viewMemory.clearPositions(),
    close: () => viewMemory.close(),
  };

  // ---- fault plans -------------------------------------------------------------------------------------
  const sourcePlan: SourceFaultPlan = faults.has('source') || faults.has('hang')
    ? {
        read: [
          ...(faults.has('source')
            ? ([
                { kind: 'throttle', probability: 0.9, retryAfterMs: 200 + int(800), during: 'storm' },
                { kind: 'transient', probability: 0.02 },
                { kind: 'throttle', probability: 0.02, retryAfterMs: 100 + int(900) },
                { kind: 'slow', probability: 0.03, ms: 50 + int(1_500) },
              ] as const)
            : []),
          ...(faults.has('hang') ? [{ kind: 'hang' as const, probability: 0.001 }] : []),
        ],
        listPartitions: faults.has('source') ? [{ kind: 'transient', probability: 0.1 }] : [],
      }
    : {};
  const leasePlan: LeaseFaultPlan = faults.has('lease')
    ? {
        list: [{ kind: 'transient', probability: 0.03 }],
        read: [
          { kind: 'transient', probability: 0.03 },
          { kind: 'slow', probability: 0.03, ms: 50 + int(500) },
        ],
        createIfAbsent: [
          { kind: 'transient', probability: 0.03 },
          { kind: 'lostReply', probability: 0.03 },
        ],
        replace: [
          { kind: 'transient', probability: 0.02 },
          { kind: 'conflict', probability: 0.01 },
          { kind: 'timeout', probability: 0.005, ms: 500 + int(2_500) },
          { kind: 'slow', probability: 0.03, ms: 50 + int(800) },
          { kind: 'lostReply', probability: 0.02 },
        ],
        delete: [
          { kind: 'transient', probability: 0.05 },
          { kind: 'lostReply', probability: 0.03 },
        ],
      }
    : {};
  const viewPlan: ViewFaultPlan = faults.has('view')
    ? {
        write: [
          { kind: 'failure', probability: 0.01 },
          { kind: 'slow', probability: 0.05, ms: 20 + int(1_000) },
          { kind: 'lostReply', probability: 0.01 },
        ],
      }
    : {};
  const stepPlan: StepFaultPlan = faults.has('sink')
    ? {
        next: [
          { kind: 'failure', probability: 0.005 },
          { kind: 'slow', probability: 0.05, ms: 10 + int(400) },
        ],
      }
    : {};

  // ---- hosts -------------------------------------------------------------------------------------------
  const hosts: SimHost[] = [];
  const events = new Map<string, number>();
  const count = (name: string) => events.set(name, (events.get(name) ?? 0) + 1);
  let hostNumber = 0;

  const trackReads = (source: Source<Doc>, reads: Map<string, ReadActivity>): Source<Doc> => ({
    description: source.description,
    mode: source.mode,
    listPartitions: (signal) => source.listPartitions(signal),
    read: async (request: ReadRequest) => {
      const token = request.partition.id;
      let activity = reads.get(token);
      if (!activity) reads.set(token, (activity = { last: clock.now(), inFlight: [] }));
      const start = clock.now();
      activity.last = start;
      activity.inFlight.push(start);
      try {
        return await source.read(request);
      } finally {
        activity.inFlight.splice(activity.inFlight.indexOf(start), 1);
        activity.last = clock.now();
      }
    },
  });

  const markDeposed = (view: ViewStore<{ v: number }>, host: () => SimHost): ViewStore<{ v: number }> => ({
    ...view,
    description: view.description,
    write: (w) => {
      const h = host();
      if (!h.everPaused) {
        for (const commit of w.partitions) {
          const lease = leaseById(PREFIX + commit.partition);
          if (lease && lease.epoch > commit.epoch && lease.owner !== h.name) {
            deposedWrites.set(w as ViewWrite<unknown>, `${h.name} wrote partition ${commit.partition} at epoch ${commit.epoch} after ${lease.owner} took it at epoch ${lease.epoch}`);
          }
        }
      }
      return view.write(w);
    },
  });

  const join = (name = `h${hostNumber++}`) => {
    const hostClock = new HostClock(clock);
    const hostEnv = env.withScheduler(hostClock);
    const reads = new Map<string, ReadActivity>();
    // Outermost first: the host's gate, then the seam's faults, then the shared stores.
    const source = gateSource(trackReads(faultySource(memory, sourcePlan, env), reads), hostClock);
    const leases = gateLeaseStore(faultyLeaseStore(observedLeases, leasePlan, env), hostClock);
    const ref: { host?: SimHost } = {};
    const view = gateViewStore(markDeposed(faultyViewStore(observedView, viewPlan, env), () => ref.host!), hostClock);
    const feed = createChangeFeed<Doc>({
      source,
      leases,
      instanceName: name,
      leasePrefix: PREFIX,
      maxItemCount,
      maxInFlightChanges: budget,
      scheduler: hostClock,
      stallTimeoutMs: 10_000,
      ...(config.balanceBy ? { balanceBy: config.balanceBy } : {}),
      ...TIMINGS,
    });
    const subscription = feed.changes$
      .pipe(
        faultyStep<ChangeBatch<Doc>>(stepPlan, hostEnv),
        materializeToView(view, { project: (c) => ({ v: c.document!.v }), concurrency: 2 }),
        tap((batch) => {
          for (const c of batch.changes) {
            delivered.add(`${c.id}@${c.lsn}`);
            deliveries++;
          }
        }),
        checkpointEvery({ count: checkpointCount, ms: checkpointMs, scheduler: hostClock }),
        // What the materializeToView docs advise for a failed write: restart the pipeline.
        config.onError === 'restart' ? identity : retry({ delay: () => timer(200, hostClock) }),
      )
      .subscribe({
        error: () => {
          // A supervisor restarts the process: the old one is gone for good, a new one takes its name.
          count('host.restart');
          hostClock.kill();
          const index = hosts.indexOf(ref.host!);
          if (index >= 0) hosts.splice(index, 1);
          join(name);
        },
      });
    const host: SimHost = { name, clock: hostClock, feed, subscription, reads, joinedAt: clock.now(), everPaused: false, stopCalledAt: undefined, stopped: false };
    ref.host = host;
    hosts.push(host);
    return host;
  };

  const running = () => hosts.filter((h) => h.clock.state === 'running' && h.stopCalledAt === undefined);
  const alive = () => hosts.filter((h) => h.clock.state !== 'dead' && !h.stopped);

  const stopHost = (h: SimHost) => {
    h.stopCalledAt = clock.now();
    void h.feed.stop().then(() => {
      h.stopped = true;
      h.subscription.unsubscribe();
    });
  };

  // ---- invariants checked throughout -------------------------------------------------------------------
  const ownedSince = new Map<string, number>();
  const checkNow = () => {
    const now = clock.now();
    for (const h of hosts) {
      if (h.clock.state === 'dead') continue;
      if (h.feed.inFlightChanges > budget) {
        violate('credit-above-budget', `${h.name}: ${h.feed.inFlightChanges} changes in flight > maxInFlightChanges ${budget}`, `credit:${h.name}`);
      }
    }
    const seen = new Set<string>();
    for (const lease of leaseMemory.snapshot()) {
      // Twins (two live hosts under one name): the lease is read by one of them.
      const named = hosts.filter((x) => x.name === lease.owner && x.clock.state === 'running' && !x.stopped);
      if (named.length === 0 || now - lease.timestampMs >= TIMINGS.leaseExpirationMs) continue;
      const key = `${lease.id}|${lease.owner}|${lease.epoch}`;
      seen.add(key);
      const since = ownedSince.get(key) ?? now;
      ownedSince.set(key, since);
      const quiet = named.map((h) => {
        const activity = h.reads.get(lease.leaseToken);
        const lastRead = activity ? (activity.inFlight.length > 0 ? Math.min(...activity.inFlight) : activity.last) : -Infinity;
        return { h, activity, quietFor: now - Math.max(since, h.joinedAt, lastRead) };
      });
      const { h, activity, quietFor } = quiet.reduce((a, b) => (b.quietFor < a.quietFor ? b : a));
      if (quietFor > UNREAD_BOUND_MS) {
        const how = activity?.inFlight.length ? 'a read in flight that never returned' : 'no read';
        const gone = memory.partitions().some((p) => p.id === lease.leaseToken) ? '' : ' (its partition is gone: split)';
        violate('owned-but-unread', `${h.name} owns ${lease.leaseToken}${gone} (epoch ${lease.epoch}) with ${how} for ${Math.round(quietFor / 1000)} s`, key);
      }
    }
    for (const key of [...ownedSince.keys()]) if (!seen.has(key)) ownedSince.delete(key);
  };

  const advance = async (ms: number) => {
    for (let t = 0; t < ms; t += TICK_MS) {
      await clock.advance(TICK_MS);
      checkNow();
    }
  };

  // ---- chaos -------------------------------------------------------------------------------------------
  const chaosMs = config.chaosMs ?? 30_000;
  const initial = config.hosts.min + int(config.hosts.max - config.hosts.min + 1);
  for (let i = 0; i < initial; i++) join();
  for (let i = 0; i < 50 + int(150); i++) write();
  let storm = false;
  for (let t = 0; t < chaosMs; t += TICK_MS) {
    for (let n = int(4); n > 0; n--) write();
    if (faults.has('host') && random() < 0.03) {
      const r = random();
      const candidates = running();
      const victim = candidates.length > 0 ? candidates[int(candidates.length)] : undefined;
      if (r < 0.25 && victim) {
        victim.clock.kill();
        count('host.crash');
      } else if (r < 0.5 && victim) {
        count('host.pause');
        victim.clock.pause();
        victim.everPaused = true;
        const pauseMs = TIMINGS.leaseExpirationMs * (1.5 + random() * 3);
        clock.schedule(() => victim.clock.resume(), pauseMs);
      } else if (r < 0.7 && victim) {
        stopHost(victim);
        count('host.stop');
      } else if (alive().length < config.hosts.max) {
        count('host.join');
        // A restart under a dead host's name now and then: it finds leases it "owns" from before the crash.
        const dead = hosts.filter((h) => h.clock.state === 'dead' && !hosts.some((o) => o.name === h.name && o.clock.state !== 'dead'));
        join(dead.length > 0 && random() < 0.3 ? dead[int(dead.length)]!.name : undefined);
      }
    }
    if (faults.has('host') && alive().length < config.hosts.min && random() < 0.1) join();
    if (faults.has('twin') && random() < 0.003) {
      const live = running();
      if (live.length > 0 && alive().length < config.hosts.max) {
        count('host.twin');
        join(live[int(live.length)]!.name);
      }
    }
    if (faults.has('source')) {
      if (random() < 0.005) split();
      if (!storm && random() < 0.005) {
        storm = true;
        count('source.storm');
        env.turnOn('storm');
        clock.schedule(() => {
          storm = false;
          env.turnOff('storm');
        }, 1_000 + int(3_000));
      }
    }
    await advance(TICK_MS);
  }

  // ---- quiescence: faults stop, paused hosts resume, writes stop; then everything must converge ----------
  env.enabled = false;
  env.turnOff('storm');
  for (const h of hosts) if (h.clock.state === 'paused') h.clock.resume();
  if (running().length === 0) join();

  const viewMatches = async (): Promise<string | undefined> => {
    const rows = new Map((await viewMemory.rows()).map((r) => [r.key, r.row.v]));
    for (const [id, doc] of latest) {
      const row = rows.get(id);
      if (doc === undefined ? row !== undefined : row !== doc.v) return `${id}: view has ${String(row)}, source has ${doc === undefined ? 'deleted' : doc.v}`;
    }
    for (const key of rows.keys()) if (!latest.has(key)) return `${key}: in the view, never written`;
    return undefined;
  };
  const missing = (): string[] => {
    const must = mode === 'allVersionsAndDeletes' ? [...written] : [...latestKey.values()];
    return must.filter((k) => !delivered.has(k));
  };
  const quietFrom = clock.now();
  while (clock.now() - quietFrom < QUIESCE_MS) {
    await advance(500);
    if (missing().length === 0 && (await viewMatches()) === undefined) break;
  }
  // Let checkpoint timers and acknowledgements settle. Faults have stopped: a lease may still move once or
  // twice (balancing), but one taken again and again is churn (e.g. twins taking each other's leases).
  const epochsBefore = new Map(leaseMemory.snapshot().map((l) => [l.id, l.epoch]));
  const settleMs = Math.max(2_000, checkpointMs * 2);
  await advance(settleMs);
  for (const lease of leaseMemory.snapshot()) {
    const moves = lease.epoch - (epochsBefore.get(lease.id) ?? lease.epoch);
    if (moves >= CHURN_MOVES) violate('lease-churn', `${lease.id} was taken ${moves} times in ${settleMs / 1000} s without faults (now ${lease.owner ?? 'free'})`);
  }

  const lost = missing();
  if (lost.length > 0) {
    violate('change-never-delivered', `${lost.length} of ${written.size} changes never reached the sink, e.g. ${lost.slice(0, 3).join(', ')}`);
  }
  const mismatch = await viewMatches();
  if (mismatch) violate('view-differs-from-source', mismatch);
  for (const h of running()) {
    if (h.feed.inFlightChanges !== 0) {
      violate('credit-not-returned', `${h.name}: ${h.feed.inFlightChanges} changes still in flight when idle`);
    }
  }

  // ---- graceful stop of every live host must finish ------------------------------------------------------
  const stopping = running();
  for (const h of stopping) stopHost(h);
  const stopStart = clock.now();
  while (clock.now() - stopStart < STOP_BOUND_MS && stopping.some((h) => !h.stopped)) await advance(TICK_MS);
  for (const h of stopping) if (!h.stopped) violate('stop-never-finished', `${h.name}: stop() did not resolve within ${STOP_BOUND_MS / 1000} s`);
  for (const h of hosts) {
    h.subscription.unsubscribe();
    h.clock.kill();
  }

  return {
    config,
    violations,
    stats: {
      mode,
      partitions: partitionCount,
      writes: written.size,
      deliveries,
      virtualMs: clock.now() - 1_700_000_000_000,
      actions: clock.actions,
      faults: Object.fromEntries([...env.counts(), ...events]),
    },
  };
}
