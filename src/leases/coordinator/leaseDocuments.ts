import type { FeedMode, FeedRange, Position } from '../../core/Partition.js';
import type { NewLease } from '../Lease.js';

/** @internal How one processor names and shapes its documents in the lease store. */
export interface LeaseNaming {
  readonly prefix: string;
  readonly owner: string;
  readonly mode: FeedMode;
  readonly now: () => number;
}

/** @internal Id of the marker saying the leases were created (`<prefix>.info`, as .NET). */
export const infoId = (prefix: string): string => `${prefix}.info`;
/** @internal Id of the marker written while one host creates the leases (`<prefix>.lock`, as .NET). */
export const lockId = (prefix: string): string => `${prefix}.lock`;

/** @internal True for the processor's marker documents (never leases). */
export function isMarkerId(prefix: string, id: string): boolean {
  return id === infoId(prefix) || id === lockId(prefix);
}

/** @internal A marker document owned by this host. */
export function markerDocument(naming: LeaseNaming, id: string): NewLease {
  return {
    id,
    leaseToken: id.slice(naming.prefix.length),
    feedRange: undefined,
    owner: naming.owner,
    continuation: null,
    timestampMs: naming.now(),
    epoch: 0,
    mode: naming.mode,
    properties: {},
  };
}

/**
 * A new, free lease for one partition (or key range), starting at `continuation`. A split or merge child
 * starts at its parent's `epoch`, so epochs only rise along a lineage and stores fencing by key range
 * (views, dead letters) accept the child's writes and refuse the deposed parent's.
 *
 * @internal
 */
export function leaseDocument(
  naming: LeaseNaming,
  token: string,
  range: FeedRange,
  continuation: Position | null,
  properties: Readonly<Record<string, string>>,
  epoch = 0,
): NewLease {
  return {
    id: naming.prefix + token,
    leaseToken: token,
    feedRange: range,
    owner: null,
    continuation,
    timestampMs: naming.now(),
    epoch,
    mode: naming.mode,
    properties: { ...properties },
  };
}
