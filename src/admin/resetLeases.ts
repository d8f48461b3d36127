import { InvalidOptionsError } from '../errors/index.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import { floorDocument, markerIdsOf, raiseEpochRecord } from '../leases/protocol/index.js';
import { changeLeases, type LeaseChange } from './changeLeases.js';
import { type LeaseAdminOptions, type ResolvedAdminOptions, resolveAdminOptions, selectLeases } from './options.js';

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
 * lease scheme), so it bootstraps again from its `startFrom`: at its next start, and at once on hosts that are
 * running (with `force`, they lose their leases at their next write, then find the leases gone). Positions start
 * over (rebuild views fed by this processor, or use {@link rewindLeases} to replay into an existing view);
 * epochs never go back: the highest epoch deleted is kept in `<prefix>.floor`, and the new leases start above
 * it, so stores that fence by epoch (views, dead letters) accept the new leases' writes and refuse the old ones'.
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
  // The floor is raised before a lease is deleted, never after: a reset that fails part way (a lease that keeps
  // changing under it, as a halted partition's does; a crash) must not leave a deleted epoch above the floor,
  // or the leases bootstrapped after it (this reset run again) would start below their old epochs.
  // Raised once to the highest epoch listed (at the first delete: a refused reset writes nothing), and again
  // only for a lease found at a higher epoch since.
  const highest = leases.reduce((max, l) => Math.max(max, l.epoch), 0);
  let floor = 0;
  const changes = await changeLeases(o, leases, options.force ?? false, async (lease) => {
    const needed = Math.max(highest, lease.epoch);
    if (needed > floor) {
      await raiseEpochFloor(o, needed);
      floor = needed;
    }
    return 'delete';
  });
  // Markers last: a host starting meanwhile must not find `.info` gone while leases still exist (nor bootstrap
  // below the floor). They are read by id: in the .NET scheme they are not under the leases' prefix.
  for (const id of markerIdsOf(o.ids)) {
    const marker = await o.leases.read(id);
    if (!marker) continue;
    await o.leases.delete(marker).catch((error: unknown) => {
      if (!(error instanceof LeaseConflictError && error.kind === 'missing')) throw error;
    });
  }
  return changes;
}

/** Raises `<prefix>.floor` to `epoch` (never lowers it); written conditionally, retried on a concurrent write. */
async function raiseEpochFloor(o: ResolvedAdminOptions, epoch: number): Promise<void> {
  if (epoch > 0) await raiseEpochRecord(o.leases, floorDocument(o.ids, epoch, o.now()));
}
