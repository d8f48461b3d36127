// Role: one attempt at replacing a gone partition's lease — children at the parent's epoch and checkpoint,
// untaken, then the parent deleted; fenced when another host owns the parent now. GonePartitions retries it.
import type { FeedRange, Partition, Position } from '../../core/Partition.js';
import { PARENT_LEASE, UNTAKEN_AT_EPOCH, withoutSignals } from '../protocol/signals.js';
import type { Lease } from '../Lease.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import type { LeaseStore } from '../LeaseStore.js';
import { isLeaseOf, leaseDocument, type LeaseNaming } from '../protocol/documents.js';
import { childLeases, type ChildLease, coversRange, uncoveredParts } from './splitMerge.js';

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
  | { readonly kind: 'fenced'; readonly owner: string | null | undefined };

/**
 * Replaces the lease of a gone partition (split or merged) by leases for the partitions covering its range
 * now, each starting at the parent's stored checkpoint (else at `position`, where the reader stopped), then deletes the
 * parent. Child ids are deterministic, so hosts doing this together create each child once; a step that
 * fails throws, and running it again is safe (the caller retries with backoff).
 *
 * @param owned the ownership as this host knows it: the parent's latest stored version and its epoch.
 * @internal
 */
export async function replaceGoneLease(
  ctx: ReplaceContext,
  owned: { readonly current: Lease; readonly epoch: number; readonly leaseToken: string; readonly partition: Partition; parentDeleteSent: boolean },
  position: Position | null,
): Promise<Replacement> {
  const fresh = await ctx.store.read(owned.current.id);
  if (fresh && (fresh.owner !== ctx.naming.owner || fresh.epoch !== owned.epoch)) return { kind: 'fenced', owner: fresh.owner };
  // Gone without this host having sent its delete: another owner (a later epoch) replaced the lease, and its
  // children may have moved on since. Creating children from this host's older view would start them behind.
  if (!fresh && !owned.parentDeleteSent) return { kind: 'fenced', owner: undefined };
  const parent = fresh ?? owned.current;
  // The parent's stored checkpoint wins: batches acknowledged after the reader's drain gave up may have
  // checkpointed past `position` since, and a child must never start behind its parent's checkpoint.
  const from = fresh ? (fresh.continuation ?? position) : (position ?? parent.continuation);
  const range = parent.feedRange ?? owned.partition.range;
  const children = childLeases(owned.leaseToken, range, await ctx.listPartitions());
  if (!children) throw new Error(`partition ${owned.leaseToken} reported gone, but the source still lists it; retrying`);
  if (!coversRange(children, range)) {
    throw new Error(`partition ${owned.leaseToken} reported gone, but the partitions listed cover only part of its range (the listing lags the split?); retrying`);
  }
  const untaken = { ...withoutSignals(parent.properties), [UNTAKEN_AT_EPOCH]: String(parent.epoch), [PARENT_LEASE]: owned.leaseToken };
  for (const c of await notYetReplaced(ctx, parent, range, children)) {
    const child = leaseDocument(ctx.naming, c.token, c.range, from, untaken, parent.epoch);
    if (await ctx.store.createIfAbsent(child)) continue;
    // It exists: an earlier attempt (this host's, or a deposed owner's) created it from an older checkpoint of
    // the parent. While no host has taken it (it still carries the mark, at its epoch), it starts where the
    // parent stands now, so a lineage's checkpoint never moves backwards. A child taken since (and maybe
    // released: no owner again) has checkpoints of its own, past the parent's: it is left as it is. So is a
    // child another lease created (a child of this one whose own replacement created it, while this parent's
    // delete never landed): it starts at its creator's checkpoint, past this parent's.
    const existing = await ctx.store.read(child.id);
    const neverTaken = existing?.owner === null && existing.properties[UNTAKEN_AT_EPOCH] === String(existing.epoch);
    const createdByThisParent = existing !== undefined && (existing.properties[PARENT_LEASE] ?? owned.leaseToken) === owned.leaseToken;
    if (existing && neverTaken && createdByThisParent && existing.epoch <= parent.epoch && from !== null && existing.continuation !== from) {
      await ctx.store.replace({ ...existing, continuation: from, epoch: parent.epoch, properties: { ...existing.properties, ...untaken }, timestampMs: ctx.naming.now() });
    }
  }
  if (fresh) {
    const gone = await deleteParent(ctx, owned, fresh);
    if (gone !== true) return gone;
  }
  return { kind: 'replaced', children: children.map((c) => c.token), from };
}

/**
 * The children this replacement creates: those of `children` (the partitions listed now) that no other
 * lease under the parent's range covers yet. Such a lease (a descendant: its range lies inside the parent's)
 * that is not one of `children` was created by an earlier attempt of this replacement (this host's, whose
 * parent delete failed, or a deposed owner's) and is gone itself by now, split or merged again: the
 * partitions under its range are its to replace, from its own checkpoint, which is past the parent's.
 * Created from the parent's checkpoint instead, they would start behind it (the lineage's checkpoint would
 * move backwards). A listed partition such a lease covers in part (it merged with a part nobody read since
 * the parent) gets an EPK lease for each part left uncovered.
 */
async function notYetReplaced(ctx: ReplaceContext, parent: Lease, range: FeedRange, children: readonly ChildLease[]): Promise<readonly ChildLease[]> {
  const tokens = new Set(children.map((c) => c.token));
  const inside = (r: FeedRange) => r.minInclusive >= range.minInclusive && r.maxExclusive <= range.maxExclusive;
  // The lease this one was created from is no descendant, though its range may be this one's (an EPK lease
  // whose range became a partition's): its delete never landed, and it stands at an older checkpoint.
  const createdFrom = parent.properties[PARENT_LEASE];
  const listing = await ctx.store.list(ctx.naming.prefix);
  const descendants = listing.leases
    .filter((l) => isLeaseOf(ctx.naming, l) && l.id !== parent.id && l.leaseToken !== createdFrom && !tokens.has(l.leaseToken) && l.feedRange !== undefined && inside(l.feedRange))
    .map((l) => l.feedRange!);
  if (descendants.length === 0) return children;
  return children.flatMap((c) => {
    const parts = uncoveredParts(c.range, descendants);
    if (parts.length === 1 && parts[0]!.minInclusive === c.range.minInclusive && parts[0]!.maxExclusive === c.range.maxExclusive) return [c];
    return parts.map((r) => ({ token: `${r.minInclusive}-${r.maxExclusive}`, range: r }));
  });
}

/**
 * Deletes the parent lease, conditional on the version read. A conflict is re-read: a signal left in the
 * lease (a release notice, a handoff request) while it is still this ownership's is retried; a lease taken
 * by another host meanwhile is not this host's to delete (fenced: its new owner replaces it in turn).
 */
async function deleteParent(
  ctx: ReplaceContext,
  owned: { readonly epoch: number; parentDeleteSent: boolean },
  parent: Lease,
): Promise<true | Replacement> {
  for (let attempt = 1; ; attempt++) {
    owned.parentDeleteSent = true;
    try {
      await ctx.store.delete(parent);
      return true;
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || attempt >= 5) throw error;
      if (error.kind === 'missing') return true; // an earlier delete of ours landed (its reply was lost)
      const fresh = await ctx.store.read(parent.id);
      if (!fresh) return true;
      if (fresh.owner !== ctx.naming.owner || fresh.epoch !== owned.epoch) return { kind: 'fenced', owner: fresh.owner };
      parent = fresh;
    }
  }
}
