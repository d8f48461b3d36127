// Planner: the count balancing rule — from one listing, what this host takes, asks for, hands over and
// releases. Pure. The signals and expiry it reads are the protocol's (./protocol).
import { hashString } from '../internal/random.js';
import { handoffRequest, isLeaseExpired, isUntaken } from './protocol/index.js';
import type { Lease } from './Lease.js';

/** Inputs of {@link planBalance} besides the leases themselves. */
export interface BalanceOptions {
  /** A lease whose `timestampMs` is this old (ms) or older, or that has no owner, is free to take. */
  readonly expirationMs: number;
  /** Take at least this many leases when there are enough (0 = no minimum). Default 0. */
  readonly minLeases?: number;
  /** Never hold more than this many leases (0 = no limit). Default 0. */
  readonly maxLeases?: number;
  /**
   * Ids of the leases this host really holds in memory. A lease the store says this owner holds but that
   * is not in `owned` is taken first if it was handed to this host and no process took it since (see
   * `isUntaken`); otherwise another process under the same name may be reading it (a previous run
   * that crashed, or a misconfigured twin), and it is left alone until it expires. When omitted, every
   * unexpired lease owned by `owner` counts as owned by this run.
   */
  readonly owned?: ReadonlySet<string>;
}

/** What one host should do in one balancing round; see {@link planBalance}. */
export interface BalancePlan {
  /** Free (unowned, expired or left over) leases to acquire. */
  readonly take: readonly Lease[];
  /**
   * Leases live on another host to move here. The coordinator asks for them (a handoff request the owner
   * honours at its next scan, after draining) and takes one by force only if a request of its own went
   * unanswered for a whole expiration.
   */
  readonly steal: readonly Lease[];
  /** Leases this host holds and should hand back (drained first), because it holds more than `maxLeases`. */
  readonly release: readonly Lease[];
  /** Leases this host holds that another host asked for (lease property `rxfeed.handoffTo`): drain, then hand over. */
  readonly handoff: readonly Lease[];
  /** Leases this host asked for that their owners have not handed over yet (fresh handoff requests). */
  readonly awaiting: number;
  /** Leases this host aims to hold. */
  readonly target: number;
  /** Hosts holding at least one unexpired lease, this one included. */
  readonly liveOwners: number;
  /** True when nothing is free and live hosts differ by at most one lease (nothing left for anyone to do). */
  readonly settled: boolean;
  /**
   * Earliest instant (ms) at which a lease another host holds expires if it is not renewed, or
   * `undefined` when others hold nothing. Scanning right then gives failover in one expiration.
   */
  readonly nextExpiryMs: number | undefined;
}

/**
 * Decides what `owner` should take, steal and release, given every lease of the processor.
 *
 * Equal share: target = ceil(leases / live owners), clamped to `[minLeases, maxLeases]`. A lease with a
 * pending handoff request counts for the host that asked for it (so hosts that hold nothing yet are
 * already visible to the others through their requests). Leases this host owned in a previous run come
 * first, then free (unowned or expired) ones, in an order that differs per host so that hosts starting
 * together, or noticing a crash together, do not all race for the same leases. Stealing runs only when nothing is
 * free: every host computes the same deterministic plan of moves (always one lease from the most loaded
 * owner to the least loaded, while they differ by two or more) and carries out only the moves towards
 * itself. Unlike the .NET rule of one steal per round, a whole imbalance is fixed in one round; because
 * a move only ever goes from a host with at least two more leases to one with fewer, the spread shrinks
 * with every move, so a lease never bounces back and forth between two hosts.
 *
 * Pure: no I/O, no clock; the same inputs give the same plan.
 *
 * @example
 * ```ts
 * const plan = planBalance(listing.leases, 'host-a', Date.now(), { expirationMs: 60_000 });
 * for (const lease of plan.take) await acquire(lease);
 * ```
 */
export function planBalance(
  leases: readonly Lease[],
  owner: string,
  nowMs: number,
  options: BalanceOptions,
): BalancePlan {
  const { expirationMs, minLeases = 0, maxLeases = 0, owned } = options;
  const mine: Lease[] = [];
  const incoming: Lease[] = [];
  const handoff: Lease[] = [];
  const leftOver: Lease[] = [];
  const free: Lease[] = [];
  /** Per other host: the leases counted as its share (owned and not promised away, or promised to it). */
  const others = new Map<string, Lease[]>();
  const countFor = (name: string, lease: Lease) => {
    const list = others.get(name) ?? [];
    list.push(lease);
    others.set(name, list);
  };
  let nextExpiryMs: number | undefined;

  for (const lease of leases) {
    const expired = isLeaseExpired(lease, nowMs, expirationMs);
    const requester = expired ? undefined : handoffRequest(lease, nowMs, expirationMs);
    if (lease.owner === owner && (owned === undefined ? !expired : owned.has(lease.id))) {
      // A lease this run owns stays ours even if the listing says it is overdue: re-acquiring would bump the
      // epoch and fence off our own reader. Keeping it alive (or giving it up) is the renewal's job.
      if (requester) {
        handoff.push(lease);
        countFor(requester, lease);
      } else {
        mine.push(lease);
      }
    } else if (expired) {
      free.push(lease);
    } else if (lease.owner === owner && isUntaken(lease)) {
      leftOver.push(lease);
    } else {
      // Live elsewhere; under this host's own name too (another process may be reading it): taken once expired.
      const expiry = lease.timestampMs + expirationMs;
      if (nextExpiryMs === undefined || expiry < nextExpiryMs) nextExpiryMs = expiry;
      if (requester === owner) incoming.push(lease);
      else countFor(requester ?? lease.owner!, lease);
    }
  }
  others.delete(owner);

  const liveOwners = others.size + 1;
  let target = Math.ceil(leases.length / liveOwners);
  if (maxLeases > 0) target = Math.min(target, maxLeases);
  if (minLeases > 0) target = Math.max(target, Math.min(minLeases, leases.length));
  const base = { target, liveOwners, nextExpiryMs, handoff, awaiting: incoming.length };
  const myCount = mine.length + incoming.length;

  if (maxLeases > 0 && mine.length > maxLeases) {
    // Hand back the highest ids; which ones does not matter, only that the choice is stable.
    const release = [...mine].sort(byId).slice(maxLeases);
    return { ...base, take: [], steal: [], release, settled: false };
  }

  // Free leases (unowned or expired) in a per-host order: hosts noticing together (a crash seen by all
  // survivors at its expiry) then mostly go for different leases instead of colliding on the same one.
  const candidates = [...leftOver.sort(byId), ...free.sort((a, b) => spread(owner, a) - spread(owner, b) || byId(a, b))];
  const take = candidates.slice(0, Math.max(0, target - myCount));
  if (candidates.length > 0) {
    return { ...base, take, steal: [], release: [], settled: false };
  }

  const steal = planSteals(others, owner, myCount, target);
  const counts = [myCount, ...[...others.values()].map((l) => l.length)];
  const settled =
    steal.length === 0 && handoff.length === 0 && incoming.length === 0 && Math.max(...counts) - Math.min(...counts) <= 1;
  return { ...base, take: [], steal, release: [], settled };
}

/**
 * The moves every host agrees on for this snapshot, filtered to those towards `owner`. Hosts are ordered
 * by name and leases by id so that each host computes the same plan and no two take the same lease.
 */
function planSteals(others: ReadonlyMap<string, Lease[]>, owner: string, myCount: number, target: number): Lease[] {
  const pools = new Map<string, Lease[]>([[owner, []]]);
  for (const [name, owned] of others) pools.set(name, [...owned].sort(byId));
  const counts = new Map<string, number>([[owner, myCount]]);
  for (const [name, owned] of others) counts.set(name, owned.length);
  const names = [...counts.keys()].sort();
  const stolen: Lease[] = [];

  for (;;) {
    let donor: string | undefined;
    let receiver = names[0]!;
    for (const name of names) {
      if (pools.get(name)!.length > 0 && (donor === undefined || counts.get(name)! > counts.get(donor)!)) donor = name;
      if (counts.get(name)! < counts.get(receiver)!) receiver = name;
    }
    if (donor === undefined || counts.get(donor)! - counts.get(receiver)! < 2 || counts.get(receiver)! >= target) break;
    counts.set(donor, counts.get(donor)! - 1);
    counts.set(receiver, counts.get(receiver)! + 1);
    const lease = pools.get(donor)!.pop()!;
    if (receiver === owner) stolen.push(lease);
  }
  return stolen;
}

function byId(a: Lease, b: Lease): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** A per-host pseudo-random rank of a lease (FNV-1a of owner + id, then avalanched), to spread first grabs. */
function spread(owner: string, lease: Lease): number {
  return hashString(`${owner}\u0000${lease.id}`);
}
