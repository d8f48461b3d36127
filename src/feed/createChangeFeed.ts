import { map, merge, mergeAll, Observable, share, Subject, takeUntil, type Subscriber, type Subscription } from 'rxjs';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { errorEvent } from '../errors/errorEvent.js';
import type { CloseReason, FeedEvent } from '../core/events.js';
import { ProcessWarnings } from './processWarnings.js';
import type { Partition, StartFrom } from '../core/Partition.js';
import type { NewLease } from '../leases/Lease.js';
import type { Source } from '../sources/Source.js';
import { logger, type Logger } from '../internal/log.js';
import { createLeaseCoordinator } from '../leases/createLeaseCoordinator.js';
import { CreditPool } from './CreditPool.js';
import { type ChangeFeedOptions, coordinatorOptionsOf, type ResolvedOptions, resolveOptions } from './options.js';
import { type PartitionFeed, type ReaderContext, readPartition } from './reader/readPartition.js';
import { FirstPages } from './reader/FirstPages.js';
import { ReadLimiter } from './reader/ReadLimiter.js';
import { mayStartNow, pinStart, RunStart, startOf, startsFromTimes } from './startPosition.js';
import { FeedTelemetry } from '../telemetry/FeedTelemetry.js';
import { FeedHealth, type ProcessorHealth } from '../health/FeedHealth.js';

/**
 * A running change feed processor: the batches of every partition this host owns, the per-partition
 * feeds, the events, and a graceful stop. Each subscription while none is active is a fresh run (leases
 * acquired, read from the checkpoints), so `retry` and `repeat` work; subscribers at the same time share the run.
 *
 * @example
 * ```ts
 * const feed = createChangeFeed<Order>({ source, leases, instanceName: 'host-1' });
 * feed.changes$.pipe(mapChanges(toRow), checkpointEvery({ count: 1000, ms: 5000 })).subscribe();
 * process.on('SIGINT', () => void feed.stop());
 * ```
 */
export interface ChangeFeedProcessor<T> {
  /** Every owned partition's batches, merged. Unsubscribing stops reading and releases the leases. */
  readonly changes$: Observable<ChangeBatch<T>>;
  /** One {@link PartitionFeed} per lease this host acquires. */
  readonly partitions$: Observable<PartitionFeed<T>>;
  /** Lease, checkpoint, error and stall events. */
  readonly events$: Observable<FeedEvent>;
  /** This host's name (the lease owner). */
  readonly owner: string;
  /** Changes read but not yet acknowledged by `checkpointEvery`, over all partitions (never above the budget). */
  readonly inFlightChanges: number;
  /** What the processor is doing now, for probes and dashboards (see {@link healthHandler}). */
  health(): ProcessorHealth;
  /**
   * Stops reading, lets batches in flight reach the checkpoint (bounded by `drainTimeoutMs`), writes the
   * final checkpoints, releases the leases and completes `changes$`. Resolves when all of that is done,
   * including checkpoint writes still in flight and a run an earlier re-subscription left draining. A
   * subscription while it runs (a pipeline's `retry`) completes at once and takes no lease; once it resolved,
   * subscribing again starts a fresh run from the checkpoints. Idempotent.
   */
  stop(): Promise<void>;
}

/**
 * Creates a change feed processor: leases over the source's partitions, one credit-controlled reader per
 * owned lease, and the streams to pipe them through.
 *
 * In short: `createChangeFeed(options).changes$` is every change this host owns, in per-partition order,
 * as batches; end the pipeline with `checkpointEvery` and call `stop()` to shut down cleanly.
 *
 * Options are validated here: an invalid one throws {@link InvalidOptionsError} naming it. Nothing is read
 * until `changes$` (or `partitions$`) is subscribed.
 *
 * @example
 * ```ts
 * import { createChangeFeed, checkpointEvery, MemoryLeaseStore, MemorySource } from 'rxfeed';
 * const feed = createChangeFeed({ source: new MemorySource({ partitions: 4 }), leases: new MemoryLeaseStore(), instanceName: 'a' });
 * feed.changes$.pipe(checkpointEvery(100)).subscribe((b) => console.log(b.partition, b.size));
 * ```
 * @see {@link changeFeed}
 * @see {@link partitionFeeds}
 */
export function createChangeFeed<T>(options: ChangeFeedOptions<T>): ChangeFeedProcessor<T> {
  const o = resolveOptions(options);
  const owner = o.instanceName;
  const log = logger('feed', { owner });
  const events = new Subject<FeedEvent>();
  if (o.events) events.subscribe(typeof o.events === 'function' ? { next: o.events } : o.events);
  // Nothing important is silent: with no one listening, important events become process warnings.
  const warnings = new ProcessWarnings(owner, () => o.scheduler.now());
  const now = () => o.scheduler.now();
  const telemetry = FeedTelemetry.create(o.telemetry, {
    system: o.source.destination?.system ?? 'rxfeed',
    destination: o.source.destination?.name ?? o.source.description,
    consumerGroup: o.leasePrefix,
    owner,
    now,
  });
  const health = new FeedHealth(owner, now, Math.max(60_000, 3 * o.idlePollIntervalMs));
  const emit = (event: FeedEvent) => {
    if (!events.observed) warnings.consider(event);
    health.event(event);
    telemetry?.event(event);
    events.next(event);
  };
  let current: Run<T> | undefined;
  /** Runs not stopped yet: the active one, and those a re-subscription left behind while they drain. */
  const runs = new Set<Run<T>>();
  /** While `stop()` runs: no run starts. Once it resolved, subscribing again starts a fresh run. */
  let stopping: Promise<void> | undefined;
  const stopRun = (run: Run<T>): Promise<void> => run.stop().finally(() => runs.delete(run));

  // Each subscription while no run is active starts a fresh run (so retry and repeat work); concurrent
  // subscribers share the active one, so no lease is ever read twice by this processor. None starts while
  // stop() runs: a pipeline's `retry` then would take leases behind a stop() about to resolve (sim seed 380,
  // write-after-stop); it completes at once instead.
  const partitions$ = new Observable<PartitionFeed<T>>((subscriber) => {
    if (stopping) {
      subscriber.complete();
      return;
    }
    const run = startRun(o, options.startFrom !== undefined, emit, log, { telemetry, health });
    current = run;
    runs.add(run);
    health.status = 'running';
    const subscription = run.partitions$.subscribe({
      next: (feed) => subscriber.next(feed),
      error: (error: unknown) => {
        health.status = 'failed';
        subscriber.error(error);
      },
      complete: () => subscriber.complete(),
    });
    return () => {
      subscription.unsubscribe();
      void stopRun(run);
    };
  }).pipe(share());
  const changes$ = partitions$.pipe(mergeAll(), share());

  return {
    changes$,
    partitions$,
    events$: events.asObservable(),
    owner,
    get inFlightChanges() {
      return current?.pool.inFlight ?? 0;
    },
    health: () => health.snapshot(),
    // Every run still going, the one a re-subscription left draining included: nothing of this host is owned after.
    stop: () =>
      (stopping ??= (async () => {
        try {
          while (runs.size > 0) await Promise.allSettled([...runs].map(stopRun));
        } finally {
          stopping = undefined;
        }
      })()),
  };
}

/** One run of a processor: from a subscription to the end of it (stop, unsubscribe, or a fatal error). */
interface Run<T> {
  readonly partitions$: Observable<PartitionFeed<T>>;
  readonly pool: CreditPool;
  stop(): Promise<void>;
}

/** What watches a processor across its runs. */
interface Watchers {
  readonly telemetry: FeedTelemetry | undefined;
  readonly health: FeedHealth;
}

function startRun<T>(o: ResolvedOptions<T>, startFromGiven: boolean, emit: (event: FeedEvent) => void, log: Logger, watchers: Watchers): Run<T> {
  const owner = o.instanceName;
  const source = o.source as Source<unknown>;
  // "now" is this moment by the source's clock (asked at once), never this host's: the leases the bootstrap
  // creates start at the source's positions of it.
  const runEnded = new AbortController();
  const unreadableTimeoutMs = o.leaseExpirationMs;
  const runStart =
    mayStartNow(o.startFrom) && source.currentTime && source.positionAt && startsFromTimes(source)
      ? new RunStart(source, o.scheduler, unreadableTimeoutMs, runEnded.signal)
      : undefined;
  // A startFrom function is asked once per partition and run: when its lease is created, or first read.
  const starts = new Map<string, StartFrom>();
  const startFor = (partition: Partition): StartFrom => {
    let start = starts.get(partition.id);
    if (start === undefined) starts.set(partition.id, (start = startOf(o.startFrom, source, partition)));
    return start;
  };
  // Every read of the source counts against `maxConcurrentReads`: the readers' and the bootstrap's pins of
  // new leases' starts (a read per partition, all at once on a fresh processor).
  const reads = new ReadLimiter(o.maxConcurrentReads);
  const startPosition = async (partition: Partition) => {
    const start = startFor(partition);
    const position = await reads.run(runEnded.signal, () => pinStart(source, start, partition, runStart));
    log('start of %s (%s) pinned at %s', partition.id, start instanceof Date ? start.toISOString() : String(start), position ?? 'its first read');
    return position;
  };
  // The first page of a lease this host is about to own is read beside the write that makes it its own.
  const firstPages = new FirstPages<T>(o.source, reads, o.scheduler, runEnded.signal, o.maxItemCount, o.leaseRenewIntervalMs);
  const claiming = (lease: NewLease, partition: Partition) => {
    let start: StartFrom;
    try {
      start = startFor(partition);
    } catch {
      return undefined; // the reader reports it
    }
    return firstPages.read(lease.id, lease.epoch, partition, lease.continuation, start);
  };
  const coordinator = (o.coordinator ?? createLeaseCoordinator)({ ...coordinatorOptionsOf(o, startPosition), claiming });
  const coordinatorEvents = coordinator.events$.subscribe({ next: emit });
  // What the lease requests cost, where the store says (Cosmos DB request units): into the telemetry.
  const telemetry = watchers.telemetry;
  const unwatchCharges = telemetry ? o.leases.watchRequestCharges?.((operation, ru) => telemetry.leaseRequest(operation, ru)) : undefined;
  // An account that cannot be reached at all is said at once: the SDK's own retries take minutes to give up.
  source.checkReachable?.().catch((error: unknown) => stopping === undefined && emit(errorEvent(owner, error, { attempts: 1 })));
  const pool = new CreditPool(o.maxInFlightChanges, o.maxItemCount);
  const writes = new Set<Promise<unknown>>();
  const stopRequested = new Subject<void>();
  /** Errors `partitions$` (and so `changes$`) with a failure no retry can fix. */
  const failed = new Subject<never>();
  let stopping: Promise<void> | undefined;

  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      log('stopping');
      watchers.health.status = 'stopping';
      stopRequested.next();
      failed.complete();
      runEnded.abort();
      await coordinator.stop();
      while (writes.size > 0) await Promise.allSettled([...writes]);
      coordinatorEvents.unsubscribe();
      unwatchCharges?.();
      watchers.health.status = 'stopped';
      log('stopped');
    })());

  const ctx: ReaderContext<T> = {
    source: o.source,
    owner,
    startFrom: o.startFrom,
    startFor,
    startFromGiven,
    startPosition,
    ...(o.maxWaitTimeMs !== undefined ? { maxWaitTimeMs: o.maxWaitTimeMs } : {}),
    maxItemCount: o.maxItemCount,
    pollIntervalMs: o.pollIntervalMs,
    idlePollIntervalMs: o.idlePollIntervalMs,
    stallTimeoutMs: o.stallTimeoutMs,
    drainTimeoutMs: o.drainTimeoutMs,
    unreadableTimeoutMs,
    // The load is published on renewal: measuring over one renew interval keeps it as fresh as it can be.
    loadWindowMs: o.leaseRenewIntervalMs,
    scheduler: o.scheduler,
    pool,
    emit,
    writes,
    telemetry: watchers.telemetry,
    health: watchers.health,
    reads,
    firstPages,
    fatal: (error) => {
      watchers.health.status = 'failed';
      failed.error(error);
      void stop();
    },
  };

  const partitions$ = merge(
    coordinator.acquired$.pipe(
      // No new partitions once stopping; the owned ones complete when their leases are released.
      takeUntil(stopRequested),
      map((owned) => shareFeed(readPartition(owned, ctx))),
    ),
    failed,
  );
  return { partitions$, pool, stop };
}

/** A partition feed whose subscribers share one reader (a second subscription never reads the lease again). */
function shareFeed<T>(feed: PartitionFeed<T>): PartitionFeed<T> {
  return new SharedFeed(feed);
}

/** Subscribes each subscriber to one shared subscription of `feed`. */
function sharing<T>(feed: PartitionFeed<T>): (subscriber: Subscriber<ChangeBatch<T>>) => Subscription {
  const shared = feed.pipe(share());
  return (subscriber) => shared.subscribe(subscriber);
}

/** {@link shareFeed}'s feed: one class, so every lease's feed has the same shape. */
class SharedFeed<T> extends Observable<ChangeBatch<T>> implements PartitionFeed<T> {
  readonly #feed: PartitionFeed<T>;

  constructor(feed: PartitionFeed<T>) {
    super(sharing(feed));
    this.#feed = feed;
  }

  get leaseToken(): string {
    return this.#feed.leaseToken;
  }

  get epoch(): number {
    return this.#feed.epoch;
  }

  get partition(): Partition {
    return this.#feed.partition;
  }

  get signal(): AbortSignal {
    return this.#feed.signal;
  }

  get closeReason(): CloseReason | undefined {
    return this.#feed.closeReason;
  }
}

/**
 * All partitions this host owns, merged into one Observable of batches (per-partition order kept).
 * Unsubscribing stops reading and releases the leases. Use {@link createChangeFeed} to also get events and
 * an awaitable `stop()`.
 *
 * In short: the change feed as one RxJS stream; end it with `checkpointEvery`.
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery, filterChanges } from 'rxfeed';
 * changeFeed<Order>(options).pipe(filterChanges((c) => c.document?.total > 100), checkpointEvery(500)).subscribe();
 * ```
 * @see {@link partitionFeeds}
 */
export function changeFeed<T>(options: ChangeFeedOptions<T>): Observable<ChangeBatch<T>> {
  return createChangeFeed(options).changes$;
}

/**
 * One Observable per lease this host acquires, each completing when the lease is released, lost or its
 * partition split. Use it to run a separate pipeline per partition.
 *
 * In short: the change feed as a stream of per-partition streams.
 *
 * @example
 * ```ts
 * import { partitionFeeds, checkpointEvery } from 'rxfeed';
 * partitionFeeds(options).pipe(mergeMap((feed) => feed.pipe(concatMap(save), checkpointEvery(100)))).subscribe();
 * ```
 * @see {@link changeFeed}
 */
export function partitionFeeds<T>(options: ChangeFeedOptions<T>): Observable<PartitionFeed<T>> {
  return createChangeFeed(options).partitions$;
}
