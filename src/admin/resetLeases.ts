import { InvalidOptionsError } from '../errors/index.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import { markerIdsOf } from '../leases/coordinator/leaseDocuments.js';
import { changeLeases, type LeaseChange } from './changeLeases.js';
import { type LeaseAdminOptions, resolveAdminOptions, selectLeases } from './options.js';

/** Options of {@link resetLeases}. */
export interface ResetLeasesOptions extends Omit<LeaseAdminOptions, 'leaseTokens'> {
  /**
   * Delete leases whose owner is live too; the owner's next renewal finds the lease gone and stops reading.
   * Default `false`: refuse with a `LeaseInUseError`.
   */
  readonly force?: boolean;
}

/**
 * Deletes every lease of a processor and its bootstrap markers (`<prefix>.info`, `<prefix>.lock`, in either
 * lease scheme), so its next start bootstraps again from its `startFrom`. Positions and epochs start over:
 * rebuild views fed by this processor (or use {@link rewindLeases}, which keeps epochs, to replay into an
 * existing view).
 *
 * @example
 * ```ts
 * import { resetLeases } from 'rxfeed';
 * const deleted = await resetLeases({ leases: store, leasePrefix: 'orders-view.' });
 * ```
 */
export async function resetLeases(options: ResetLeasesOptions): Promise<LeaseChange[]> {
  if ((options as { leaseTokens?: unknown }).leaseTokens !== undefined) {
    throw new InvalidOptionsError('leaseTokens', 'reset deletes every lease of the prefix; use releaseLeases or rewindLeases for single leases');
  }
  const o = resolveAdminOptions(options);
  const { leases } = await selectLeases(o);
  const changes = await changeLeases(o, leases, options.force ?? false, async () => 'delete');
  // Markers last: a host starting meanwhile must not find `.info` gone while leases still exist. They are read
  // by id: in the .NET scheme they are not under the leases' prefix.
  for (const id of markerIdsOf(o.ids)) {
    const marker = await o.leases.read(id);
    if (!marker) continue;
    await o.leases.delete(marker).catch((error: unknown) => {
      if (!(error instanceof LeaseConflictError && error.kind === 'missing')) throw error;
    });
  }
  return changes;
}
