// Protocol: finding one processor's leases in a shared store — the naming options every tool takes, and a
// listing that leaves out markers and the leases of processors whose prefix begins with this one's.
import type { CorruptLeaseError } from '../../errors/index.js';
import { DEFAULT_LEASE_SCHEME, isLeaseOf, isMarkerId, leaseIdsOf, type LeaseIds, type LeaseScheme } from './documents.js';
import { checkLeasePrefix, checkLeaseScheme } from './validation.js';
import type { Lease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';

/**
 * How a processor names its lease documents. The tools that read or fix a processor's leases
 * ({@link estimateLag}, {@link listLeases}, {@link rewindLeases}, ...) take the processor's own values, so they
 * find exactly its leases and never mistake its `.info` / `.lock` markers for leases.
 *
 * @example
 * ```ts
 * import { dotnetLeasePrefix, listLeases } from 'rxfeed';
 * const leasePrefix = await dotnetLeasePrefix({ container: orders, endpoint, processorName: 'orders-view' });
 * const { leases } = await listLeases({ leases: store, leasePrefix, leaseScheme: 'dotnet' });
 * ```
 */
export interface LeaseNamingOptions {
  /**
   * The processor's lease prefix. Default `'rxfeed.'` (the feed's default). With `leaseScheme: 'dotnet'` it is
   * required: the prefix the .NET processor computes (see `dotnetLeasePrefix` in `rxfeed`), i.e. the part of its lease
   * ids before `..`.
   */
  readonly leasePrefix?: string;
  /**
   * The processor's lease scheme: `'rxfeed'` (leases `<prefix><token>`) or `'dotnet'` (the .NET v3 change feed
   * processor and Azure Functions layout, leases `<prefix>..<token>`). Markers are `<prefix>.info` /
   * `<prefix>.lock` in both. Default `'rxfeed'`.
   */
  readonly leaseScheme?: LeaseScheme;
}

/** @internal Validates the naming options as the feed does; throws an `InvalidOptionsError` naming what to fix. */
export function resolveLeaseIds(options: LeaseNamingOptions): LeaseIds {
  const prefix = checkLeasePrefix('leasePrefix', options.leasePrefix);
  checkLeaseScheme('leaseScheme', options.leaseScheme, options.leasePrefix, 'leasePrefix');
  return leaseIdsOf(prefix, options.leaseScheme ?? DEFAULT_LEASE_SCHEME);
}

/**
 * @internal A processor's leases and unreadable lease documents, its markers left out of both, and so are
 * the leases of processors whose prefix begins with this one's.
 */
export async function listProcessorLeases(store: LeaseStore, ids: LeaseIds): Promise<{ leases: Lease[]; corrupt: CorruptLeaseError[] }> {
  const listing = await store.list(ids.prefix);
  return {
    leases: listing.leases.filter((l) => isLeaseOf(ids, l)),
    corrupt: listing.corrupt.filter((c) => !isMarkerId(ids.markerPrefix, c.documentId)),
  };
}
