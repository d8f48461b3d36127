import type { Position } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import type { Lease } from '../leases/Lease.js';
import type { Source } from '../sources/Source.js';
import { changeLeases, fence, type LeaseChange } from './changeLeases.js';
import { type LeaseAdminOptions, resolveAdminOptions, selectLeases } from './options.js';

/** Where {@link rewindLeases} moves the checkpoints: a start, a point in time, or an explicit position. */
export type RewindTarget = 'beginning' | 'now' | Date | { readonly position: Position };

/** Options of {@link rewindLeases}. */
export interface RewindLeasesOptions extends LeaseAdminOptions {
  /** The new checkpoint of every selected lease. An explicit `{ position }` needs exactly one lease token. */
  readonly to: RewindTarget;
  /** The monitored feed, which turns `'beginning'`, `'now'` and times into positions (`Source.positionAt`). */
  readonly source?: Source<unknown>;
  /**
   * Rewind leases whose owner is live too, fencing it: its epoch is raised and the lease freed, so it cannot
   * write an old position back over the rewind, and the next owner reads from the new position.
   * Default `false`: refuse with a `LeaseInUseError`.
   */
  readonly force?: boolean;
}

/**
 * Moves the checkpoints of a processor's leases, to replay from a point in time ("reprocess since yesterday")
 * or to skip ahead to now. Every rewound lease is freed with a raised epoch, so a running host can never write
 * its old position back, and views guarded by epoch refuse its late writes.
 *
 * @example
 * ```ts
 * import { rewindLeases } from 'rxfeed';
 * await rewindLeases({ leases: store, source, leasePrefix: 'orders-view.', to: new Date('2026-11-22T00:00:00Z') });
 * ```
 */
export async function rewindLeases(options: RewindLeasesOptions): Promise<LeaseChange[]> {
  const o = resolveAdminOptions(options);
  const positionFor = positionResolver(options);
  const { leases } = await selectLeases(o);
  if (typeof options.to === 'object' && !(options.to instanceof Date) && leases.length !== 1) {
    throw new InvalidOptionsError('to', `an explicit position belongs to one partition; select exactly one lease (found ${leases.length})`);
  }
  return changeLeases(o, leases, options.force ?? false, async (lease) => fence(lease, o.now(), await positionFor(lease)));
}

function positionResolver(options: RewindLeasesOptions): (lease: Lease) => Promise<Position> {
  const { to, source } = options;
  if (typeof to === 'object' && !(to instanceof Date)) {
    if (typeof to.position !== 'string' || to.position === '') throw new InvalidOptionsError('to', 'expected a non-empty position string');
    return async () => to.position;
  }
  if (to !== 'beginning' && to !== 'now' && !(to instanceof Date && Number.isFinite(to.getTime()))) {
    throw new InvalidOptionsError('to', `expected 'beginning', 'now', a valid Date or { position }, got ${String(to)}`);
  }
  const positionAt = source?.positionAt?.bind(source);
  if (!positionAt) {
    throw new InvalidOptionsError('source', `rewinding to ${to instanceof Date ? 'a time' : `'${to}'`} needs the monitored source (e.g. new CosmosSource(container)) with positionAt`);
  }
  return async (lease) => {
    if (!lease.feedRange) throw new InvalidOptionsError('to', `lease ${lease.leaseToken} stores no feed range; rewind it to an explicit position`);
    return positionAt({ id: lease.leaseToken, range: lease.feedRange }, to);
  };
}
