import type { FeedMode, FeedRange, Position } from '../core/Partition.js';
import type { CorruptLeaseError } from '../errors/index.js';
import { isOwnedAndLive, type LeaseAdminOptions, resolveAdminOptions, selectLeases } from './options.js';

/** One lease as an operator sees it. */
export interface LeaseStatus {
  /** The lease token (partition id). */
  readonly leaseToken: string;
  /** The lease document id: `<prefix><leaseToken>`, or `<prefix>..<leaseToken>` in the .NET lease scheme. */
  readonly id: string;
  /** The host that owns it, or `null` when free. */
  readonly owner: string | null;
  /** `'owned'` (by a live host), `'expired'` (its owner stopped renewing) or `'free'`. */
  readonly state: 'owned' | 'expired' | 'free';
  /** The stored checkpoint, or `null` before the first one. */
  readonly continuation: Position | null;
  /** The fencing epoch (raised on every change of owner). */
  readonly epoch: number;
  /** Time of the last acquisition, renewal or checkpoint, in ms since the epoch. */
  readonly timestampMs: number;
  /** Milliseconds since `timestampMs`. */
  readonly ageMs: number;
  /** The key range the lease covers, when stored. */
  readonly feedRange: FeedRange | undefined;
  /** The feed mode the lease was created for, when stored. */
  readonly mode: FeedMode | undefined;
}

/** What {@link listLeases} found. */
export interface LeaseListingReport {
  /** The leases under the prefix, in token order (bootstrap markers left out). */
  readonly leases: readonly LeaseStatus[];
  /** Documents under the prefix that are not readable leases. */
  readonly corrupt: readonly CorruptLeaseError[];
}

/**
 * Lists a processor's leases with their owner, state, checkpoint and age: the answer to "which host owns
 * which lease, and why is this one stuck". Reads only.
 *
 * @example
 * ```ts
 * import { listLeases } from 'rxfeed';
 * const { leases } = await listLeases({ leases: store, leasePrefix: 'orders-view.' });
 * for (const l of leases) console.log(l.leaseToken, l.owner ?? '-', l.state, l.continuation);
 * ```
 */
export async function listLeases(options: LeaseAdminOptions): Promise<LeaseListingReport> {
  const o = resolveAdminOptions(options);
  const { leases, corrupt } = await selectLeases(o);
  const now = o.now();
  return {
    leases: leases.map((l) => ({
      leaseToken: l.leaseToken,
      id: l.id,
      owner: l.owner,
      state: l.owner === null ? 'free' : isOwnedAndLive(l, o) ? 'owned' : 'expired',
      continuation: l.continuation,
      epoch: l.epoch,
      timestampMs: l.timestampMs,
      ageMs: Math.max(0, now - l.timestampMs),
      feedRange: l.feedRange,
      mode: l.mode,
    })),
    corrupt,
  };
}
