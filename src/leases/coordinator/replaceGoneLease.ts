import type { Partition, Position } from '../../core/Partition.js';
import { withoutHandoff } from '../balancing.js';
import type { Lease } from '../Lease.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import type { LeaseStore } from '../LeaseStore.js';
import { leaseDocument, type LeaseNaming } from './leaseDocuments.js';
import { childLeases } from './splitMerge.js';

/** @internal What {@link replaceGoneLease} needs. */
export interface ReplaceContext {
  readonly store: LeaseStore;
  readonly naming: LeaseNaming;
  /** The partitions the source lists now. */
  readonly listPartitions: () => Promise<readonly Partition[]>;
}

/** @internal How a replacement ended. */
export type Replacement =
  | { readonly kind: 'replaced'; readonly children: readonly string[]; readonly from: Position | null }
  /** Another host owns the lease now: it will replace it, from its own (newer) position. */
  | { readonly kind: 'fenced'; readonly owner: string | null };

/**
 * Replaces the lease of a gone partition (split or merged) by leases for the partitions covering its range
 * now, each starting where the parent stopped (`position`, else the parent's checkpoint), then deletes the
 * parent. Child ids are deterministic, so hosts doing this together create each child once; a step that
 * fails throws, and running it again is safe (the caller retries with backoff).
 *
 * @param owned the ownership as this host knows it: the parent's latest stored version and its epoch.
 * @internal
 */
export async function replaceGoneLease(
  ctx: ReplaceContext,
  owned: { readonly current: Lease; readonly epoch: number; readonly leaseToken: string; readonly partition: Partition },
  position: Position | null,
): Promise<Replacement> {
  const fresh = await ctx.store.read(owned.current.id);
  if (fresh && (fresh.owner !== ctx.naming.owner || fresh.epoch !== owned.epoch)) return { kind: 'fenced', owner: fresh.owner };
  const parent = fresh ?? owned.current;
  const from = position ?? parent.continuation;
  const children = childLeases(owned.leaseToken, parent.feedRange ?? owned.partition.range, await ctx.listPartitions());
  if (!children) throw new Error(`partition ${owned.leaseToken} reported gone, but the source still lists it; retrying`);
  for (const c of children) {
    await ctx.store.createIfAbsent(leaseDocument(ctx.naming, c.token, c.range, from, withoutHandoff(parent.properties), parent.epoch));
  }
  if (fresh) {
    await ctx.store.delete(fresh).catch((error: unknown) => {
      if (!(error instanceof LeaseConflictError)) throw error;
    });
  }
  return { kind: 'replaced', children: children.map((c) => c.token), from };
}
