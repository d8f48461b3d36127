import type { FeedRange, Position } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import type { LeaseStore } from '../leases/LeaseStore.js';
import { checkLeaseScheme, leaseIdsOf, listProcessorLeases, type LeaseScheme } from '../leases/protocol/index.js';
import { LEASE_OPTIONS } from '../leases/coordinator/options.js';
import type { ViewPartitionState, ViewStore } from './ViewStore.js';

/** Options of {@link alignLeasesWithView}. */
export interface AlignLeasesWithViewOptions {
  /** The lease prefix the processors use (the same `leasePrefix` as the feed options). */
  readonly prefix: string;
  /**
   * The processors' lease scheme (the same `leaseScheme` as the feed options): `'rxfeed'` (leases
   * `<prefix><token>`) or `'dotnet'` (leases `<prefix>..<token>`). Default `'rxfeed'`.
   */
  readonly leaseScheme?: LeaseScheme;
  /** Attempts per lease when another host replaces it at the same time. Default 3. */
  readonly attempts?: number;
}

/** One lease whose position was moved to the view's. */
export interface AlignedLease {
  /** The lease token (partition id). */
  readonly leaseToken: string;
  /** The lease's checkpoint before (`null`: it had none). */
  readonly from: Position | null;
  /** The position copied from the view. */
  readonly to: Position;
}

/**
 * Exactly-once recipe: before starting the processors, copy each partition's position from the view (where
 * it was committed in the same transaction as the rows) into its lease, so every partition resumes exactly
 * after the last change in the view instead of at the last, possibly older, lease checkpoint.
 *
 * Run it while no processor of the lease prefix runs (at start-up or deploy): a running owner would lose the
 * lease once (its next checkpoint is fenced) and then resume from the view's position anyway. A lease the
 * view has no position for but whose range lies inside a range the view committed (a split child, the
 * per-parent lease of a merge, created from its parent's position) moves to the position of the narrowest
 * such range: its parent's. Other leases, and view partitions without a lease (split parents), are left
 * alone; the view's LSN marks (inherited by children) still drop changes it already holds if a replay happens.
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
  const { prefix, leaseScheme = LEASE_OPTIONS.leaseScheme.default, attempts = 3 } = options ?? ({} as AlignLeasesWithViewOptions);
  if (typeof prefix !== 'string') throw new InvalidOptionsError('prefix', 'give the lease prefix the processors use');
  checkLeaseScheme('leaseScheme', leaseScheme, prefix);
  if (!Number.isInteger(attempts) || attempts < 1) throw new InvalidOptionsError('attempts', `${attempts} must be a whole number, at least 1`);
  const log = logger('view');
  const positions = await view.positions();
  const moved: AlignedLease[] = [];
  for (const listed of (await listProcessorLeases(leases, leaseIdsOf(prefix, leaseScheme))).leases) {
    const target = positions.get(listed.leaseToken)?.position ?? (listed.feedRange && parentPosition(listed.feedRange, positions));
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

/** The position of the narrowest range in `positions` that contains `range` (its nearest ancestor's). */
function parentPosition(range: FeedRange, positions: ReadonlyMap<string, ViewPartitionState>): Position | undefined {
  let best: FeedRange | undefined;
  let position: Position | undefined;
  for (const state of positions.values()) {
    const r = state.range;
    if (!r || !contains(r, range)) continue;
    if (best === undefined || contains(best, r)) {
      best = r;
      position = state.position;
    }
  }
  return position;
}

function contains(outer: FeedRange, inner: FeedRange): boolean {
  return outer.minInclusive <= inner.minInclusive && inner.maxExclusive <= outer.maxExclusive;
}
