import { HALTED_AT_EPOCH, HALTS } from '../leases/protocol/index.js';
import type { Lease } from '../leases/Lease.js';
import { changeLeases, fence, type LeaseChange } from './changeLeases.js';
import { type LeaseAdminOptions, resolveAdminOptions, selectLeases } from './options.js';

/** Options of {@link releaseLeases}. */
export interface ReleaseLeasesOptions extends LeaseAdminOptions {
  /**
   * Release leases whose owner is live too, fencing it (its epoch is raised, so its next checkpoint is refused and
   * it stops reading the partition). Default `false`: refuse with a `LeaseInUseError`.
   */
  readonly force?: boolean;
}

/**
 * Frees owned leases (owner cleared, epoch raised) so that any host can take them at its next scan: the fix
 * for a lease whose owner died and that should move before it expires. An unowned lease is left alone, unless
 * it carries the halt signal of a partition its failure policy halted: the signal is cleared (and the epoch
 * raised), so the hosts take the lease at their next scan instead of after the halt backoff.
 *
 * @example
 * ```ts
 * import { releaseLeases } from 'rxfeed';
 * await releaseLeases({ leases: store, leasePrefix: 'orders-view.', leaseTokens: ['3'], force: true });
 * ```
 */
export async function releaseLeases(options: ReleaseLeasesOptions): Promise<LeaseChange[]> {
  const o = resolveAdminOptions(options);
  const { leases } = await selectLeases(o);
  return changeLeases(o, leases, options.force ?? false, async (lease) => (lease.owner === null && !halted(lease) ? 'skip' : fence(lease, o.now())));
}

function halted(lease: Lease): boolean {
  return lease.properties[HALTED_AT_EPOCH] !== undefined || lease.properties[HALTS] !== undefined;
}
