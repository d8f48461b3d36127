// Role: the coordinator's options — the lease options a change feed shares (LeaseOptions, one table of defaults
// and rules), what `createLeaseCoordinator` takes, and how they are checked.
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { FeedMode, Partition, Position } from '../../core/Partition.js';
import { InvalidOptionsError } from '../../errors/index.js';
import { durationMs, hasMethods, integerAtLeast, oneOf, positiveMs, schedulerLike } from '../../options/validate.js';
import type { NewLease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import { DEFAULT_LEASE_SCHEME, type LeaseScheme } from '../protocol/documents.js';
import { resolveTimings, type Timings } from '../protocol/timings.js';
import { checkLeasePrefix, checkLeaseScheme } from '../protocol/validation.js';

/**
 * The lease options a change feed and a lease coordinator share, under the same names: how leases are named,
 * balanced, timed and released. {@link ChangeFeedOptions} and {@link LeaseCoordinatorOptions} both extend it;
 * each option's default and validation rule are written once (a change feed only shortens `drainTimeoutMs`).
 *
 * @example
 * ```ts
 * const tuning: LeaseOptions = { leaseExpirationMs: 120_000, leaseRenewIntervalMs: 60_000, balanceBy: 'load' };
 * createChangeFeed({ source, leases, instanceName: 'host-1', leasePrefix: 'orders.', ...tuning });
 * ```
 */
export interface LeaseOptions {
  /**
   * How lease documents are named. `'dotnet'` reads and writes the layout of the .NET v3 change feed
   * processor and the Azure Functions Cosmos DB trigger (leases `<prefix>..<token>`, markers
   * `<prefix>.info` / `<prefix>.lock`), so a lease container they wrote is continued where it stopped and
   * their estimator and KEDA's `azure-cosmosdb` scaler read ours; the processor's prefix (a change feed's
   * `leasePrefix`, a coordinator's `prefix`) must then be the one they compute, without the `..` separator:
   * `await dotnetLeasePrefix({ container, endpoint, processorName })`.
   * Default `'rxfeed'` (leases `<prefix><token>`).
   */
  readonly leaseScheme?: LeaseScheme;
  /**
   * What balancing evens out between hosts: `'count'` (leases per host, as .NET) or `'load'` (each lease's
   * change rate, which owners publish in the lease property `rxfeed.load` on renewal and checkpoint, so one
   * host does not end up with all the hot partitions; see `planLoadBalance`). Free leases are always spread
   * by count first. Default `'count'`.
   */
  readonly balanceBy?: 'count' | 'load';
  /**
   * How often (ms) a host scans the leases while the share is still moving (free leases, imbalance, or it
   * just acquired something). Once settled it scans when the next lease owned by another host would
   * expire, and at least every `leaseExpirationMs / 2`. While leases it asked for are being handed over it
   * looks again after 1 s, 2 s, 4 s … up to this interval; a release notice (another host stopped) makes it
   * scan at once. Default 13 000 (as .NET).
   */
  readonly leaseAcquireIntervalMs?: number;
  /**
   * How long (ms) after its last write an owned lease is renewed. A checkpoint counts as a renewal, so busy
   * leases cost nothing extra. The first renewal after acquiring comes earlier, at a point spread over the
   * interval, so leases taken together do not renew together. Renewals due within the same second (a
   * twentieth of the interval, if less) are sent together, up to that much early, so a lease store that
   * groups writes (`CosmosLeaseStore`) renews many idle leases in one request. A failed renewal is retried up to five times
   * before the owner's local deadline (every `(expiration − margin − renew) / 5`, the margin a tenth of the
   * expiration at most). Default 40 000 (.NET: 17 000 with a read before each write; see
   * bench/leaseCost.ts).
   */
  readonly leaseRenewIntervalMs?: number;
  /**
   * A lease not renewed for this long (ms) is free for any host to take. The owner itself stops using a
   * lease whose renewal it could not confirm a margin (a tenth) before that. Default 60 000 (as .NET).
   */
  readonly leaseExpirationMs?: number;
  /** Hold at least this many leases when there are enough (0 = no minimum). Default 0. */
  readonly minLeases?: number;
  /** Never hold more than this many leases (0 = no limit). Default 0. */
  readonly maxLeases?: number;
  /**
   * How long (ms) a voluntary release waits for the partition's batches to be acknowledged before
   * releasing anyway (plus a few seconds for the final checkpoint write). Renewals go on meanwhile, so it
   * may exceed `leaseExpirationMs`. Default 30 000 for a coordinator; 10 000 for a change feed
   * (`createChangeFeed`, `processChanges`), so that with a Kubernetes grace period (30 s) there is room for the
   * final checkpoints and the lease releases after a drain that times out. A partition in a reported stall is
   * not waited for.
   */
  readonly drainTimeoutMs?: number;
  /**
   * Timers of every wait (scans, renewals, polls, backoff, stall checks), and the monotonic clock (ms) every
   * duration of lease time is measured on: how long since this host first saw a lease version or a handoff
   * request (expiry), its own deadlines, renewals, cooldowns. Its
   * `now()` must not jump when the system time is stepped (NTP) or set; only its rate matters. Default:
   * `asyncScheduler`'s timers on `performance.now()`; `asyncScheduler` itself (whose `now()` is the wall
   * clock) is taken the same way. Tests pass a virtual clock.
   */
  readonly scheduler?: SchedulerLike;
}

/** Options of {@link createLeaseCoordinator}: where leases live, whose host this is, and the shared {@link LeaseOptions}. */
export interface LeaseCoordinatorOptions extends LeaseOptions {
  /** Where leases live (shared by every host of the processor). Required. */
  readonly store: LeaseStore;
  /** The feed whose partitions get one lease each; only `listPartitions` (and `mode`) are used. */
  readonly source?: {
    /**
     * Lists the live partitions. Between them their ranges cover the whole key space (`''` to `'FF'`): the
     * bootstrap creates no lease from a listing that does not (one that lags a split and misses a child), and
     * lists again after `leaseAcquireIntervalMs`.
     */
    listPartitions(signal?: AbortSignal): Promise<readonly Partition[]>;
    readonly mode?: FeedMode;
  };
  /** Alternative to `source`: how to list the live partitions (covering the whole key space, as `source.listPartitions`). */
  readonly listPartitions?: (signal?: AbortSignal) => Promise<readonly Partition[]>;
  /**
   * The position a lease created by the bootstrap starts at (its first `ContinuationToken`), asked once per
   * partition just before the lease is created; `null` leaves it to the reader's start. The change feed
   * pins `startFrom: 'now'` (or a time) here, so "now" is the moment the leases were made, not a later first
   * read. Default: every lease starts with `null`.
   */
  readonly startPosition?: (partition: Partition) => Promise<Position | null>;
  /**
   * @internal Told as a write that would make a lease this host's is sent (a create the bootstrap claims, an
   * acquisition), with the lease as written: the feed reads the partition's first page meanwhile, instead of
   * after the write's round trip. A hint only: the write may fail, and nothing is read for the handler before
   * the lease is owned. Returns what to call when the write did not make the lease this host's.
   */
  readonly claiming?: (lease: NewLease, partition: Partition) => (() => void) | void;
  /** This host's unique name, written to the lease `Owner` field. Required, non-empty. */
  readonly owner: string;
  /**
   * Prefix of every lease id of this processor, so several processors can share one store. Non-empty; end
   * it with a separator (e.g. `'orders-view.'`) so that no other processor's prefix starts with it.
   * Required: it names the processor.
   */
  readonly prefix: string;
  /** Feed mode written to new leases (`Mode`). Default: `source.mode`, else `'latestVersion'`. */
  readonly mode?: FeedMode;
  /**
   * The wall clock (ms since the epoch) of the `timestamp` written into lease documents, which other hosts,
   * the .NET processor and estimators read; never used to measure a duration. Default `Date.now`, or
   * `scheduler.now()` when a `scheduler` other than `asyncScheduler` is given (a virtual clock then stands
   * for both).
   */
  readonly now?: () => number;
}

/** @internal A lease option's default and its validation rule (`check` passes `undefined`). */
interface LeaseOptionRule<V> {
  readonly default: V;
  check(name: string, value: unknown): void;
}

/**
 * @internal Every {@link LeaseOptions} option: its default and its rule, the one place of both. The feed and the
 * coordinator resolve their lease options through it ({@link resolveLeaseOptions}), and the feed hands the
 * coordinator exactly these keys: a new lease option is its field in `LeaseOptions` and its line here.
 */
export const LEASE_OPTIONS = {
  leaseScheme: { default: DEFAULT_LEASE_SCHEME, check: (name, value) => oneOf(name, value, ['rxfeed', 'dotnet']) },
  balanceBy: { default: 'count', check: (name, value) => oneOf(name, value, ['count', 'load']) },
  leaseAcquireIntervalMs: { default: 13_000, check: positiveMs },
  leaseRenewIntervalMs: { default: 40_000, check: positiveMs },
  leaseExpirationMs: { default: 60_000, check: positiveMs },
  minLeases: { default: 0, check: (name, value) => integerAtLeast(name, value, 0) },
  maxLeases: { default: 0, check: (name, value) => integerAtLeast(name, value, 0) },
  drainTimeoutMs: { default: 30_000, check: (name, value) => durationMs(name, value, 0) },
  scheduler: { default: asyncScheduler, check: schedulerLike },
} as const satisfies { readonly [K in keyof LeaseOptions]-?: LeaseOptionRule<NonNullable<LeaseOptions[K]>> };

/** {@link LeaseOptions} with every default applied (what the feed hands its coordinator; not exported from an entry point). */
export type ResolvedLeaseOptions = { readonly [K in keyof LeaseOptions]-?: NonNullable<LeaseOptions[K]> };

/**
 * Default lease timings, in ms: acquire 13 000 (as .NET), renew 40 000 (.NET 17 000), expiration 60 000 (as
 * .NET), drain timeout 30 000. Renewing every 40 s with retries leaves 20 s for 4 retries before expiry and
 * costs under half the .NET lease-store requests when idle (bench/leaseCost.ts).
 *
 * @example
 * ```ts
 * createLeaseCoordinator({ ...options, leaseExpirationMs: 2 * LEASE_DEFAULTS.leaseExpirationMs });
 * ```
 */
export const LEASE_DEFAULTS = Object.freeze({
  leaseAcquireIntervalMs: LEASE_OPTIONS.leaseAcquireIntervalMs.default,
  leaseRenewIntervalMs: LEASE_OPTIONS.leaseRenewIntervalMs.default,
  leaseExpirationMs: LEASE_OPTIONS.leaseExpirationMs.default,
  drainTimeoutMs: LEASE_OPTIONS.drainTimeoutMs.default,
});

/**
 * @internal Checks the shared lease options and applies their defaults (`defaults` first, for a caller whose
 * defaults differ: the feed's shorter drain). `prefix` is the processor's prefix as the caller names it (for
 * the rule that the .NET scheme needs the .NET prefix). Throws {@link InvalidOptionsError} naming the option.
 */
export function resolveLeaseOptions(
  options: LeaseOptions,
  prefix: { readonly name: string; readonly value: unknown },
  defaults: Partial<ResolvedLeaseOptions> = {},
): ResolvedLeaseOptions {
  const resolved: Record<string, unknown> = {};
  for (const [name, rule] of Object.entries(LEASE_OPTIONS) as [keyof LeaseOptions, LeaseOptionRule<unknown>][]) {
    rule.check(name, options[name]);
    resolved[name] = options[name] ?? defaults[name] ?? rule.default;
  }
  const o = resolved as ResolvedLeaseOptions;
  checkLeaseScheme('leaseScheme', o.leaseScheme, prefix.value, prefix.name);
  if (o.leaseRenewIntervalMs >= o.leaseExpirationMs) {
    throw new InvalidOptionsError(
      'leaseRenewIntervalMs',
      `must be less than leaseExpirationMs (${o.leaseExpirationMs}), or leases expire before they are renewed`,
    );
  }
  if (o.leaseAcquireIntervalMs > o.leaseExpirationMs) {
    throw new InvalidOptionsError('leaseAcquireIntervalMs', `must not exceed leaseExpirationMs (${o.leaseExpirationMs})`);
  }
  if (o.maxLeases && o.minLeases > o.maxLeases) {
    throw new InvalidOptionsError('minLeases', `must not exceed maxLeases (${o.maxLeases})`);
  }
  return o;
}

/** @internal The keys of {@link LeaseOptions} taken from `options` (what a feed hands its coordinator). */
export function leaseOptionsOf(options: ResolvedLeaseOptions): ResolvedLeaseOptions {
  return Object.fromEntries(Object.keys(LEASE_OPTIONS).map((name) => [name, options[name as keyof LeaseOptions]])) as ResolvedLeaseOptions;
}

/** @internal Checks a lease store: an object with the methods of a {@link LeaseStore}. */
export function checkLeaseStore(name: string, store: unknown): void {
  if (!hasMethods(store, ['list', 'read', 'createIfAbsent', 'replace', 'delete'])) {
    throw new InvalidOptionsError(name, 'pass a LeaseStore (e.g. new MemoryLeaseStore())');
  }
}

/** @internal Checks a host's name (the lease owner): a non-empty string. */
export function checkOwner(name: string, owner: unknown): void {
  if (typeof owner !== 'string' || owner.trim() === '') {
    throw new InvalidOptionsError(name, 'pass a non-empty name unique to this host, e.g. os.hostname() or the pod name');
  }
}

/** @internal A coordinator's options, checked, with defaults applied and its timings derived. */
export interface ResolvedCoordinatorOptions extends ResolvedLeaseOptions {
  readonly prefix: string;
  readonly timings: Timings;
}

/** @internal Checks the options; throws {@link InvalidOptionsError} naming the one to fix. */
export function validateOptions(options: LeaseCoordinatorOptions): ResolvedCoordinatorOptions {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('options', 'pass an options object');
  checkLeaseStore('store', options.store);
  checkOwner('owner', options.owner);
  if (!options.listPartitions && typeof options.source?.listPartitions !== 'function') {
    throw new InvalidOptionsError('source', 'pass a source (or a listPartitions function) so leases can be created');
  }
  const prefix = checkLeasePrefix('prefix', options.prefix, true);
  const resolved = resolveLeaseOptions(options, { name: 'prefix', value: options.prefix });
  return { ...resolved, prefix, timings: resolveTimings(resolved) };
}
