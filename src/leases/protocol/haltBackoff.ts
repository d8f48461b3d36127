// Protocol: the halt signal — a lease given back by a partition its failure policy halted (close reason
// `Halted`) says so, and every host leaves it alone for a backoff that grows with the consecutive halts,
// so a poison change does not make the lease bounce around the fleet. See docs/lease-protocol.md, "Signals".
import type { Lease } from '../Lease.js';

/**
 * Lease property of a lease released because its partition halted: the epoch of the ownership that halted
 * (the release keeps the epoch). The backoff holds while the lease is still that version of itself (nobody
 * took it since: same epoch, no owner). Taking the lease keeps it (with {@link HALTS}), so a second halt
 * counts as consecutive; a checkpoint past the halt position drops both. @internal
 */
export const HALTED_AT_EPOCH = 'rxfeed.haltedAtEpoch';

/** Lease property: how many ownerships in a row halted on this lease (a decimal string, ≥ 1). @internal */
export const HALTS = 'rxfeed.halts';

/** Ceiling (ms) of the fleet-wide backoff of a halted lease: 5 minutes. @internal */
export const HALT_BACKOFF_CAP_MS = 300_000;

/**
 * How long (ms) every host leaves a lease released by its `halts`-th consecutive halt before taking it:
 * the acquire interval × 2^halts, at most {@link HALT_BACKOFF_CAP_MS} (with the default 13 s interval:
 * 26 s, 52 s, 104 s, 208 s, then 5 minutes).
 *
 * @example
 * ```ts
 * haltBackoffMs(1, 13_000); // 26_000
 * ```
 * @internal
 */
export function haltBackoffMs(halts: number, acquireMs: number): number {
  const n = Math.max(1, Math.min(30, Math.floor(halts)));
  return Math.min(HALT_BACKOFF_CAP_MS, acquireMs * 2 ** n);
}

/** The consecutive halts a lease records (0 when none). @internal */
export function haltCount(lease: Lease): number {
  const n = Number(lease.properties[HALTS]);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/**
 * Whether `lease` is the version its halting owner released: unowned, at the epoch of the halt. A lease
 * taken since (epoch raised, by a host or an admin release) or owned is not.
 *
 * @internal
 */
export function isHaltRelease(lease: Lease): boolean {
  const mark = lease.properties[HALTED_AT_EPOCH];
  return lease.owner === null && mark !== undefined && mark !== '' && Number(mark) === lease.epoch;
}

/**
 * Until when (scheduler time) every host leaves `seen` alone, or `undefined` when it is free to take now:
 * a lease its halting owner released ({@link isHaltRelease}) is left for {@link haltBackoffMs} from the
 * moment this host first saw that version. `seen` is in this host's local time (Observations: its
 * `timestampMs` is when this host first saw the version), so no other host's clock is read.
 *
 * @example
 * ```ts
 * const takeable = seen.filter((l) => haltBackoffUntil(l, now, 13_000) === undefined);
 * ```
 * @internal
 */
export function haltBackoffUntil(seen: Lease, nowMs: number, acquireMs: number): number | undefined {
  if (!isHaltRelease(seen)) return undefined;
  const until = seen.timestampMs + haltBackoffMs(haltCount(seen), acquireMs);
  return nowMs < until ? until : undefined;
}

/**
 * The properties a halting owner releases its lease with: `properties` (already without the other
 * signals) plus the halt signal at `epoch`, one more consecutive halt than the lease recorded.
 *
 * @internal
 */
export function withHalt(properties: Readonly<Record<string, string>>, epoch: number): Record<string, string> {
  const n = Number(properties[HALTS]);
  const halts = Number.isInteger(n) && n > 0 ? n + 1 : 1;
  return { ...properties, [HALTED_AT_EPOCH]: String(epoch), [HALTS]: String(halts) };
}

/**
 * `properties` without the halt signal: what a checkpoint past the halt position (the partition moved on),
 * a split or merge child, and an operator's release, rewind or reset leave.
 *
 * @internal
 */
export function withoutHalt(properties: Readonly<Record<string, string>>): Record<string, string> {
  const { [HALTED_AT_EPOCH]: _epoch, [HALTS]: _halts, ...rest } = properties;
  return rest;
}

/**
 * The lease a checkpoint at `position` writes, from `lease`: without the halt signal when `position` is past
 * the halt (another position than the one the halting owner left, which the lease still holds while the
 * signal is there). Unchanged otherwise.
 *
 * @internal
 */
export function clearHaltOnProgress(lease: Lease, position: string | null): Lease {
  if (lease.properties[HALTED_AT_EPOCH] === undefined && lease.properties[HALTS] === undefined) return lease;
  if (position === lease.continuation) return lease;
  return { ...lease, properties: withoutHalt(lease.properties) };
}

/** @internal The leases a balancing round leaves out under a halt backoff, and when the first backoff ends. */
export interface HeldBack {
  /** Ids of the leases under backoff: neither taken nor counted as free to balance for. */
  readonly ids: ReadonlySet<string>;
  /** When (scheduler time) the earliest backoff ends, or `undefined` when none holds. */
  readonly untilMs: number | undefined;
}

/**
 * The leases of `seen` (in local time) under a halt backoff at `nowMs` ({@link haltBackoffUntil}).
 *
 * @example
 * ```ts
 * const held = haltsHeldBack(seen, now, 13_000);
 * const live = seen.filter((l) => !held.ids.has(l.id));
 * ```
 * @internal
 */
export function haltsHeldBack(seen: readonly Lease[], nowMs: number, acquireMs: number): HeldBack {
  const ids = new Set<string>();
  let untilMs: number | undefined;
  for (const lease of seen) {
    const until = haltBackoffUntil(lease, nowMs, acquireMs);
    if (until === undefined) continue;
    ids.add(lease.id);
    if (untilMs === undefined || until < untilMs) untilMs = until;
  }
  return { ids, untilMs };
}
