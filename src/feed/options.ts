import type { Observer } from 'rxjs';
import type { FeedEvent } from '../core/events.js';
import type { Partition, Position, StartFrom } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import { checkLeasePrefix } from '../leases/protocol/index.js';
import {
  checkLeaseStore,
  checkOwner,
  leaseOptionsOf,
  resolveLeaseOptions,
  type LeaseCoordinatorOptions,
  type LeaseOptions,
  type ResolvedLeaseOptions,
} from '../leases/coordinator/options.js';
import type { LeaseCoordinator } from '../leases/LeaseCoordinator.js';
import type { LeaseStore } from '../leases/LeaseStore.js';
import { durationMs, hasMethods, integerAtLeast } from '../options/validate.js';
import type { Source } from '../sources/Source.js';
import { resolveTelemetryOptions, type TelemetryOptions } from '../telemetry/options.js';

/** What a lease coordinator factory receives: the coordinator's own options, with the feed's source and prefix. */
export type CoordinatorFactoryOptions = Pick<LeaseCoordinatorOptions, 'store' | 'owner' | 'startPosition'> &
  ResolvedLeaseOptions & {
    readonly source: Source<unknown>;
    readonly prefix: string;
  };

/**
 * Options of {@link createChangeFeed}, {@link changeFeed} and {@link partitionFeeds}.
 *
 * @example
 * ```ts
 * import { changeFeed, MemoryLeaseStore, MemorySource } from 'rxfeed';
 * const feed$ = changeFeed({ source: new MemorySource({ partitions: 4 }), leases: new MemoryLeaseStore(), instanceName: 'host-1' });
 * ```
 */
export interface ChangeFeedOptions<T> extends LeaseOptions {
  /** The change feed to read. Required. */
  readonly source: Source<T>;
  /** Where leases (ownership and checkpoints) live. Required. */
  readonly leases: LeaseStore;
  /**
   * This host's name, unique among the hosts sharing the lease store (the lease `Owner`). Required. A host
   * restarted under its name takes back at once the leases its previous run left; two live hosts under one
   * name are reported (an `error` event with an `InvalidOptionsError` for `instanceName`) and the one that
   * lost the leases leaves them to the other.
   */
  readonly instanceName: string;
  /**
   * This processor's name: the prefix of its lease ids. Required (as the .NET processor's name is): processors
   * sharing a lease store need distinct prefixes (they may nest: `'orders.'` and `'orders.v2.'`), and two
   * apps that both left it out would silently split one set of leases. End it with a separator.
   */
  readonly leasePrefix: string;
  /**
   * Where a partition starts when its lease has no checkpoint yet. Default `'beginning'` (nothing already
   * in the feed is skipped; the .NET processor defaults to now). `'now'` is the moment the processor started
   * (the subscription that created the leases), not a partition's first read: each lease is created with its
   * start pinned (see {@link StartFrom}). A function of the partition gives each partition its own start
   * (called once per lease with no checkpoint, when it is created; never for one with a checkpoint),
   * e.g. `(p) => (p.id === '0' ? 'beginning' : 'now')`.
   */
  readonly startFrom?: StartFrom | ((partition: Partition) => StartFrom);
  /**
   * Idle batches: after this long (ms) with no batch emitted on a partition, an empty batch (position
   * unchanged, so checkpointing it moves nothing) reaches the pipeline, so time-driven work (flush a buffer,
   * emit a heartbeat, close a window) runs on quiet partitions. Never on a partition whose reads keep
   * finding changes. Default: off.
   */
  readonly maxWaitTimeMs?: number;
  /** Most changes read per page. Default 100. */
  readonly maxItemCount?: number;
  /** Wait after a read that found nothing new, in ms. Default 5000. */
  readonly pollIntervalMs?: number;
  /**
   * Polls a quiet partition less often: each read in a row that finds nothing doubles the wait after it,
   * from `pollIntervalMs` up to this (ms); a read that finds changes goes back to `pollIntervalMs`. A busy
   * partition is read as before (at once after a full page); only the first change after a quiet spell may
   * wait up to this long. Each partition's doubled waits are up to a quarter shorter (a share of its own), so
   * partitions that fell quiet together do not poll in one burst. Default: `pollIntervalMs` (no backoff).
   *
   * @example
   * ```ts
   * createChangeFeed({ source, leases, pollIntervalMs: 1_000, idlePollIntervalMs: 30_000 });
   * ```
   */
  readonly idlePollIntervalMs?: number;
  /**
   * Most changes read but not yet acknowledged by `checkpointEvery`, over all partitions of this host.
   * Partitions share it fairly: a busy partition may use what others leave free, but is held to its fair
   * share (budget / partitions) while another partition waits for credit. Default 10 000: a hundred default
   * pages, so several partitions keep reading while a sink works, yet bounded (10k documents of a few kB
   * is tens of MB). Make it comfortably larger than the largest buffer in the pipeline (`bufferCount(n)`,
   * `bufferTime(ms, null, n)`), which holds credit while it waits; a `stall` event says when it is not.
   */
  readonly maxInFlightChanges?: number;
  /**
   * Most change feed reads in flight at once, over all partitions of this host. A host owning many quiet
   * partitions polls them in bunches; bounded, a bunch reuses the connections the HTTP agent keeps alive
   * instead of opening (and then closing) one per poll. A read that continues a partition with changes left
   * goes before waiting polls, so busy partitions do not queue behind quiet ones. Default: what the source
   * advises ({@link Source.concurrentReads}; `CosmosSource`: half its client's kept-alive connections, 128
   * with the SDK's default agent), else 128.
   */
  readonly maxConcurrentReads?: number;
  /**
   * Report a `stall` event (naming the lease) when a partition has batches out and none of its batches
   * reached the checkpoint for this long, in ms, whatever other partitions do. Default 60 000.
   */
  readonly stallTimeoutMs?: number;
  /** Receives every {@link FeedEvent} (same as subscribing to `events$`). */
  readonly events?: Partial<Observer<FeedEvent>> | ((event: FeedEvent) => void);
  /**
   * OpenTelemetry traces and metrics (see {@link TelemetryOptions}): on whenever `@opentelemetry/api` is
   * installed, through the global providers unless given others; `false` turns them off. Default `{}`.
   */
  readonly telemetry?: TelemetryOptions | false;
  /**
   * @internal Builds the lease coordinator. Default `createLeaseCoordinator`. For tests of the feed engine.
   */
  readonly coordinator?: (options: CoordinatorFactoryOptions) => LeaseCoordinator;
}

/** @internal Options after validation, with defaults applied. */
export interface ResolvedOptions<T> extends Omit<ChangeFeedOptions<T>, keyof LeaseOptions>, ResolvedLeaseOptions {
  readonly leasePrefix: string;
  readonly startFrom: StartFrom | ((partition: Partition) => StartFrom);
  readonly maxItemCount: number;
  readonly pollIntervalMs: number;
  readonly idlePollIntervalMs: number;
  readonly maxInFlightChanges: number;
  readonly maxConcurrentReads: number;
  readonly stallTimeoutMs: number;
}

/** @internal Defaults of the feed's own options (the lease options' are in `LEASE_OPTIONS`). */
export const DEFAULTS = {
  startFrom: 'beginning',
  maxItemCount: 100,
  pollIntervalMs: 5_000,
  maxInFlightChanges: 10_000,
  /** When the source advises none (see {@link Source.concurrentReads}). */
  maxConcurrentReads: 128,
  stallTimeoutMs: 60_000,
  // Shorter than the coordinator's own default: stop() must fit a Kubernetes grace period (30 s) with the
  // final checkpoints and the lease releases after the drain.
  drainTimeoutMs: 10_000,
  /** The automatic checkpoints of `processChanges` and `changeFeedIterable`: 1 000 changes or 5 s. */
  checkpoint: { count: 1_000, ms: 5_000 },
} as const;

/** The source's advice for `maxConcurrentReads` when it gives a usable one, else the default. */
function advisedConcurrentReads(source: Source<unknown>): number {
  const advised = source.concurrentReads;
  return typeof advised === 'number' && Number.isInteger(advised) && advised >= 1 ? advised : DEFAULTS.maxConcurrentReads;
}

/** True for a valid {@link StartFrom} value. @internal */
export function isStartFrom(value: unknown): value is StartFrom {
  return (
    value === 'beginning' ||
    value === 'now' ||
    (value instanceof Date && !Number.isNaN(value.getTime())) ||
    (typeof value === 'object' && value !== null && !(value instanceof Date) && typeof (value as { position?: unknown }).position === 'string')
  );
}

/**
 * Checks every option and applies defaults. Throws {@link InvalidOptionsError} naming the option and the fix.
 *
 * @internal
 */
export function resolveOptions<T>(options: ChangeFeedOptions<T>): ResolvedOptions<T> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError('options', 'pass an options object with at least source, leases and instanceName');
  }
  if (!hasMethods(options.source, ['listPartitions', 'read'])) {
    throw new InvalidOptionsError('source', 'pass a Source (e.g. new MemorySource() or a Cosmos source)');
  }
  checkLeaseStore('leases', options.leases);
  checkOwner('instanceName', options.instanceName);
  const leasePrefix = checkLeasePrefix('leasePrefix', options.leasePrefix, true);
  // Every lease option (and the relations between them) is checked where it is defined, once for every caller.
  const lease = resolveLeaseOptions(options, { name: 'leasePrefix', value: options.leasePrefix }, { drainTimeoutMs: DEFAULTS.drainTimeoutMs });
  const startFrom = options.startFrom;
  if (startFrom !== undefined && typeof startFrom !== 'function' && !isStartFrom(startFrom)) {
    throw new InvalidOptionsError('startFrom', "expected 'beginning', 'now', a valid Date, { position } or a function of the partition returning one");
  }
  // A function's answers are checked per partition, when it is asked.
  if (typeof startFrom !== 'function') options.source.checkStart?.(startFrom ?? DEFAULTS.startFrom);
  durationMs('maxWaitTimeMs', options.maxWaitTimeMs, 1);
  integerAtLeast('maxItemCount', options.maxItemCount);
  durationMs('pollIntervalMs', options.pollIntervalMs);
  durationMs('idlePollIntervalMs', options.idlePollIntervalMs);
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULTS.pollIntervalMs;
  if (options.idlePollIntervalMs !== undefined && options.idlePollIntervalMs < pollIntervalMs) {
    throw new InvalidOptionsError('idlePollIntervalMs', `(${options.idlePollIntervalMs}) is smaller than pollIntervalMs (${pollIntervalMs}); make it at least as large`);
  }
  integerAtLeast('maxInFlightChanges', options.maxInFlightChanges);
  integerAtLeast('maxConcurrentReads', options.maxConcurrentReads);
  durationMs('stallTimeoutMs', options.stallTimeoutMs, 1);
  if (options.events !== undefined && typeof options.events !== 'function' && typeof options.events !== 'object') {
    throw new InvalidOptionsError('events', 'expected an observer object or a callback');
  }
  resolveTelemetryOptions(options.telemetry);
  const maxItemCount = options.maxItemCount ?? DEFAULTS.maxItemCount;
  const maxInFlightChanges = options.maxInFlightChanges ?? DEFAULTS.maxInFlightChanges;
  if (options.maxItemCount !== undefined && options.maxInFlightChanges !== undefined && maxInFlightChanges < maxItemCount) {
    throw new InvalidOptionsError(
      'maxInFlightChanges',
      `(${maxInFlightChanges}) is smaller than maxItemCount (${maxItemCount}); raise it to at least one page`,
    );
  }
  return {
    ...options,
    ...lease,
    leasePrefix,
    startFrom: startFrom ?? DEFAULTS.startFrom,
    maxItemCount,
    pollIntervalMs,
    idlePollIntervalMs: options.idlePollIntervalMs ?? pollIntervalMs,
    maxInFlightChanges,
    maxConcurrentReads: options.maxConcurrentReads ?? advisedConcurrentReads(options.source),
    stallTimeoutMs: options.stallTimeoutMs ?? DEFAULTS.stallTimeoutMs,
  };
}

/**
 * The coordinator's options for a feed: the one place where the feed's names (`leases`, `instanceName`,
 * `leasePrefix`) become the coordinator's (`store`, `owner`, `prefix`); every {@link LeaseOptions} option is
 * handed over under its own name.
 *
 * @internal
 */
export function coordinatorOptionsOf<T>(
  o: ResolvedOptions<T>,
  startPosition: (partition: Partition) => Promise<Position | null>,
): CoordinatorFactoryOptions {
  return {
    ...leaseOptionsOf(o),
    store: o.leases,
    owner: o.instanceName,
    prefix: o.leasePrefix,
    source: o.source as Source<unknown>,
    startPosition,
  };
}
