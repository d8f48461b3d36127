import { identity, retry, type Subscription, tap, timer } from 'rxjs';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
// Public API only (the package entry point), so the reader/coordinator rework can move internals freely.
import { type ChangeFeedProcessor, checkpointEvery, createChangeFeed, materializeToView } from '../../src/index.js';
import type { ReadRequest, Source } from '../../src/sources/Source.js';
import { faultyLeaseStore, faultySource, faultyStep, faultyViewStore, gateLeaseStore, gateSource, gateViewStore, type HostClock } from '../support/faults/index.js';
import { PREFIX, TIMINGS } from './config.js';
import type { Sim } from './context.js';
import type { FaultPlans } from './faultPlans.js';
import { HostClocks } from './hostClocks.js';
import type { ObservedStores } from './observedStores.js';
import type { Doc, World } from './world.js';

/** The group key of a document: ids `d0`, `d1`, ... fall in three groups, whatever partition holds them. */
export function groupOf(id: string): string {
  return `g${Number(id.slice(1)) % 3}`;
}

/** Reads of one partition by one host: when the last one started or ended, and those in flight. */
export interface ReadActivity {
  last: number;
  readonly inFlight: number[];
}

/** One simulated process running a change feed. */
export interface SimHost {
  readonly name: string;
  readonly clock: HostClock;
  readonly feed: ChangeFeedProcessor<Doc>;
  readonly subscription: Subscription;
  readonly reads: Map<string, ReadActivity>;
  /** Epoch at which this host last acquired each lease token (from its `leaseAcquired` events). */
  readonly acquired: Map<string, number>;
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

/** Settings every host of one run shares, drawn from the seed. */
export interface HostSettings {
  readonly maxItemCount: number;
  /** `maxInFlightChanges`. */
  readonly budget: number;
  readonly checkpointCount: number;
  readonly checkpointMs: number;
}

/** Draws the hosts' settings (after the world, before the fault plans). */
export function drawHostSettings({ int }: Sim): HostSettings {
  const maxItemCount = 5 + int(20);
  const budget = maxItemCount * (2 + int(8));
  const checkpointCount = 1 + int(50);
  const checkpointMs = 50 + int(500);
  return { maxItemCount, budget, checkpointCount, checkpointMs };
}

/** Records every read of the source by one host (for `owned-but-unread`). */
function trackReads(source: Source<Doc>, reads: Map<string, ReadActivity>, now: () => number): Source<Doc> {
  return {
    description: source.description,
    mode: source.mode,
    listPartitions: (signal) => source.listPartitions(signal),
    read: async (request: ReadRequest) => {
      const token = request.partition.id;
      let activity = reads.get(token);
      if (!activity) reads.set(token, (activity = { last: now(), inFlight: [] }));
      const start = now();
      activity.last = start;
      activity.inFlight.push(start);
      try {
        return await source.read(request);
      } finally {
        activity.inFlight.splice(activity.inFlight.indexOf(start), 1);
        activity.last = now();
      }
    },
  };
}

/**
 * The hosts of one run: each runs the real `createChangeFeed` → `materializeToView` → `checkpointEvery` over
 * the shared stores, each seam seen through its own gate (pause, crash) and the run's faults.
 */
export class Hosts {
  readonly all: SimHost[] = [];
  readonly clocks: HostClocks;
  #number = 0;

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
    private readonly stores: ObservedStores,
    private readonly plans: FaultPlans,
    readonly settings: HostSettings,
  ) {
    this.clocks = new HostClocks(sim);
  }

  /** Starts a host, under a new name unless `name` is given (a restart, or a twin). */
  join(name = `h${this.#number++}`): SimHost {
    const { sim, world, stores, plans, settings } = this;
    const { clock, env, config } = sim;
    const hostClock = this.clocks.create();
    const hostEnv = env.withScheduler(hostClock);
    const reads = new Map<string, ReadActivity>();
    // Outermost first: the host's gate, then the seam's faults, then the shared stores.
    const source = gateSource(trackReads(faultySource(world.memory, plans.source, env), reads, () => clock.now()), hostClock);
    const ref: { host?: SimHost } = {};
    const leases = gateLeaseStore(stores.tagWrites(faultyLeaseStore(stores.leases, plans.lease, env), () => ref.host!), hostClock);
    const view = gateViewStore(stores.markDeposed(faultyViewStore(stores.view, plans.view, env), () => ref.host!), hostClock);
    const groupView = gateViewStore(stores.markDeposed(faultyViewStore(stores.groupView, plans.view, env), () => ref.host!), hostClock);
    const feed = createChangeFeed<Doc>({
      source,
      leases,
      instanceName: name,
      leasePrefix: PREFIX,
      maxItemCount: settings.maxItemCount,
      maxInFlightChanges: settings.budget,
      scheduler: hostClock,
      stallTimeoutMs: 10_000,
      events: (event) => this.#onEvent(ref.host!, event),
      ...(config.balanceBy ? { balanceBy: config.balanceBy } : {}),
      ...TIMINGS,
    });
    const subscription = feed.changes$
      .pipe(
        tap((batch) => this.#checkOwner(ref.host!, batch)),
        faultyStep<ChangeBatch<Doc>>(plans.step, hostEnv),
        materializeToView(view, { project: (c) => ({ v: c.document!.v }), concurrency: 2, mode: config.view ?? 'guarded' }),
        config.groups ? materializeToView(groupView, { key: (c) => groupOf(c.id), project: (c) => ({ v: c.document!.v }), concurrency: 2, mode: 'exactlyOnce' }) : identity,
        tap((batch) => {
          for (const c of batch.changes) world.deliver(c.id, c.lsn);
        }),
        checkpointEvery({ count: settings.checkpointCount, ms: settings.checkpointMs, scheduler: hostClock }),
        // What the materializeToView docs advise for a failed write: restart the pipeline.
        config.onError === 'restart' ? identity : retry({ delay: () => timer(200, hostClock) }),
      )
      .subscribe({
        error: () => {
          // A supervisor restarts the process: the old one is gone for good, a new one takes its name.
          sim.tally('host.restart');
          hostClock.kill();
          const index = this.all.indexOf(ref.host!);
          if (index >= 0) this.all.splice(index, 1);
          this.join(name);
        },
      });
    const host: SimHost = { name, clock: hostClock, feed, subscription, reads, acquired: new Map(), joinedAt: clock.now(), everPaused: false, stopCalledAt: undefined, stopped: false };
    ref.host = host;
    this.all.push(host);
    return host;
  }

  /**
   * `two-live-owners`: a host that was never paused emitted a batch of a lease after another host took the
   * lease at a higher epoch. A lease is taken only after it expired, and its owner stops emitting a margin
   * before its own deadline, so the two never overlap unless ownership depends on clocks that disagree.
   */
  #checkOwner(host: SimHost, batch: ChangeBatch<Doc>): void {
    if (host.everPaused || batch.epoch === undefined) return;
    const lease = this.stores.lease(PREFIX + batch.partition);
    if (lease && lease.epoch > batch.epoch && lease.owner !== null && lease.owner !== host.name) {
      this.sim.violations.report(
        'two-live-owners',
        `${host.name} (clock ${Math.round(host.clock.skewMs)} ms off) emitted a batch of ${batch.partition} at epoch ${batch.epoch} after ${lease.owner} took it at epoch ${lease.epoch}`,
        `two:${batch.partition}:${batch.epoch}:${lease.epoch}`,
      );
    }
  }

  /**
   * `lease-dropped-while-owned`: a host reported a lease lost that the store still shows it owning at the
   * epoch it acquired, in a run where nothing can delay its renewals (no lease-store faults, no clock
   * faults, no pause, no twin): its own deadline ended an ownership nobody contested (e.g. a deadline that
   * started in the past).
   */
  #onEvent(host: SimHost | undefined, event: FeedEvent): void {
    if (!host) return;
    if (event.type === 'leaseAcquired') host.acquired.set(event.lease, event.epoch);
    if (event.type !== 'leaseLost' || host.everPaused) return;
    const { faults } = this.sim;
    if (faults.has('lease') || faults.has('clock') || faults.has('twin')) return;
    const stored = this.stores.lease(PREFIX + event.lease);
    if (stored && stored.owner === host.name && stored.epoch === host.acquired.get(event.lease)) {
      this.sim.violations.report('lease-dropped-while-owned', `${host.name} reported ${event.lease} lost while the store shows it owning it at epoch ${stored.epoch}`, `dropped:${host.name}:${event.lease}:${stored.epoch}`);
    }
  }

  /** Hosts that run and were not asked to stop. */
  running(): SimHost[] {
    return this.all.filter((h) => h.clock.state === 'running' && h.stopCalledAt === undefined);
  }

  /** Hosts that have not crashed or finished stopping. */
  alive(): SimHost[] {
    return this.all.filter((h) => h.clock.state !== 'dead' && !h.stopped);
  }

  /** Calls `stop()` (a graceful stop); the host counts as stopped once it resolved. */
  stop(h: SimHost): void {
    h.stopCalledAt = this.sim.clock.now();
    void h.feed.stop().then(() => {
      h.stopped = true;
      h.subscription.unsubscribe();
    });
  }
}
