import { LeaseInUseError } from '../errors/index.js';
import type { Lease } from '../leases/Lease.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import { deleteLease, withoutHalt } from '../leases/protocol/index.js';
import { isOwnedAndLive, type ResolvedAdminOptions } from './options.js';

/** What a lease administration command did to one lease. */
export interface LeaseChange {
  /** The lease token (partition id). */
  readonly leaseToken: string;
  /** The owner before the change (`null` = free). */
  readonly previousOwner: string | null;
  /** True when that owner was live: it was fenced (its epoch raised), so its next write is refused. */
  readonly fenced: boolean;
  /** The checkpoint before the change. */
  readonly previousContinuation: string | null;
  /** The checkpoint after the change (`undefined` when the lease was deleted). */
  readonly continuation: string | null | undefined;
}

/** How one lease changes: the lease to write (`replace`), `'delete'`, or `'skip'` (nothing to do). @internal */
export type LeaseEdit = (lease: Lease) => Promise<Lease | 'delete' | 'skip'>;

const MAX_ATTEMPTS = 5;

/**
 * Applies `edit` to every lease, refusing (before writing anything) while any of them is owned by a live host
 * unless `force`. Each write is conditional on the etag; a conflict re-reads the lease and checks again, so a
 * host that renewed meanwhile is never overwritten without `force`. @internal
 */
export async function changeLeases(o: ResolvedAdminOptions, leases: readonly Lease[], force: boolean, edit: LeaseEdit): Promise<LeaseChange[]> {
  if (!force) refuseLive(o, leases);
  const changes: LeaseChange[] = [];
  for (const [index, first] of leases.entries()) {
    const change = await changeOne(o, first, force, edit);
    if (change) changes.push(change);
    o.progress(index + 1, leases.length);
  }
  return changes;
}

async function changeOne(o: ResolvedAdminOptions, first: Lease, force: boolean, edit: LeaseEdit): Promise<LeaseChange | undefined> {
  let lease: Lease | undefined = first;
  for (let attempt = 1; lease; attempt++) {
    if (!force) refuseLive(o, [lease]);
    const fenced = isOwnedAndLive(lease, o);
    const next = await edit(lease);
    if (next === 'skip') return undefined;
    try {
      if (next === 'delete') await deleteLease(o.leases, o.ids, lease);
      else await o.leases.replace(next);
      return {
        leaseToken: lease.leaseToken,
        previousOwner: lease.owner,
        fenced,
        previousContinuation: lease.continuation,
        continuation: next === 'delete' ? undefined : next.continuation,
      };
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || attempt >= MAX_ATTEMPTS) throw error;
      lease = await o.leases.read(lease.id);
    }
  }
  return undefined;
}

function refuseLive(o: ResolvedAdminOptions, leases: readonly Lease[]): void {
  const live = leases.filter((l) => isOwnedAndLive(l, o));
  if (live.length > 0) throw new LeaseInUseError(live.map((l) => ({ leaseToken: l.leaseToken, owner: l.owner as string })));
}

/**
 * The lease with no owner and a raised epoch, so a deposed owner's next write is refused; without the halt
 * signal (an operator acts on purpose: the hosts take it at their next scan, no halt backoff). @internal
 */
export function fence(lease: Lease, now: number, continuation: string | null = lease.continuation): Lease {
  return { ...lease, owner: null, epoch: lease.epoch + 1, timestampMs: now, continuation, properties: withoutHalt(lease.properties) };
}
