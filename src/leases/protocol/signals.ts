// Protocol: the signals hosts leave each other in a lease's `properties` (handoff request, release notice,
// untaken mark, replacement mark, published load): their names, how to read them and how to drop them. Other hosts, .NET,
// Functions and KEDA read these documents: see docs/lease-protocol.md, "Signals".
import type { FeedRange } from '../../core/Partition.js';
import type { Lease } from '../Lease.js';
import { withoutHalt } from './haltBackoff.js';

/** Lease property naming the host a lease was asked for (a pending handoff). @internal */
export const HANDOFF_TO = 'rxfeed.handoffTo';
/** Lease property: when (ms since the epoch, as a string) the handoff was asked for. @internal */
export const HANDOFF_AT = 'rxfeed.handoffAt';

/** Lease property: a host that released leases (a graceful stop) told this lease's owner so. @internal */
export const RELEASED_BY = 'rxfeed.releasedBy';
/** Lease property: when (ms since the epoch, as a string) the release notice was written. @internal */
export const RELEASED_AT = 'rxfeed.releasedAt';

/**
 * Lease property of a lease no host has taken yet: a split or merge child (the epoch it was created, or last
 * moved forward, at), or a lease its owner handed to the host that asked for it (the epoch it was handed at).
 * Taking the lease drops it, so a lease found with it, at that epoch, is read by no process. @internal
 */
export const UNTAKEN_AT_EPOCH = 'rxfeed.untakenAtEpoch';

/**
 * Lease property of a split or merge child: the token of the lease whose replacement created it. Kept for
 * good (not a signal): when that parent's delete never landed (its owner lost it, or crashed, between the
 * creates and the delete), the parent and its child coexist, and a later replacement of either must know which
 * one is the older: a child's replacement must not take its parent (same range) for a descendant of its own,
 * and the parent's must not move a child created by another lease back to the parent's older checkpoint.
 * @internal
 */
export const PARENT_LEASE = 'rxfeed.parentLease';

/**
 * Lease property of a gone partition's lease (split or merged) that is being replaced by its children: the
 * epoch its owner marked it at, with a conditional write under that epoch, before it created any child. A
 * lease so marked (`isReplaced`) is never acquired, asked for or taken by force again; any host only finishes
 * its replacement (creates the children missing, above its epoch, then deletes it). So a gone parent is never
 * read under an epoch above its children's. Children do not inherit it (`inheritedProperties`). @internal
 */
export const REPLACED_AT_EPOCH = 'rxfeed.replacedAtEpoch';

/**
 * Lease property written with the replacement mark ({@link REPLACED_AT_EPOCH}), in the same conditional write:
 * the children that replace the lease, decided once from the listing its owner read then (JSON, `[[token, min,
 * max], …]`). Every later attempt — the owner's retries, a host finishing the replacement — creates exactly these,
 * whatever its own listing shows: two listings taken at different moments (one lagging a merge, or taken
 * before it) give different children for one range (a partition-id lease and an EPK lease over the same keys),
 * and two replacements of one parent must never create both. Read with {@link recordedChildren}. @internal
 */
export const REPLACEMENT_CHILDREN = 'rxfeed.replacementChildren';

/** One child of a replacement as {@link REPLACEMENT_CHILDREN} records it. @internal */
export interface RecordedChild {
  readonly token: string;
  readonly range: FeedRange;
}

/**
 * The value of {@link REPLACEMENT_CHILDREN} for `children`.
 *
 * @example
 * ```ts
 * formatChildren([{ token: '2', range: { minInclusive: '', maxExclusive: '7F' } }]); // '[["2","","7F"]]'
 * ```
 * @internal
 */
export function formatChildren(children: readonly RecordedChild[]): string {
  return JSON.stringify(children.map((c) => [c.token, c.range.minInclusive, c.range.maxExclusive]));
}

/**
 * The children recorded in `lease`'s replacement mark ({@link REPLACEMENT_CHILDREN}), or `undefined` when it
 * records none (marked before the property existed) or a value that is not a list of children.
 *
 * @internal
 */
export function recordedChildren(lease: Lease): readonly RecordedChild[] | undefined {
  const value = lease.properties[REPLACEMENT_CHILDREN];
  if (value === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length === 0) return undefined;
  const children: RecordedChild[] = [];
  for (const entry of parsed as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 3 || !entry.every((x) => typeof x === 'string')) return undefined;
    const [token, minInclusive, maxExclusive] = entry as [string, string, string];
    if (token === '') return undefined;
    children.push({ token, range: { minInclusive, maxExclusive } });
  }
  return children;
}

/**
 * Lease property of a lease marked replaced ({@link REPLACED_AT_EPOCH}) once all its children were created:
 * their tokens, comma-separated. A host retrying or finishing the replacement then only deletes the lease:
 * a child missing by then was taken, replaced and deleted in turn, and creating it again would bring back a
 * partition its descendants already read past. @internal
 */
export const REPLACED_BY = 'rxfeed.replacedBy';

/**
 * Lease property where an owner publishes the lease's load (a non-negative decimal string, e.g. changes per
 * second or backlog in changes) when it renews or checkpoints, so that every host sees every lease's load in
 * the listing it reads anyway, without extra requests.
 */
export const LOAD_PROPERTY = 'rxfeed.load';

/**
 * The host a live lease has been asked for, if the request is younger than `expirationMs` (an older one
 * was not honoured: the asker may then take the lease by force).
 *
 * @example
 * ```ts
 * const to = handoffRequest(lease, Date.now(), 60_000); // e.g. 'host-b', or undefined
 * ```
 * @internal
 */
export function handoffRequest(lease: Lease, nowMs: number, expirationMs: number): string | undefined {
  const to = lease.properties[HANDOFF_TO];
  const at = Number(lease.properties[HANDOFF_AT]);
  if (!to || to === lease.owner || !Number.isFinite(at) || nowMs - at >= expirationMs) return undefined;
  return to;
}

/**
 * Whether no process has taken `lease` since it was created as a split child or handed to its owner: its
 * owner may take it, or release it, without fencing anyone.
 *
 * @example
 * ```ts
 * const handedToMe = leases.filter((l) => l.owner === me && isUntaken(l));
 * ```
 * @internal
 */
export function isUntaken(lease: Lease): boolean {
  return lease.properties[UNTAKEN_AT_EPOCH] === String(lease.epoch);
}

/**
 * Whether `lease` is a gone partition's lease marked as being replaced by its children (see
 * {@link REPLACED_AT_EPOCH}): never acquired again, only finished. The mark holds at its epoch and above (an
 * admin release or rewind raises the epoch of a lease without reading it); a document whose epoch fell
 * below the mark (written by a .NET host, which keeps no epoch) is not marked any more.
 *
 * @example
 * ```ts
 * const toBalance = leases.filter((l) => !isReplaced(l));
 * ```
 * @internal
 */
export function isReplaced(lease: Lease): boolean {
  const mark = lease.properties[REPLACED_AT_EPOCH];
  if (mark === undefined || mark === '') return false;
  const epoch = Number(mark);
  return Number.isInteger(epoch) && epoch <= lease.epoch;
}

/**
 * The host that left a release notice in this lease, if there is one.
 *
 * @internal
 */
export function releaseNotice(lease: Lease): string | undefined {
  return lease.properties[RELEASED_BY] || undefined;
}

/**
 * The load of a lease as published in its {@link LOAD_PROPERTY} property, or 0.
 *
 * @example
 * ```ts
 * const total = leases.reduce((sum, l) => sum + publishedLoad(l), 0);
 * ```
 */
export function publishedLoad(lease: Lease): number {
  const value = Number(lease.properties[LOAD_PROPERTY]);
  return Number.isFinite(value) && value > 0 ? value : 0;
}

/** @internal A load as written to {@link LOAD_PROPERTY}: a short decimal string (3 significant digits are plenty to balance on). */
export function formatLoad(load: number): string {
  return load === 0 ? '0' : String(Number(load.toPrecision(3)));
}

/**
 * `properties` without the signals hosts leave each other in a lease (a handoff request, a release
 * notice, the mark of a child not taken yet): what a lease keeps when it changes hands. The replacement mark
 * ({@link REPLACED_AT_EPOCH}) stays: a marked lease released or handed back is still being replaced. The halt
 * signal (haltBackoff.ts) stays too: the host that takes a halted lease keeps the count of consecutive halts
 * until it checkpoints past the halt.
 *
 * @example
 * ```ts
 * const released = { ...lease, owner: null, properties: withoutSignals(lease.properties) };
 * ```
 * @internal
 */
export function withoutSignals(properties: Readonly<Record<string, string>>): Record<string, string> {
  const { [HANDOFF_TO]: _to, [HANDOFF_AT]: _at, [RELEASED_BY]: _by, [RELEASED_AT]: _when, [UNTAKEN_AT_EPOCH]: _untaken, ...rest } = properties;
  return rest;
}

/**
 * What a split or merge child inherits of its parent's `properties`: all but the signals
 * ({@link withoutSignals}), the parent's halt signal (haltBackoff.ts: a child holds part of the range, and
 * starts without a backoff) and the parent's replacement marks ({@link REPLACED_AT_EPOCH}, {@link REPLACEMENT_CHILDREN}, {@link REPLACED_BY}).
 *
 * @example
 * ```ts
 * const childProperties = { ...inheritedProperties(parent.properties), [UNTAKEN_AT_EPOCH]: String(childEpoch) };
 * ```
 * @internal
 */
export function inheritedProperties(properties: Readonly<Record<string, string>>): Record<string, string> {
  const { [REPLACED_AT_EPOCH]: _replaced, [REPLACED_BY]: _by, [REPLACEMENT_CHILDREN]: _children, ...rest } = withoutHalt(withoutSignals(properties));
  return rest;
}

/**
 * `properties` without a release notice (its owner has read it).
 *
 * @internal
 */
export function withoutNotice(properties: Readonly<Record<string, string>>): Record<string, string> {
  const { [RELEASED_BY]: _by, [RELEASED_AT]: _at, ...rest } = properties;
  return rest;
}

/**
 * `properties` without a handoff request (its host withdrew it).
 *
 * @internal
 */
export function withoutRequest(properties: Readonly<Record<string, string>>): Record<string, string> {
  const { [HANDOFF_TO]: _to, [HANDOFF_AT]: _at, ...rest } = properties;
  return rest;
}

/**
 * Whether `fresh` is `listed` with at most a release notice added or changed: the same owner, epoch, write
 * time and checkpoint, and the same properties but for the notice. A host that planned to take `listed`
 * may take `fresh` for the same reasons.
 *
 * @internal
 */
export function onlyNoticeChanged(listed: Lease, fresh: Lease): boolean {
  if (fresh.owner !== listed.owner || fresh.epoch !== listed.epoch || fresh.timestampMs !== listed.timestampMs || fresh.continuation !== listed.continuation) {
    return false;
  }
  const a = withoutNotice(listed.properties);
  const b = withoutNotice(fresh.properties);
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}
