import { defer, identity, retry, Subscription, tap, timer } from 'rxjs';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
// Public API only (the package entry point), so the reader/coordinator rework can move internals freely.
import { checkpointEvery, createChangeFeed, filterChanges, mapChanges, materializeToView, type PartitionContext, processChanges } from '../../src/index.js';
import type { Change } from '../../src/core/Change.js';
import { LeaseLostError } from '../../src/errors/index.js';
import type { ViewCommit, ViewMode, ViewStore, ViewWrite } from '../../src/sinks/ViewStore.js';
import type { CoordinatorFactoryOptions } from '../../src/feed/options.js';
import { createLeaseCoordinator } from '../../src/leases/createLeaseCoordinator.js';
import type { ReadRequest, Source } from '../../src/sources/Source.js';
import { laggingListings, type FaultEnv, faultyDeadLetterSink, gateDeadLetterSink, faultyLeaseStore, faultySource, faultyStep, faultyViewStore, gateLeaseStore, gateSource, gateViewStore, type HostClock } from '../support/faults/index.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { leaseNaming, TIMINGS } from './config.js';
import type { Sim } from './context.js';
import type { FaultPlans } from './faultPlans.js';
import { HostClocks } from './hostClocks.js';
import type { DeadLetterEvents } from './deadLetterEvents.js';
import type { ObservedStores, Row } from './observedStores.js';
import type { SimRelay } from './relay.js';
import type { SimSse } from './sse.js';
import type { SimTelemetry } from './telemetry.js';
import { ViewSlots } from './viewSlots.js';
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

/**
 * Records when one host's view writes of each lease token last left or landed (for `owned-but-unread`): a host
 * whose sink is slow holds its read budget and reads nothing until the sink catches up, and still works the
 * lease all the while.
 */
function trackSink<R>(view: ViewStore<R>, written: Map<string, number>, now: () => number, pending: { count: number }, slots?: ViewSlots): ViewStore<R> {
  const mark = (w: ViewWrite<R>) => {
    for (const p of w.partitions) written.set(p.partition, now());
  };
  const landed = (w: ViewWrite<R>) => {
    pending.count--;
    mark(w);
  };
  return {
    ...view,
    description: view.description,
    // No await of its own: an extra turn on the way would move every later step of a seed's replay. The write's
    // signal is not passed on: a deposed write lands late (the `late` set) as in a store that cannot cancel it,
    // and the fence must refuse it (`deposed-view-write-accepted`).
    write: (w) => {
      mark(w);
      pending.count++;
      const settled = slots?.left(w as ViewWrite<unknown>);
      const written = view.write(w);
      written.then(
        () => {
          settled?.();
          landed(w);
        },
        () => {
          settled?.();
          landed(w);
        },
      );
      return written;
    },
  };
}

/** What the simulation needs of a running processor, in either form. */
export interface Processor {
  stop(): Promise<void>;
  readonly inFlightChanges: number;
}

/** `materializeToView`'s `concurrency` in the rx form (both views). */
const VIEW_CONCURRENCY = 2;

/** Retries of a failing change: 3 attempts, no jitter (a replay must draw nothing from `Math.random`). */
const RETRY = { attempts: 3, initialBackoffMs: 50, maxBackoffMs: 400, jitter: 0 } as const;

/** The view write a handler makes for its changes (one partition, in order). */
function handlerWrite(changes: readonly Change<Doc>[], commit: Omit<ViewCommit, 'position' | 'lsn'>, mode: ViewMode, key: (c: Change<Doc>) => string, positionOf: (lsn: number) => string): ViewWrite<Row> {
  const last = changes[changes.length - 1]!.lsn;
  return {
    mode,
    changes: changes.map((c) => ({ key: key(c), row: c.document ? { v: c.document.v } : undefined, lsn: c.lsn, timestampMs: c.timestampMs, partition: commit.partition })),
    partitions: [{ ...commit, position: positionOf(last), lsn: last }],
  };
}

/**
 * What a careful handler does with its own store: retries a failed write (5 attempts, 100 ms apart) unless
 * the store fenced it (`LeaseLostError` and subclasses: ownership ended, never an item failure), and writes
 * nothing once its ownership ended (`context.signal`, as the `processChanges` docs show): a call may outlast
 * the ownership (slow or late writes, retries), and the view can fence the old owner only after the new
 * one wrote.
 */
async function patiently<R>(write: () => Promise<R>, env: FaultEnv, context: PartitionContext): Promise<R> {
  for (let attempt = 1; ; attempt++) {
    if (context.signal.aborted) throw new LeaseLostError(context.leaseToken, context.owner, undefined);
    try {
      return await write();
    } catch (error) {
      if (error instanceof LeaseLostError || attempt >= 5 || context.signal.aborted) throw error;
      await env.delay(100);
    }
  }
}

/** One simulated process running a change feed. */
export interface SimHost {
  readonly name: string;
  readonly clock: HostClock;
  readonly processor: Processor;
  readonly subscription: Subscription;
  readonly reads: Map<string, ReadActivity>;
  /** When a view write of each lease token last left or landed (see {@link trackSink}), in virtual ms. */
  readonly sinkWrites: Map<string, number>;
  /**
   * View writes this host issued that have not landed (or failed) yet: a write of an ownership that ended returned
   * its batch's credit already, yet may hold a `materializeToView` slot that a later ownership's batches wait for.
   */
  readonly viewWritesInFlight: { count: number };
  /** Epoch at which this host last acquired each lease token (from its `leaseAcquired` events). */
  readonly acquired: Map<string, number>;
  /**
   * When this incarnation of the name started: a lease its name owns from an earlier incarnation (restarted
   * or crashed and rejoined) counts as unread only from then.
   */
  readonly joinedAt: number;
  /** When this host's current run started (its pipeline subscribed the change feed last), in virtual ms. */
  runStartedAt: number;
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
    ...(source.checkStart ? { checkStart: (from) => source.checkStart!(from) } : {}),
    ...(source.positionAt ? { positionAt: (p, at, signal) => source.positionAt!(p, at, signal) } : {}),
    ...(source.currentTime ? { currentTime: (signal) => source.currentTime!(signal) } : {}),
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
  /** The handlers' ownership signals already watched (`ownership-signal-reason`). */
  readonly #watchedSignals = new WeakSet<AbortSignal>();

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
    private readonly stores: ObservedStores,
    private readonly plans: FaultPlans,
    readonly settings: HostSettings,
    /** The `--relay` variant: the broker step of the Rx pipeline and its checkpoint watch. */
    private readonly relay?: SimRelay,
    /** The `--sse on` variant: each incarnation's hub step (after the views) and its clients. */
    private readonly sse?: SimSse,
    /** What the `deadLettered` events promise (see deadLetterEvents.ts). */
    private readonly deadLetterEvents?: DeadLetterEvents,
    /** On a slice of seeds, an OpenTelemetry meter for every host (see telemetry.ts). */
    private readonly telemetry?: SimTelemetry,
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
    const sinkWrites = new Map<string, number>();
    const viewWritesInFlight = { count: 0 };
    // Outermost first: the host's gate, then the seam's faults, then the shared stores. In the SDK mode, the
    // host's own CosmosSource and CosmosLeaseStore, faults striking at the emulator (see sdkWorld.ts).
    const sdk = world.sdk?.connect(hostClock, name);
    // Under `topology`, this process's listings lag splits and merges now and then (its routing map's cache).
    const listed =
      !sdk && sim.faults.has('topology')
        ? laggingListings(world.source, world.listings, {
            now: () => clock.now(),
            random: sim.randomFor(`topology:list:${name}:${clock.now()}`),
            lagMs: 200 + Math.floor(sim.randomFor(`topology:lag:${name}:${clock.now()}`)() * 800),
            staleChance: 0.3,
            missChance: 0.2,
            on: () => env.enabled,
            struck: (kind) => sim.tally(`source.listing.${kind}`),
          })
        : world.source;
    const source = gateSource(trackReads(sdk ? sdk.source : faultySource(listed, plans.source, env), reads, () => clock.now()), hostClock);
    const ref: { host?: SimHost } = {};
    const relayed = (store: LeaseStore): LeaseStore => (this.relay ? this.relay.watchCheckpoints(store, name) : store);
    const hostLeases = sdk ? stores.observeLeases(relayed(sdk.leases)) : faultyLeaseStore(relayed(stores.leasesFor(name)), plans.lease, env);
    const leases = gateLeaseStore(stores.tagWrites(hostLeases, () => ref.host!, sim), hostClock);
    const sink = <R>(v: ViewStore<R>, slots?: ViewSlots) => trackSink(v, sinkWrites, () => clock.now(), viewWritesInFlight, slots);
    // The write slots of the view's sink (the rx form's `materializeToView`, concurrency 2).
    const slots = new ViewSlots(sim, name, VIEW_CONCURRENCY, () => ref.host?.runStartedAt ?? 0);
    const view = gateViewStore(sink(stores.markDeposed(faultyViewStore(stores.view, plans.view, env), () => ref.host!, sim), config.form === 'handler' ? undefined : slots), hostClock);
    const groupView = gateViewStore(sink(stores.markDeposed(faultyViewStore(stores.groupView, plans.view, env), () => ref.host!, sim)), hostClock);
    const gated = gateDeadLetterSink(faultyDeadLetterSink(stores.deadLetters, plans.deadLetter, env), hostClock);
    const deadLetters = this.deadLetterEvents ? this.deadLetterEvents.watch(name, gated) : gated;
    const onFailure = config.policy === 'halt' ? { retry: RETRY, halt: true as const, scheduler: hostClock } : { retry: RETRY, deadLetter: deadLetters, scheduler: hostClock };
    // Without the `poison` fault set or the handler form, the pipeline is the one older seeds ran.
    const failure = sim.faults.has('poison') || config.form === 'handler' ? { onFailure } : {};
    const options = {
      source,
      leases,
      instanceName: name,
      leasePrefix: leaseNaming(config).prefix,
      ...(config.leaseScheme ? { leaseScheme: config.leaseScheme } : {}),
      ...(world.startFrom ? { startFrom: world.startFrom } : {}),
      maxItemCount: settings.maxItemCount,
      maxInFlightChanges: settings.budget,
      // `maxConcurrentReads`: in three runs of ten, hosts read at most 1–3 partitions at once (busy partitions first,
      // idle polls queued), from a PRNG of its own; the others keep the default, far above their partitions.
      ...readLimit(sim, name),
      scheduler: hostClock,
      // Two clocks, as a machine has them: lease time on the monotonic one (the scheduler), the timestamps
      // written into lease documents on the wall clock (skewed and stepped under the `clock` fault set).
      coordinator: (o: CoordinatorFactoryOptions) => createLeaseCoordinator({ ...o, now: () => hostClock.wallNow() }),
      stallTimeoutMs: 10_000,
      events: (event: FeedEvent) => {
        this.telemetry?.onEvent(event);
        this.#onEvent(ref.host!, event);
      },
      ...(this.telemetry ? { telemetry: { meterProvider: this.telemetry.meterProvider } } : {}),
      ...(config.balanceBy ? { balanceBy: config.balanceBy } : {}),
      ...TIMINGS,
    };
    let processor: Processor;
    let subscription: Subscription;
    if (config.form === 'handler') {
      const flaky = sim.faults.has('poison') ? sim.randomFor(`flaky:${name}:${clock.now()}`) : undefined;
      const failedOnce = new Set<string>();
      const handle = processChanges<Doc>(
        { ...options, checkpoint: { count: settings.checkpointCount, ms: settings.checkpointMs }, ...failure },
        {
          processChanges: async (changes, context) => {
            this.#checkOwner(ref.host!, context.leaseToken, context.epoch);
            this.#watchSignal(context);
            for (const c of changes) {
              if (c.document?.poison) throw new Error(`poison change ${c.id}@${c.lsn}`);
              const key = `${c.id}@${c.lsn}`;
              if (flaky && !failedOnce.has(key) && flaky() < 0.05) {
                // A transient failure strikes a change's LSN group once: the product runs, retries and gives up
                // on a group as one (failurePolicy `lsnGroups`), so a group whose members each failed once
                // in turn would spend its attempts on failures that a retry was meant to outlive.
                for (const other of changes) if (other.lsn === c.lsn) failedOnce.add(`${other.id}@${other.lsn}`);
                throw new Error(`handler failed once on ${key}`);
              }
            }
            const commit = { partition: context.leaseToken, epoch: context.epoch, range: context.partition.range };
            const positionOf = (lsn: number) => world.positionOf(lsn);
            await patiently(() => view.write(handlerWrite(changes, commit, config.view ?? 'guarded', (c) => c.id, positionOf)), hostEnv, context);
            if (config.groups) await patiently(() => groupView.write(handlerWrite(changes, commit, 'exactlyOnce', (c) => groupOf(c.id), positionOf)), hostEnv, context);
            for (const c of changes) world.deliver(c.id, c.lsn);
          },
        },
      );
      processor = { stop: () => handle.close(), get inFlightChanges() { return handle.inFlightChanges; } };
      subscription = new Subscription(() => void handle.close());
    } else {
      const feed = createChangeFeed<Doc>(options);
      processor = feed;
      const project = (c: Change<Doc>) => {
        if (c.document!.poison) throw new Error(`poison change ${c.id}@${c.lsn}`);
        return { v: c.document!.v };
      };
      // Each subscription is a run (`retry` subscribes again): "now" is the start of the run that pins a lease.
      const runs = defer(() => {
        if (ref.host) ref.host.runStartedAt = clock.now();
        return feed.changes$;
      });
      subscription = runs
        .pipe(
          tap((batch) => batch.epoch !== undefined && this.#checkOwner(ref.host!, batch.partition, batch.epoch)),
          faultyStep<ChangeBatch<Doc>>(plans.step, hostEnv),
          // The per-change operators' fast lane (new batches, in partition order, dropped when ownership ended)
          // under every fault: a copy of each change, and a filter that keeps them all.
          mapChanges((c: Change<Doc>) => ({ ...c }), failure),
          filterChanges(() => true, failure),
          tap((batch) => slots.arrived(batch)),
          materializeToView(view, { project, concurrency: VIEW_CONCURRENCY, mode: config.view ?? 'guarded', ...failure }),
          config.groups ? materializeToView(groupView, { key: (c) => groupOf(c.id), project, concurrency: VIEW_CONCURRENCY, mode: 'exactlyOnce', ...failure }) : identity,
          this.relay ? this.relay.operator(name, hostClock) : identity,
          this.sse ? this.sse.operator(name, hostClock, view, () => ref.host) : identity,
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
    }
    const host: SimHost = { name, clock: hostClock, processor, subscription, reads, sinkWrites, viewWritesInFlight, acquired: new Map(), joinedAt: clock.now(), runStartedAt: clock.now(), everPaused: false, stopCalledAt: undefined, stopped: false };
    ref.host = host;
    this.all.push(host);
    return host;
  }

  /**
   * `two-live-owners`: a host that was never paused emitted a batch of a lease after another host took the
   * lease at a higher epoch. A lease is taken only after it expired, and its owner stops emitting a margin
   * before its own deadline, so the two never overlap unless ownership depends on clocks that disagree.
   */
  #checkOwner(host: SimHost, partition: string, epoch: number): void {
    if (host.everPaused) return;
    const lease = this.stores.leaseOf(partition);
    if (lease && lease.epoch > epoch && lease.owner !== null && lease.owner !== host.name && !this.stores.fencedByAdmin(partition, epoch, this.sim.clock.now())) {
      this.sim.violations.report(
        'two-live-owners',
        `${host.name} (clock ${Math.round(host.clock.skewMs)} ms off) emitted a batch of ${partition} at epoch ${epoch} after ${lease.owner} took it at epoch ${lease.epoch}`,
        `two:${partition}:${epoch}:${lease.epoch}`,
      );
    }
  }

  /**
   * `ownership-signal-reason`: when a handler's `context.signal` aborts (its ownership ended), its `reason` is an
   * `AbortError` whose message names the lease and the close reason, as `PartitionContext.signal` promises
   * (code that rethrows it, `throwIfAborted`, `fetch`, throws an AbortError). One listener per ownership.
   */
  #watchSignal(context: PartitionContext): void {
    const { signal, leaseToken } = context;
    if (this.#watchedSignals.has(signal)) return;
    this.#watchedSignals.add(signal);
    const check = () => {
      const reason = signal.reason as { name?: unknown; message?: unknown } | undefined;
      const message = typeof reason?.message === 'string' ? reason.message : '';
      // `ownership of lease <token> ended: <CloseReason>`
      const named = message.includes(`lease ${leaseToken} `) && /: [A-Z][A-Za-z]+$/.test(message);
      if (reason?.name !== 'AbortError' || !named) {
        this.sim.violations.report('ownership-signal-reason', `the signal of ${leaseToken} (epoch ${context.epoch}) aborted with ${String(reason?.name)}: ${message || String(reason)}`, `signal:${leaseToken}:${context.epoch}`);
      }
      this.sim.tally('handler.signalAborted');
    };
    if (signal.aborted) check();
    else signal.addEventListener('abort', check, { once: true });
  }

  /**
   * `lease-dropped-while-owned`: a host reported a lease lost that the store still shows it owning at the
   * epoch it acquired, in a run where nothing can delay its renewals (no lease-store faults, no clock
   * faults, no pause, no twin): its own deadline ended an ownership nobody contested (e.g. a deadline that
   * started in the past).
   */
  #onEvent(host: SimHost | undefined, event: FeedEvent): void {
    if (!host) return;
    this.deadLetterEvents?.onEvent(host.name, event);
    if (event.type === 'leaseAcquired') host.acquired.set(event.lease, event.epoch);
    if (event.type === 'leaseReleased' && event.reason === 'Halted') {
      this.world.halted.add(event.lease);
      this.sim.tally('poison.halted');
    }
    // A key range found without a lease and given leases (Coverage): counted, to show a seed exercises it.
    if (event.type === 'error' && event.error.name === 'LeaseGapError') this.sim.tally('lease.gapRepaired');
    if (event.type !== 'leaseLost' || host.everPaused) return;
    const { faults } = this.sim;
    if (faults.has('lease') || faults.has('clock') || faults.has('twin')) return;
    const stored = this.stores.leaseOf(event.lease);
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
    void h.processor.stop().then(() => {
      h.stopped = true;
      h.subscription.unsubscribe();
    });
  }
}

/** `maxConcurrentReads` for host `name`: 1–3 in three draws of ten (tallied `reads.limited`), else none (the default). */
function readLimit(sim: Sim, name: string): { maxConcurrentReads?: number } {
  const random = sim.randomFor(`reads:${name}`);
  if (random() >= 0.3) return {};
  sim.tally('reads.limited');
  return { maxConcurrentReads: 1 + Math.floor(random() * 3) };
}
