import type { Position } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import { LeaseConflictError } from '../leases/LeaseConflictError.js';
import type { LeaseStore } from '../leases/LeaseStore.js';
import type { ViewStore } from './ViewStore.js';

/** Options of {@link alignLeasesWithView}. */
export interface AlignLeasesWithViewOptions {
  /** The lease prefix the processors use (the same `leasePrefix` as the feed options). */
  readonly prefix: string;
  /** Attempts per lease when another host replaces it at the same time. Default 3. */
  readonly attempts?: number;
}

/** One lease whose position was moved to the view's. */
export interface AlignedLease {
  readonly leaseToken: string;
  readonly from: Position | null;
  readonly to: Position;
}

/**
 * Exactly-once recipe: before starting the processors, copy each partition's position from the view (where
 * it was committed in the same transaction as the rows) into its lease, so every partition resumes exactly
 * after the last change in the view instead of at the last, possibly older, lease checkpoint.
 *
 * Run it while no processor of the lease prefix runs (at start-up or deploy): a running owner would lose the
 * lease once (its next checkpoint is fenced) and then resume from the view's position anyway. Leases of
 * partitions the view has not seen, and view partitions without a lease (split parents), are left alone;
 * the view's per-partition LSN still drops changes it already holds if a replay happens.
 *
 * @example
 * ```ts
 * import { alignLeasesWithView, createChangeFeed, materializeToView, checkpointEvery } from 'rxfeed';
 * await alignLeasesWithView(view, leases, { prefix: 'orders-view.' });
 * const processor = createChangeFeed<Order>({ source, leases, leasePrefix: 'orders-view.', instanceName: 'host-1' });
 * processor.changes$.pipe(materializeToView(view, { project, mode: 'exactlyOnce' }), checkpointEvery(1000)).subscribe();
 * ```
 *
 * @returns The leases that moved.
 */
export async function alignLeasesWithView(
  view: Pick<ViewStore<unknown>, 'positions'>,
  leases: LeaseStore,
  options: AlignLeasesWithViewOptions,
): Promise<AlignedLease[]> {
  const { prefix, attempts = 3 } = options ?? ({} as AlignLeasesWithViewOptions);
  if (typeof prefix !== 'string') throw new InvalidOptionsError('prefix', 'give the lease prefix the processors use');
  if (!Number.isInteger(attempts) || attempts < 1) throw new InvalidOptionsError('attempts', `${attempts} must be a whole number, at least 1`);
  const log = logger('view');
  const positions = await view.positions();
  const moved: AlignedLease[] = [];
  for (const listed of (await leases.list(prefix)).leases) {
    const target = positions.get(listed.leaseToken)?.position;
    if (target === undefined) continue;
    let lease = listed;
    for (let attempt = 1; lease.continuation !== target; attempt++) {
      try {
        await leases.replace({ ...lease, continuation: target });
        moved.push({ leaseToken: lease.leaseToken, from: lease.continuation, to: target });
        log('[lease=%s] moved to the view position', lease.leaseToken);
        break;
      } catch (error) {
        if (!(error instanceof LeaseConflictError) || attempt >= attempts) throw error;
        const current = await leases.read(lease.id);
        if (!current) break;
        lease = current;
      }
    }
  }
  return moved;
}
