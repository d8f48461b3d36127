import type { Partition, Position } from '../../core/Partition.js';
import { UNTAKEN_AT_EPOCH, withoutSignals } from '../balancing.js';
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
  const children = childLeases(owned.leaseToken, parent.feedRange ?? owned.partition.range, await ctx.listPartitions());
  if (!children) throw new Error(`partition ${owned.leaseToken} reported gone, but the source still lists it; retrying`);
  const untaken = { ...withoutSignals(parent.properties), [UNTAKEN_AT_EPOCH]: String(parent.epoch) };
  for (const c of children) {
    const child = leaseDocument(ctx.naming, c.token, c.range, from, untaken, parent.epoch);
    if (await ctx.store.createIfAbsent(child)) continue;
    // It exists: an earlier attempt (this host's, or a deposed owner's) created it from an older checkpoint of
    // the parent. While no host has taken it (it still carries the mark, at its epoch), it starts where the
    // parent stands now, so a lineage's checkpoint never moves backwards. A child taken since (and maybe
    // released: no owner again) has checkpoints of its own, past the parent's: it is left as it is.
    const existing = await ctx.store.read(child.id);
    const neverTaken = existing?.owner === null && existing.properties[UNTAKEN_AT_EPOCH] === String(existing.epoch);
    if (existing && neverTaken && existing.epoch <= parent.epoch && from !== null && existing.continuation !== from) {
      await ctx.store.replace({ ...existing, continuation: from, epoch: parent.epoch, properties: { ...existing.properties, ...untaken }, timestampMs: ctx.naming.now() });
    }
  }
  if (fresh) {
    owned.parentDeleteSent = true;
    await ctx.store.delete(fresh).catch((error: unknown) => {
      if (!(error instanceof LeaseConflictError)) throw error;
    });
  }
  return { kind: 'replaced', children: children.map((c) => c.token), from };
}
