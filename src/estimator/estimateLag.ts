import type { Lease } from '../leases/Lease.js';
import type { LeaseStore } from '../leases/LeaseStore.js';
import type { Partition, Position, StartFrom } from '../core/Partition.js';
import { InvalidOptionsError, PartitionGoneError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import { listProcessorLeases, type LeaseIds, type LeaseNamingOptions, resolveLeaseIds } from '../leases/protocol/index.js';
import type { Source } from '../sources/Source.js';

/**
 * The `estimatedLag` reported for a lease whose lag cannot be measured but may be non-zero: a lease that
 * never checkpointed, or the lease of a partition that was split and not yet replaced. `1`, like the .NET
 * estimator, so autoscalers (KEDA, the Functions scale controller) still wake a processor up, while the whole
 * history of the container is never reported as backlog. A measured backlog of one change is also 1, so
 * check `lastCheckpoint` (`null`: never checkpointed) or `timeLagMs` (`undefined`: not measured) before
 * reading an `estimatedLag` equal to it as a count.
 *
 * @example
 * ```ts
 * import { estimateLag, UNKNOWN_LAG } from 'rxfeed';
 *
 * for (const lag of await estimateLag({ source, leases, leasePrefix: 'orders.' })) {
 *   const unknown = lag.estimatedLag === UNKNOWN_LAG && (lag.lastCheckpoint === null || lag.timeLagMs === undefined);
 *   console.log(lag.leaseToken, unknown ? 'lag not known yet' : `${lag.estimatedLag} changes behind`);
 * }
 * ```
 */
export const UNKNOWN_LAG = 1;

/**
 * Options of {@link estimateLag}. Give `leasePrefix` and `leaseScheme` as the processor does
 * ({@link LeaseNamingOptions}); its `.info` / `.lock` markers are never counted as leases.
 */
export interface EstimateLagOptions extends LeaseNamingOptions {
  /** The monitored feed (e.g. a `CosmosSource`; use its own instance so the processor's iterators stay warm). */
  readonly source: Source<unknown>;
  /** The processor's lease store; read only, through `list`. */
  readonly leases: LeaseStore;
  /** Clock for the time lag, in ms since the epoch. Default `Date.now`. */
  readonly now?: () => number;
  /** Leases probed at once. Default `8` (reads). */
  readonly concurrency?: number;
  /** Aborts the estimate (in-flight reads included). */
  readonly signal?: AbortSignal;
  /**
   * Where the processor starts a lease that has no checkpoint (its `startFrom`). With `'beginning'` (the
   * feed's default) such a lease's backlog is the whole partition, counted from its first change; with
   * anything else it cannot be known and the sentinel {@link UNKNOWN_LAG} is reported. Default `'beginning'`.
   */
  readonly startFrom?: StartFrom;
}

/** The lag of one lease. */
export interface LeaseLag {
  /** The lease token (partition id). */
  readonly leaseToken: string;
  /** The host holding the lease, or `null` when free. */
  readonly owner: string | null;
  /**
   * Changes waiting after the lease's checkpoint, counted like the .NET estimator: the partition's latest
   * LSN (from the session token) minus the LSN before the first unprocessed change. LSNs number
   * *transactions*, so a multi-document transaction counts once, and in LatestVersion mode superseded
   * versions still count. `0` when caught up; {@link UNKNOWN_LAG} (1) when the lease never checkpointed or
   * its partition is gone (split, waiting for child leases).
   */
  readonly estimatedLag: number;
  /**
   * Age of the oldest unprocessed change in milliseconds (now minus its commit timestamp; timestamps have
   * one-second resolution in Cosmos DB). `0` when caught up; `undefined` when unknown (never checkpointed,
   * partition gone).
   */
  readonly timeLagMs: number | undefined;
  /** The stored checkpoint (`ContinuationToken`), or `null` before the first one. */
  readonly lastCheckpoint: Position | null;
}

/** Checks estimator options; throws an `InvalidOptionsError` naming what to fix. @internal */
export function checkEstimateOptions(options: EstimateLagOptions): LeaseIds {
  if (!options || typeof options.source?.read !== 'function') throw new InvalidOptionsError('source', 'expected a Source (e.g. new CosmosSource(container))');
  if (typeof options.leases?.list !== 'function') throw new InvalidOptionsError('leases', 'expected a LeaseStore');
  const ids = resolveLeaseIds(options);
  if (options.now !== undefined && typeof options.now !== 'function') throw new InvalidOptionsError('now', 'expected a function returning ms since the epoch');
  const c = options.concurrency;
  if (c !== undefined && (!Number.isInteger(c) || c < 1)) throw new InvalidOptionsError('concurrency', `expected a positive integer, got ${String(c)}`);
  return ids;
}

/**
 * Estimates, per lease, how far the processor is behind: changes waiting after the lease's checkpoint and
 * the age of the oldest of them. It reads the leases through the {@link LeaseStore} and one change per lease
 * from the source, like the .NET `ChangeFeedEstimator`; it never moves a checkpoint.
 *
 * @example
 * ```ts
 * import { estimateLag, CosmosSource, CosmosLeaseStore } from 'rxfeed';
 * const lags = await estimateLag({
 *   source: new CosmosSource(orders), // a source of its own keeps the processor's iterators warm
 *   leases: new CosmosLeaseStore({ container: leaseContainer }),
 *   leasePrefix: 'orders-view.',
 * });
 * for (const l of lags) console.log(l.leaseToken, l.owner, l.estimatedLag, l.timeLagMs);
 * ```
 * @returns one entry per lease, in lease token order.
 */
export async function estimateLag(options: EstimateLagOptions): Promise<LeaseLag[]> {
  const ids = checkEstimateOptions(options);
  const { source, leases, signal } = options;
  const startFrom = options.startFrom ?? 'beginning';
  const now = options.now ?? Date.now;
  const log = logger('estimator');
  const { leases: found } = await listProcessorLeases(leases, ids);
  let partitions: Promise<readonly Partition[]> | undefined;
  const partitionOf = async (lease: Lease): Promise<Partition | undefined> => {
    if (lease.feedRange) return { id: lease.leaseToken, range: lease.feedRange };
    partitions ??= source.listPartitions(signal);
    return (await partitions).find((p) => p.id === lease.leaseToken);
  };

  const one = async (lease: Lease): Promise<LeaseLag> => {
    const base = { leaseToken: lease.leaseToken, owner: lease.owner, lastCheckpoint: lease.continuation };
    // A lease never checkpointed starts at the configured start: its backlog counts from the partition's
    // first change when that start is the beginning; any other start cannot be dated here.
    if (lease.continuation === null && startFrom !== 'beginning') return { ...base, estimatedLag: UNKNOWN_LAG, timeLagMs: undefined };
    const partition = await partitionOf(lease);
    if (!partition) return { ...base, estimatedLag: UNKNOWN_LAG, timeLagMs: undefined };
    try {
      const from: StartFrom = lease.continuation === null ? 'beginning' : { position: lease.continuation };
      const page = await source.read({ partition, from, maxItemCount: 1, ...(signal ? { signal } : {}) });
      const first = page.changes[0];
      if (!first) return { ...base, estimatedLag: 0, timeLagMs: 0 };
      if (lease.continuation === null && page.latestLsn === undefined) {
        return { ...base, estimatedLag: UNKNOWN_LAG, timeLagMs: Math.max(0, now() - first.timestampMs) };
      }
      const waiting = page.latestLsn !== undefined ? page.latestLsn - (first.lsn - 1) : page.changes.length;
      return { ...base, estimatedLag: Math.max(1, waiting), timeLagMs: Math.max(0, now() - first.timestampMs) };
    } catch (err) {
      if (!(err instanceof PartitionGoneError)) throw err;
      log(`[lease=${lease.leaseToken}] partition gone; reporting the sentinel lag until child leases exist`);
      return { ...base, estimatedLag: UNKNOWN_LAG, timeLagMs: undefined };
    }
  };

  const sorted = [...found].sort((a, b) => a.leaseToken.localeCompare(b.leaseToken, 'en', { numeric: true }));
  const results: LeaseLag[] = new Array<LeaseLag>(sorted.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < sorted.length) {
      const i = next++;
      results[i] = await one(sorted[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 8, sorted.length) }, worker));
  return results;
}
