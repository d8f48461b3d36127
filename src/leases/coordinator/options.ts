// Role: the coordinator's options — what `createLeaseCoordinator` takes, how they are checked, and which errors
// end a coordinator (no retry can fix them).
import type { SchedulerLike } from 'rxjs';
import type { CloseReason } from '../../core/events.js';
import type { FeedMode, Partition, Position } from '../../core/Partition.js';
import { CredentialsError, InvalidOptionsError, ResourceGoneError } from '../../errors/index.js';
import type { LeaseStore } from '../LeaseStore.js';
import type { LeaseScheme } from '../protocol/documents.js';
import { resolveTimings, type Timings } from '../protocol/timings.js';
import { checkBalanceBy, checkLeasePrefix, checkLeaseScheme } from '../protocol/validation.js';

/** Options of {@link createLeaseCoordinator}. */
export interface LeaseCoordinatorOptions {
  /** Where leases live (shared by every host of the processor). Required. */
  readonly store: LeaseStore;
  /** The feed whose partitions get one lease each; only `listPartitions` (and `mode`) are used. */
  readonly source?: {
    /** Lists the live partitions. */
    listPartitions(signal?: AbortSignal): Promise<readonly Partition[]>;
    readonly mode?: FeedMode;
  };
  /** Alternative to `source`: how to list the live partitions. */
  readonly listPartitions?: (signal?: AbortSignal) => Promise<readonly Partition[]>;
  /**
   * The position a lease created by the bootstrap starts at (its first `ContinuationToken`), asked once per
   * partition just before the lease is created; `null` leaves it to the reader's start. The change feed
   * pins `startFrom: 'now'` (or a time) here, so "now" is the moment the leases were made, not a later first
   * read. Default: every lease starts with `null`.
   */
  readonly startPosition?: (partition: Partition) => Promise<Position | null>;
  /** This host's unique name, written to the lease `Owner` field. Required, non-empty. */
  readonly owner: string;
  /**
   * Prefix of every lease id of this processor, so several processors can share one store. Non-empty; end
   * it with a separator (e.g. `'orders-view.'`) so that no other processor's prefix starts with it.
   * Required: it names the processor.
   */
  readonly prefix: string;
  /**
   * How lease documents are named. `'dotnet'` reads and writes the layout of the .NET v3 change feed
   * processor and the Azure Functions Cosmos DB trigger (leases `<prefix>..<token>`, markers
   * `<prefix>.info` / `<prefix>.lock`), so a lease container they wrote is continued where it stopped and
   * their estimator and KEDA's `azure-cosmosdb` scaler read ours; `prefix` is then required and must be
   * the one they compute: `await dotnetLeasePrefix({ container, endpoint, processorName })`.
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
  /** Feed mode written to new leases (`Mode`). Default: `source.mode`, else `'latestVersion'`. */
  readonly mode?: FeedMode;
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
   * may exceed `leaseExpirationMs`. Default 30 000.
   */
  readonly drainTimeoutMs?: number;
  /**
   * Timers, and the monotonic clock (ms) every duration of lease time is measured on: how long since this
   * host first saw a lease version or a handoff request (expiry), its own deadlines, renewals, cooldowns. Its
   * `now()` must not jump when the system time is stepped (NTP) or set; only its rate matters. Default:
   * `asyncScheduler`'s timers on `performance.now()`; `asyncScheduler` itself (whose `now()` is the wall
   * clock) is taken the same way. Tests pass a virtual clock.
   */
  readonly scheduler?: SchedulerLike;
  /**
   * The wall clock (ms since the epoch) of the `timestamp` written into lease documents, which other hosts,
   * the .NET processor and estimators read; never used to measure a duration. Default `Date.now`, or
   * `scheduler.now()` when a `scheduler` other than `asyncScheduler` is given (a virtual clock then stands
   * for both).
   */
  readonly now?: () => number;
}

/** @internal Checks the options; throws {@link InvalidOptionsError} naming the one to fix. */
export function validateOptions(options: LeaseCoordinatorOptions): Timings {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('options', 'pass an options object');
  if (!options.store) throw new InvalidOptionsError('store', 'pass a LeaseStore, e.g. new MemoryLeaseStore()');
  if (typeof options.owner !== 'string' || options.owner.length === 0) {
    throw new InvalidOptionsError('owner', 'pass a non-empty, unique host name (e.g. the pod name)');
  }
  if (!options.listPartitions && typeof options.source?.listPartitions !== 'function') {
    throw new InvalidOptionsError('source', 'pass a source (or a listPartitions function) so leases can be created');
  }
  checkLeasePrefix('prefix', options.prefix, true);
  checkLeaseScheme('leaseScheme', options.leaseScheme, options.prefix);
  checkBalanceBy('balanceBy', options.balanceBy);
  for (const name of ['minLeases', 'maxLeases'] as const) {
    const value = options[name];
    if (value !== undefined && (!Number.isInteger(value) || value < 0)) {
      throw new InvalidOptionsError(name, `must be a non-negative integer (0 = no limit), got ${String(value)}`);
    }
  }
  if (options.maxLeases && options.minLeases && options.minLeases > options.maxLeases) {
    throw new InvalidOptionsError('minLeases', `must not exceed maxLeases (${options.maxLeases})`);
  }
  return resolveTimings(options);
}

/** @internal Errors no retry can fix: they end the coordinator (`acquired$` errors) with a reason. */
export function fatalReason(error: unknown): CloseReason | undefined {
  if (error instanceof CredentialsError) return 'Unauthorized';
  if (error instanceof ResourceGoneError) return 'ResourceGone';
  if (error instanceof InvalidOptionsError) return 'Error';
  return undefined;
}
