// Role: one attempt at replacing a gone partition's lease — the parent marked replaced (never acquired again)
// with its children decided once, those children one epoch above it at its checkpoint, untaken, then the parent
// deleted; fenced when another host owns the parent now. GonePartitions retries it, and finishes a marked lease
// whose owner is gone.
import type { FeedRange, Partition, Position } from '../../core/Partition.js';
import { formatChildren, inheritedProperties, isReplaced, PARENT_LEASE, recordedChildren, REPLACED_AT_EPOCH, REPLACED_BY, REPLACEMENT_CHILDREN, UNTAKEN_AT_EPOCH, withoutRequest } from '../protocol/signals.js';
import type { Lease } from '../Lease.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import type { LeaseStore } from '../LeaseStore.js';
import { deleteLease, floorId, isLeaseOf, leaseDocument, type LeaseNaming } from '../protocol/documents.js';
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
 * parent. First it marks the parent replaced ({@link REPLACED_AT_EPOCH}, a conditional write under this
 * ownership's epoch): from then on no host acquires the parent again, so it is never read under an epoch above
 * its children's, which are created one above the parent's. The mark records the children, decided once from
 * the listing read before it ({@link REPLACEMENT_CHILDREN}); every later attempt creates those, so one gone
 * parent has one set of children whatever the listings of the hosts doing this show, and hosts doing this
 * together create each child once; a step that fails throws, and running it again is safe (the caller retries
 * with backoff; a host that finds the parent marked and its owner gone finishes it: {@link finishReplacement}).
 *
 * @param owned the ownership as this host knows it: the parent's latest stored version (moved to the marked
 * version once marked) and its epoch.
 * @internal
 */
export async function replaceGoneLease(
  ctx: ReplaceContext,
  owned: { current: Lease; readonly epoch: number; readonly leaseToken: string; readonly partition: Partition; parentDeleteSent: boolean; childrenCreated?: boolean },
  position: Position | null,
): Promise<Replacement> {
  const fresh = await ctx.store.read(owned.current.id);
  const ours = (l: Lease) => l.owner === ctx.naming.owner && l.epoch === owned.epoch;
  if (fresh && !ours(fresh)) return { kind: 'fenced', owner: fresh.owner };
  // Gone without this host having sent its delete: another host replaced the lease (it finished a replacement
  // this ownership marked, or, before marks, a later owner did), and its children may have moved on since.
  // Creating children from this host's older view would start them behind.
  if (!fresh && !owned.parentDeleteSent) return { kind: 'fenced', owner: undefined };
  let parent = fresh ?? owned.current;
  const range = parent.feedRange ?? owned.partition.range;
  // Decided once: a mark in place (an earlier attempt's) names the children; only a first mark lists them.
  let children = (isReplaced(parent) ? decidedChildren(parent, range) : undefined) ?? (await listedChildren(ctx, owned.leaseToken, range));
  if (fresh) {
    // Marked before any child exists: once the mark lands no host acquires the parent again (a host that
    // took it before the mark has fenced this write). An earlier attempt's mark may have landed already.
    const marked = isReplaced(fresh) ? await confirmMarked(ctx, fresh, ours, owned.childrenCreated === true || fresh.properties[REPLACED_BY] !== undefined) : await markReplaced(ctx, fresh, range, position, children, ours);
    if (!marked) {
      const now = await ctx.store.read(fresh.id).catch(() => undefined);
      return { kind: 'fenced', owner: now?.owner };
    }
    parent = marked;
    owned.current = marked; // this ownership's next renewal is conditional on the marked version, and keeps the mark
    // A mark found in place of this one (an earlier write of this ownership landed, its reply lost) recorded
    // the children of that attempt's listing: those are the children.
    children = decidedChildren(marked, range) ?? children;
  }
  // The parent's stored checkpoint wins: batches acknowledged after the reader's drain gave up may have
  // checkpointed past `position` since, and a child must never start behind its parent's checkpoint.
  const from = fresh ? (parent.continuation ?? position) : (position ?? parent.continuation);
  // Created once: a child missing on a retry was taken, replaced and deleted in turn (see REPLACED_BY); a
  // retry only moves the children no host took yet forward to the parent's checkpoint.
  const created = owned.childrenCreated === true || parent.properties[REPLACED_BY] !== undefined;
  const made = await createChildren(ctx, parent, range, children, from, !created);
  if (!created) {
    owned.childrenCreated = true;
    if (fresh) {
      const by = (l: Lease): Lease => ({ ...l, properties: { ...l.properties, [REPLACED_BY]: children.map((c) => c.token).join(',') } });
      const noted = await markParent(ctx, parent, by(parent), ours, by, (l) => l.properties[REPLACED_BY] !== undefined);
      if (!noted) {
        const [now, floor] = await Promise.all([ctx.store.read(parent.id), ctx.store.read(floorId(ctx.naming.markerPrefix))]);
        // Deleted, not by this host, with the epoch floor raised to it: a reset removed the leases after the
        // mark, before these children landed. Left in place they would keep the hosts from bootstrapping again
        // (leases exist) while the rest of the key space has none. Each is removed as created (a conflict
        // leaves it to a host that took it since). A host finishing the replacement deletes the parent too,
        // but only once every child exists, and raises no floor: those children stay.
        if (!now && floor !== undefined && floor.epoch >= parent.epoch) await Promise.all(made.map((c) => deleteLease(ctx.store, ctx.naming, c).catch(() => undefined)));
        return { kind: 'fenced', owner: now?.owner };
      }
      parent = noted;
      owned.current = noted;
    }
  }
  if (fresh) {
    const gone = await deleteParent(ctx, parent, ours, owned);
    if (!gone) return { kind: 'fenced', owner: (await ctx.store.read(parent.id).catch(() => undefined))?.owner };
  }
  return { kind: 'replaced', children: children.map((c) => c.token), from };
}

/**
 * Finishes the replacement of a lease marked replaced ({@link REPLACED_AT_EPOCH}) whose owner is gone: it
 * released it, or it expired (the caller judges that, on its own clock). Creates the children the mark
 * records that are missing (from the parent's stored checkpoint, which the mark wrote), then deletes the
 * parent. Never takes the parent: it is read by no one. Returns the children's tokens, or `undefined` when there is nothing to finish (the lease
 * is gone, not marked, or was written since it was listed by an owner that is alive after all).
 *
 * @internal
 */
export async function finishReplacement(ctx: ReplaceContext, listed: Lease): Promise<readonly string[] | undefined> {
  const read = await ctx.store.read(listed.id);
  if (!read || !isReplaced(read)) return undefined;
  if (read.owner !== null && read.etag !== listed.etag) return undefined;
  if (!read.feedRange) throw new Error(`lease ${read.leaseToken} is marked replaced but stores no feed range`);
  // The children its owner decided when it marked it, never those of this host's listing (see REPLACEMENT_CHILDREN).
  const children = decidedChildren(read, read.feedRange) ?? (await listedChildren(ctx, read.leaseToken, read.feedRange));
  // The read may lag another host's finish (the parent deleted, its children taken, replaced and deleted in
  // turn at higher epochs): children created again from it would be created below an epoch they had. The mark
  // is confirmed by a conditional write first, as a retry of the owner's does ({@link confirmMarked}).
  const create = read.properties[REPLACED_BY] === undefined;
  const parent = await confirmMarked(ctx, read, isReplaced, !create);
  if (!parent) return undefined;
  await createChildren(ctx, parent, read.feedRange, children, parent.continuation, create);
  // Already gone when the delete came: another host finished it, and the read above lagged its delete. Nothing
  // of this host's to report: reported as finished, the caller would balance at once and, listing the same
  // lagging view, find the lease again and finish it again, in a loop that never waits (the simulation,
  // seed 142 of `lease-request-spin`).
  if ((await deleteParent(ctx, parent, isReplaced, { parentDeleteSent: false })) !== 'deleted') return undefined;
  return children.map((c) => c.token);
}

/**
 * The children recorded in the replacement mark of `lease` ({@link REPLACEMENT_CHILDREN}), when they cover its
 * `range`; `undefined` for a mark that records none (written before the property existed: the listing decides).
 */
function decidedChildren(lease: Lease, range: FeedRange): readonly ChildLease[] | undefined {
  const recorded = recordedChildren(lease);
  return recorded && coversRange(recorded, range) ? recorded : undefined;
}

/** The leases that replace the gone partition `token` over `range`, from the source's listing; throws while the listing does not show it gone. */
async function listedChildren(ctx: ReplaceContext, token: string, range: FeedRange): Promise<readonly ChildLease[]> {
  const children = childLeases(token, range, await ctx.listPartitions());
  if (!children) throw new Error(`partition ${token} reported gone, but the source still lists it; retrying`);
  if (!coversRange(children, range)) {
    throw new Error(`partition ${token} reported gone, but the partitions listed cover only part of its range (the listing lags the split?); retrying`);
  }
  return children;
}

/**
 * Marks `lease` (this ownership's, see `ours`) replaced at its epoch, with its range, its `children` and a
 * checkpoint (the reader's `position` when it stored none yet) so that any host can finish the replacement from
 * it, creating exactly those children, and without a handoff request (a marked lease is never handed over nor
 * taken by force). A conflict is re-read: a signal another host left while the lease is still ours is retried
 * over. Returns the marked version, or `undefined` when the lease is not ours any more.
 */
function markReplaced(ctx: ReplaceContext, lease: Lease, range: FeedRange, position: Position | null, children: readonly ChildLease[], ours: (l: Lease) => boolean): Promise<Lease | undefined> {
  const marked = (l: Lease): Lease => ({
    ...l,
    feedRange: l.feedRange ?? range,
    continuation: l.continuation ?? position,
    timestampMs: ctx.naming.now(),
    // A handoff request left before the mark is void: nobody takes a marked lease.
    properties: { ...withoutRequest(l.properties), [REPLACED_AT_EPOCH]: String(l.epoch), [REPLACEMENT_CHILDREN]: formatChildren(children) },
  });
  return markParent(ctx, lease, marked(lease), ours, marked, isReplaced);
}

/**
 * The mark an earlier attempt left, confirmed in place by a conditional write (the same version, timestamp
 * refreshed) before any child is created again, unless the children were all created once (`created`: nothing
 * is created). A read may lag another writer's delete: a reset since deleted the parent and its children (a
 * child whose create's reply was lost, maybe taken since at a higher epoch), and a child created again from
 * the lagging read would be created below an epoch it had (stores fencing by epoch would refuse its writes).
 * The write is not served from a lagging view: it finds the parent gone. `undefined`: not ours any more.
 */
function confirmMarked(ctx: ReplaceContext, lease: Lease, ours: (l: Lease) => boolean, created: boolean): Promise<Lease | undefined> {
  if (created) return Promise.resolve(lease);
  const touched = (l: Lease): Lease => ({ ...l, timestampMs: ctx.naming.now() });
  return markParent(ctx, lease, touched(lease), ours, touched, () => false);
}

/**
 * Writes `next` over `lease` (this ownership's, see `ours`), conditional on its version. A conflict is re-read:
 * a version that is still ours (another host left a signal in it) gets `again(fresh)`; one where `done` holds
 * already (an earlier write of ours landed, its reply lost) is returned as it is. `undefined`: not ours any more.
 */
async function markParent(
  ctx: ReplaceContext,
  lease: Lease,
  next: Lease,
  ours: (l: Lease) => boolean,
  again: (fresh: Lease) => Lease,
  done: (fresh: Lease) => boolean,
): Promise<Lease | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ctx.store.replace(next);
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || attempt >= 5) throw error;
      const fresh = error.kind === 'missing' ? undefined : await ctx.store.read(lease.id);
      if (!fresh || !ours(fresh)) return undefined;
      if (done(fresh)) return fresh;
      lease = fresh;
      next = again(fresh);
    }
  }
}

/**
 * Creates the children of the marked `parent` that are missing (unless `create` is false: they were all
 * created once), one epoch above the parent's, free and untaken, starting at `from`. A child that exists and
 * that no host took yet (an earlier attempt's) is moved forward to `from`.
 */
async function createChildren(ctx: ReplaceContext, parent: Lease, range: FeedRange, children: readonly ChildLease[], from: Position | null, create: boolean): Promise<Lease[]> {
  const made: Lease[] = [];
  // Above every epoch the parent was read under (it is never acquired again once marked), so stores fencing
  // by key range refuse the parent's late writes once a child wrote, whatever the order they land in.
  const epoch = parent.epoch + 1;
  // A child records its creator (overwriting the one the parent inherited from its own creator): see PARENT_LEASE.
  const untaken = { ...inheritedProperties(parent.properties), [UNTAKEN_AT_EPOCH]: String(epoch), [PARENT_LEASE]: parent.leaseToken };
  const { missing, listed } = await notYetReplaced(ctx, parent, range, children);
  for (const c of missing) {
    const child = leaseDocument(ctx.naming, c.token, c.range, from, untaken, epoch);
    // A child the listing showed is never created again: it existed, so it was created once, and if it is
    // gone by the time a create would land, it was taken, replaced and deleted in turn since the listing (say
    // by this very host, which took it in the round that started this finish): created again, from the
    // parent's older checkpoint, it would be read beside its own children (sim seed 916: child 4 of 1 created
    // again after its split into 6 and 7, then read under an epoch above theirs).
    const created = create && !listed.has(child.id) ? await ctx.store.createIfAbsent(child) : undefined;
    if (created) {
      made.push(created);
      continue;
    }
    // It exists: an earlier attempt (this host's, or another's finishing it) created it from an older
    // checkpoint of the parent. While no host has taken it (it still carries the mark, at its epoch), it starts
    // where the parent stands now, so a lineage's checkpoint never moves backwards. A child taken since (and
    // maybe released: no owner again) has checkpoints of its own, past the parent's: it is left as it is. So is a
    // child another lease created (a child of this one whose own replacement created it, while this parent's
    // delete never landed): it starts at its creator's checkpoint, past this parent's. A child that records no
    // creator (created before children recorded one) is taken for this parent's.
    const existing = await ctx.store.read(child.id);
    const neverTaken = existing?.owner === null && existing.properties[UNTAKEN_AT_EPOCH] === String(existing.epoch);
    const createdByThisParent = existing !== undefined && (existing.properties[PARENT_LEASE] ?? parent.leaseToken) === parent.leaseToken;
    if (existing && neverTaken && createdByThisParent && existing.epoch <= epoch && from !== null && existing.continuation !== from) {
      await ctx.store.replace({ ...existing, continuation: from, epoch, properties: { ...existing.properties, ...untaken }, timestampMs: ctx.naming.now() });
    }
  }
  return made;
}

/**
 * The children this replacement creates: those of `children` (the partitions listed now) that no other
 * lease under the parent's range covers yet. Such a lease (a descendant: its range lies inside the parent's, and
 * it is no ancestor still marked)
 * that is not one of `children` was created by an earlier attempt of this replacement (this host's, whose
 * parent delete failed, or a deposed owner's) and is gone itself by now, split or merged again: the
 * partitions under its range are its to replace, from its own checkpoint, which is past the parent's.
 * Created from the parent's checkpoint instead, they would start behind it (the lineage's checkpoint would
 * move backwards). A listed partition such a lease covers in part (it merged with a part nobody read since
 * the parent) gets an EPK lease for each part left uncovered.
 */
async function notYetReplaced(
  ctx: ReplaceContext,
  parent: Lease,
  range: FeedRange,
  children: readonly ChildLease[],
): Promise<{ readonly missing: readonly ChildLease[]; readonly listed: ReadonlySet<string> }> {
  const tokens = new Set(children.map((c) => c.token));
  const inside = (r: FeedRange) => r.minInclusive >= range.minInclusive && r.maxExclusive <= range.maxExclusive;
  // The lease this one was created from is no descendant, though its range may be this one's (an EPK lease
  // whose range became a partition's): its delete never landed, and it stands at an older checkpoint. It may
  // carry no mark (replaced before marks existed), so `ancestor` below would not tell it.
  const createdFrom = parent.properties[PARENT_LEASE];
  const listing = await ctx.store.list(ctx.naming.prefix);
  // A lease under the range marked replaced at an epoch below the parent's mark is no descendant but an
  // ancestor whose replacement is not finished yet (its delete failed or is slow): one over the same range (a
  // partition replaced by one partition, a merge's EPK child). Descendants are created above the parent's mark
  // (an admin release may raise an ancestor's epoch since, never its mark).
  const markOf = (l: Lease) => Number(l.properties[REPLACED_AT_EPOCH] ?? l.epoch);
  const ancestor = (l: Lease) => isReplaced(l) && markOf(l) < markOf(parent);
  const descendants = listing.leases
    .filter((l) => isLeaseOf(ctx.naming, l) && l.id !== parent.id && l.leaseToken !== createdFrom && !tokens.has(l.leaseToken) && l.feedRange !== undefined && inside(l.feedRange) && !ancestor(l))
    .map((l) => l.feedRange!);
  const listed = new Set(listing.leases.map((l) => l.id));
  if (descendants.length === 0) return { missing: children, listed };
  const missing = children.flatMap((c) => {
    const parts = uncoveredParts(c.range, descendants);
    if (parts.length === 1 && parts[0]!.minInclusive === c.range.minInclusive && parts[0]!.maxExclusive === c.range.maxExclusive) return [c];
    return parts.map((r) => ({ token: `${r.minInclusive}-${r.maxExclusive}`, range: r }));
  });
  return { missing, listed };
}

/**
 * Deletes the parent lease, conditional on the version read. A conflict is re-read: a version that is still
 * `ours` (this ownership's, with a signal another host left in it; or, finishing, still marked) is retried;
 * a lease that is not (taken by another host before the mark) is not this host's to delete: `false`.
 * `'deleted'`: this call's delete landed; `'gone'`: the parent was gone already (an earlier delete of this
 * ownership whose reply was lost, or another host finished the replacement).
 */
async function deleteParent(ctx: ReplaceContext, parent: Lease, ours: (l: Lease) => boolean, sent: { parentDeleteSent: boolean }): Promise<'deleted' | 'gone' | false> {
  for (let attempt = 1; ; attempt++) {
    sent.parentDeleteSent = true;
    try {
      await deleteLease(ctx.store, ctx.naming, parent);
      return 'deleted';
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || attempt >= 5) throw error;
      if (error.kind === 'missing') return 'gone'; // an earlier delete landed (its reply was lost), or another host finished it
      const fresh = await ctx.store.read(parent.id);
      if (!fresh) return 'gone';
      if (!ours(fresh)) return false;
      parent = fresh;
    }
  }
}
