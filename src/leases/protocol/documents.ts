// Protocol: the documents of one processor in the lease store — lease ids, the `.info` / `.lock` / `.floor`
// markers, the rxfeed and .NET naming schemes, and the shape of new leases and markers. See
// docs/lease-protocol.md, "Documents".
import type { FeedMode, FeedRange, Position } from '../../core/Partition.js';
import type { Lease, NewLease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import { CorruptLeaseError } from '../../errors/CorruptLeaseError.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import { confirmRead } from './confirmRead.js';

/**
 * How lease documents are named. `'rxfeed'`: leases `<prefix><token>`, markers `<prefix>.info` / `<prefix>.lock`.
 * `'dotnet'`: the layout of the .NET v3 change feed processor and the Azure Functions Cosmos DB trigger —
 * leases `<prefix>..<token>`, markers `<prefix>.info` / `<prefix>.lock` without a `LeaseToken` (see
 * docs/compatibility.md and {@link dotnetLeasePrefix} for the prefix those processors compute).
 */
export type LeaseScheme = 'rxfeed' | 'dotnet';

/** @internal The lease scheme when none is given (the default of the `leaseScheme` option). */
export const DEFAULT_LEASE_SCHEME = 'rxfeed' satisfies LeaseScheme;

/**
 * @internal Where one processor's documents are in the lease store: what the coordinator, the estimator and the
 * lease administration all list and skip.
 */
export interface LeaseIds {
  /** Prefix of every lease id (listing uses it). */
  readonly prefix: string;
  /** Prefix of the `.info` / `.lock` markers (equal to `prefix` in the rxfeed scheme). */
  readonly markerPrefix: string;
  readonly scheme: LeaseScheme;
}

/** @internal How one processor names and shapes its documents in the lease store. */
export interface LeaseNaming extends LeaseIds {
  readonly owner: string;
  readonly mode: FeedMode;
  readonly now: () => number;
}

/** @internal Id of the marker saying the leases were created (`<prefix>.info`, as .NET). */
export const infoId = (prefix: string): string => `${prefix}.info`;
/** @internal Id of the marker written while one host creates the leases (`<prefix>.lock`, as .NET). */
export const lockId = (prefix: string): string => `${prefix}.lock`;

/**
 * @internal Id of the document holding the processor's epoch floor (`<prefix>.floor`): the highest epoch of the
 * leases a reset deleted. Leases created later start above it, so epochs never go back (stores that fence by
 * epoch, such as dead-letter stores, keep accepting the new leases' writes).
 */
export const floorId = (prefix: string): string => `${prefix}.floor`;

/** @internal True for the processor's marker documents (never leases). */
export function isMarkerId(prefix: string, id: string): boolean {
  return id === infoId(prefix) || id === lockId(prefix) || id === floorId(prefix) || id.startsWith(`${prefix}.gone.`);
}

/** @internal The epoch floor document at `epoch` (its token names it in both schemes, so every store reads it as a lease). */
export function floorDocument(ids: LeaseIds, epoch: number, now: number): NewLease {
  const id = floorId(ids.markerPrefix);
  return { id, leaseToken: id.slice(ids.markerPrefix.length), feedRange: undefined, owner: null, continuation: null, timestampMs: now, epoch, mode: undefined, properties: {} };
}

/**
 * @internal Whether a listed document is one of the processor's leases: its id is exactly `<prefix><token>`
 * and it is not a marker. A listing by prefix also returns the documents of every processor whose prefix
 * begins with this one's (`orders.v2.` under `orders.`); taking those would read and checkpoint another
 * processor's partitions.
 */
export function isLeaseOf(ids: LeaseIds, lease: { readonly id: string; readonly leaseToken: string }): boolean {
  return lease.id === ids.prefix + lease.leaseToken && !isMarkerId(ids.markerPrefix, lease.id);
}

/** @internal The ids of one processor's two markers, `.info` then `.lock`. */
export function markerIdsOf(ids: LeaseIds): readonly [info: string, lock: string] {
  return [infoId(ids.markerPrefix), lockId(ids.markerPrefix)];
}

/**
 * @internal Where one processor's documents are: in the .NET scheme leases sit under `<prefix>..`, the markers
 * next to them (DocumentServiceLeaseStoreManagerOptions.GetPartitionLeasePrefix and
 * DocumentServiceLeaseStoreCosmos in Azure/azure-cosmos-dotnet-v3).
 */
export function leaseIdsOf(prefix: string, scheme: LeaseScheme): LeaseIds {
  return { prefix: scheme === 'dotnet' ? `${prefix}..` : prefix, markerPrefix: prefix, scheme };
}

/** @internal The names of one processor's documents ({@link leaseIdsOf}) and how this host writes them. */
export function namingOf(prefix: string, scheme: LeaseScheme, owner: string, mode: FeedMode, now: () => number): LeaseNaming {
  return { ...leaseIdsOf(prefix, scheme), owner, mode, now };
}

/**
 * @internal A marker document owned by this host. In the .NET scheme its `leaseToken` is empty, which the
 * Cosmos store writes without a `LeaseToken` field (readers such as KEDA skip documents without one).
 */
export function markerDocument(naming: LeaseNaming, id: string): NewLease {
  return {
    id,
    leaseToken: naming.scheme === 'dotnet' ? '' : id.slice(naming.markerPrefix.length),
    feedRange: undefined,
    owner: naming.owner,
    continuation: null,
    timestampMs: naming.now(),
    epoch: 0,
    mode: naming.mode,
    properties: {},
  };
}

/**
 * A new, free lease for one partition (or key range), starting at `continuation`. A split or merge child
 * starts one above its parent's `epoch` (the parent, marked replaced first, is never taken again), so epochs
 * only rise along a lineage and stores fencing by key range (views, dead letters) accept the child's writes
 * and refuse the deposed parent's.
 *
 * @internal
 */
export function leaseDocument(
  naming: LeaseNaming,
  token: string,
  range: FeedRange,
  continuation: Position | null,
  properties: Readonly<Record<string, string>>,
  epoch = 0,
  owner: string | null = null,
): NewLease {
  return {
    id: naming.prefix + token,
    leaseToken: token,
    feedRange: range,
    owner,
    continuation,
    timestampMs: naming.now(),
    epoch,
    mode: naming.mode,
    properties: { ...properties },
  };
}

/**
 * @internal Id of the record a deleted lease leaves in the `dotnet` scheme (`<prefix>.gone.<token>`): outside
 * `<prefix>..`, which the .NET processor lists and reads as leases, and without a `LeaseToken` (KEDA skips it).
 * It keeps the highest epoch the lease id had when it was deleted; see {@link deleteLease} and {@link buriedEpoch}.
 */
export const goneId = (ids: LeaseIds, token: string): string => `${ids.markerPrefix}.gone.${token}`;

/**
 * Deletes one of the processor's leases, conditional on its etag. In the `rxfeed` scheme, with a store that keeps
 * tombstones ({@link LeaseStore.tombstone}), the lease leaves a tombstone with its epoch: a create of the same id
 * that lands later (sent before the delete by a host that paused, or slow on its way: a split child, a
 * bootstrap's lease) is refused below that epoch, so the epochs of a lease id never go back. In the `dotnet`
 * scheme the .NET processor lists every document under `<prefix>..` and reads each as a lease, a tombstone
 * included (docs/compatibility.md): the delete is plain, and the epoch is kept first in the id's
 * {@link goneId} record, raised (never lowered) before the delete is sent. A late create cannot be refused
 * there, but no host takes a lease found below its record ({@link buriedEpoch}): it is deleted instead. Markers
 * are never deleted this way.
 *
 * @internal
 */
export async function deleteLease(store: LeaseStore, ids: LeaseIds, lease: Lease): Promise<void> {
  if (ids.scheme === 'rxfeed') return store.tombstone ? store.tombstone(lease) : store.delete(lease);
  // At epoch 0 (never taken by rxfeed, or a .NET lease) no lease can lie below it: no record.
  if (lease.epoch > 0) await raiseEpochRecord(store, goneDocument(goneId(ids, lease.leaseToken), lease));
  await store.delete(lease);
}

/**
 * Raises the record `document.id` (an epoch floor, a {@link goneId} record) to `document.epoch`, never lowering
 * it: a conditional replace of the stored record, or a create when there is none; retried on a concurrent write.
 *
 * @internal
 */
export async function raiseEpochRecord(store: LeaseStore, document: NewLease): Promise<void> {
  const { id, epoch, timestampMs } = document;
  for (let attempt = 1; ; attempt++) {
    const stored = await store.read(id);
    if (stored && stored.epoch >= epoch) return;
    try {
      if (stored) await store.replace({ ...stored, epoch, timestampMs });
      else if (!(await store.createIfAbsent(document))) throw new LeaseConflictError(id, 'changed');
      return;
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || attempt >= 5) throw error;
    }
  }
}

/**
 * The epoch floor document (`<prefix>.floor`), `undefined` when there is none (or the id holds another
 * processor's document). Read beside other requests; {@link confirmEpochFloor} gives the epoch to create at.
 *
 * @internal
 */
export async function readEpochFloor(store: LeaseStore, ids: LeaseIds): Promise<Lease | undefined> {
  try {
    return await store.read(floorId(ids.markerPrefix));
  } catch (error) {
    if (error instanceof CorruptLeaseError) return undefined;
    throw error;
  }
}

/**
 * The epoch floor as it stands now, from `read` (a {@link readEpochFloor}), for leases about to be created at it
 * (a bootstrap or a gap repair, under the bootstrap lock); 0 when there is none. In the `rxfeed` scheme `read`
 * as it is: a create below a deleted lease's epoch is refused by its tombstone whatever floor it was read at. In
 * the `dotnet` scheme deletes are plain, and a read that lags a reset (the floor raised, then the leases
 * deleted, a moment ago) would create leases again below the epochs they had, then owned at an epoch a former
 * owner held (sim seed 5149). Writes are never stale, so the read is confirmed by one ({@link confirmRead}):
 * the floor replaced as read, or, where none was read, a replace that can only answer "missing". A conflict means
 * the read lagged: read again, at most `attempts` times, then the conflict is thrown (the round fails, and is
 * retried once reads caught up). Only the holder of the lock confirms, so hosts do not contend for the floor; a reset may.
 *
 * @internal
 */
export async function confirmEpochFloor(store: LeaseStore, ids: LeaseIds, now: () => number, read: Lease | undefined, attempts = 3): Promise<number> {
  if (ids.scheme !== 'dotnet') return read?.epoch ?? 0;
  const floor = await confirmRead(store, read, {
    absent: () => floorDocument(ids, 0, now()),
    readAgain: () => readEpochFloor(store, ids),
    attempts,
  });
  return floor?.epoch ?? 0;
}

function goneDocument(id: string, lease: Pick<Lease, 'epoch' | 'timestampMs'>): NewLease {
  // An empty token: the Cosmos store writes it without `LeaseToken`, as the .NET scheme's markers.
  return { id, leaseToken: '', feedRange: undefined, owner: null, continuation: null, timestampMs: lease.timestampMs, epoch: lease.epoch, mode: undefined, properties: {} };
}

/**
 * The epoch `lease`'s id had when it was last deleted, if `lease` lies below it: `lease` was created late (its
 * create sent before that delete landed after it), and must not be owned; `undefined` otherwise (and always in the
 * `rxfeed` scheme, where a tombstone refused such a create). A lease created again legitimately (a bootstrap or a
 * gap repair after a reset, at the epoch floor or above; an EPK token created again by a descendant) is at or
 * above the record. The record's read must be no older than the version of `lease` judged: a session sees its
 * own writes at once but other hosts' writes late (reads may lag), so a late create of this host's own (a paused
 * split, sim seed 1635) is listed before the record raised ahead of the delete it followed. So a read that does
 * not bury `lease` is confirmed by a write, which is never stale ({@link confirmRead}): the record replaced as
 * read, or, where none was read, a replace that can only answer "missing". A conflict means the read lagged: read
 * again, at most 3 times, then the conflict is thrown (nothing is taken; the next round asks again).
 *
 * @internal
 */
export async function buriedEpoch(store: LeaseStore, ids: LeaseIds, lease: Lease): Promise<number | undefined> {
  if (ids.scheme !== 'dotnet') return undefined;
  const id = goneId(ids, lease.leaseToken);
  const buries = (record: Lease) => lease.epoch < record.epoch;
  const record = await confirmRead(store, await store.read(id), {
    absent: () => goneDocument(id, { epoch: 0, timestampMs: lease.timestampMs }),
    readAgain: () => store.read(id),
    settles: buries,
  });
  return record !== undefined && buries(record) ? record.epoch : undefined;
}
