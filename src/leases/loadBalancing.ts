// Planner: the load balancing rule — like the count rule, but once nothing is free it evens out the load
// owners publish in their leases (protocol/signals.ts, LOAD_PROPERTY). Pure.
import { planBalance, type BalanceOptions, type BalancePlan } from './balancing.js';
import { handoffRequest, isLeaseExpired, isUntaken, publishedLoad } from './protocol/index.js';
import type { Lease } from './Lease.js';

/** Inputs of {@link planLoadBalance}: those of {@link planBalance}, plus how to weigh a lease. */
export interface LoadBalanceOptions extends BalanceOptions {
  /**
   * The load of one lease (≥ 0; change rate or lag, any unit as long as all leases use the same).
   * Default: the number in the lease property `rxfeed.load` ({@link publishedLoad}), 0 when absent or unreadable.
   */
  readonly loadOf?: (lease: Lease) => number;
  /**
   * A move must shrink the gap between the most and the least loaded host by at least this fraction of
   * the mean load per host, so that noisy rates do not make leases wander. Default 0.1.
   */
  readonly minGain?: number;
}

/**
 * Like {@link planBalance}, but once no lease is free it evens out the hosts' **load** (change rate or lag
 * per lease) instead of their lease counts, so one host does not end up with all the hot partitions.
 *
 * Free leases, left-over leases and `maxLeases` releases follow {@link planBalance} (count rules: a starting
 * processor spreads its leases at once, before any load is known). With nothing free, every host computes
 * the same moves from the same listing: repeatedly, from the most loaded host to the least loaded one, the
 * lease whose load comes closest to half their gap, as long as that shrinks the gap by at least `minGain`
 * of the mean; each lease also weighs a tenth of the mean lease load, so cold leases still spread. Each
 * move strictly lowers the sum of squared host loads, so the plan ends and never moves a lease back within
 * one snapshot. This host carries out only the moves towards itself (`steal`, as handoff requests). When
 * no lease has a load yet, the count plan is returned unchanged.
 *
 * Pure: no I/O, no clock; the same inputs give the same plan.
 *
 * @example
 * ```ts
 * const plan = planLoadBalance(listing.leases, 'host-a', Date.now(), { expirationMs: 60_000 });
 * for (const lease of plan.steal) await askForLease(lease);
 * ```
 */
export function planLoadBalance(leases: readonly Lease[], owner: string, nowMs: number, options: LoadBalanceOptions): BalancePlan {
  const byCount = planBalance(leases, owner, nowMs, options);
  const { expirationMs, maxLeases = 0, owned, loadOf = publishedLoad, minGain = 0.1 } = options;
  // Something free, left over or over the maximum: the count rules decide this round.
  if (byCount.take.length > 0 || byCount.release.length > 0 || leases.some((l) => isFreeFor(l, owner, nowMs, expirationMs, owned))) {
    return byCount;
  }
  const loads = new Map<Lease, number>();
  let total = 0;
  for (const lease of leases) {
    const load = loadOf(lease);
    const clean = Number.isFinite(load) && load > 0 ? load : 0;
    loads.set(lease, clean);
    total += clean;
  }
  if (total === 0 || leases.length === 0) return byCount;
  const baseline = total / leases.length / 10;
  const weight = (lease: Lease): number => loads.get(lease)! + baseline;

  // Each live lease counts for its owner, or for the host it was asked for (a pending handoff).
  const shares = new Map<string, Lease[]>([[owner, []]]);
  let pending = false;
  for (const lease of leases) {
    const requester = handoffRequest(lease, nowMs, expirationMs);
    if (requester !== undefined && (requester === owner || lease.owner === owner)) pending = true;
    const holder = requester ?? lease.owner!;
    const list = shares.get(holder) ?? [];
    list.push(lease);
    shares.set(holder, list);
  }
  const names = [...shares.keys()].sort();
  const hostLoad = new Map(names.map((n) => [n, shares.get(n)!.reduce((s, l) => s + weight(l), 0)]));
  const movable = new Map(names.map((n) => [n, shares.get(n)!.filter((l) => handoffRequest(l, nowMs, expirationMs) === undefined).sort(byId)]));
  const mean = (total + baseline * leases.length) / names.length;
  const steal: Lease[] = [];
  let moves = 0;

  for (let guard = 0; guard < leases.length; guard++) {
    let donor = names[0]!;
    let receiver = names[0]!;
    for (const name of names) {
      if (hostLoad.get(name)! > hostLoad.get(donor)!) donor = name;
      if (hostLoad.get(name)! < hostLoad.get(receiver)!) receiver = name;
    }
    const gap = hostLoad.get(donor)! - hostLoad.get(receiver)!;
    if (maxLeases > 0 && shares.get(receiver)!.length >= maxLeases) break;
    // The lease that leaves the two hosts closest to each other; the new gap is |gap - 2w|.
    let best: Lease | undefined;
    for (const lease of movable.get(donor)!) {
      if (best === undefined || Math.abs(gap - 2 * weight(lease)) < Math.abs(gap - 2 * weight(best))) best = lease;
    }
    if (best === undefined || gap - Math.abs(gap - 2 * weight(best)) < minGain * mean) break;
    movable.set(donor, movable.get(donor)!.filter((l) => l !== best));
    shares.set(donor, shares.get(donor)!.filter((l) => l !== best));
    shares.get(receiver)!.push(best);
    hostLoad.set(donor, hostLoad.get(donor)! - weight(best));
    hostLoad.set(receiver, hostLoad.get(receiver)! + weight(best));
    moves++;
    if (receiver === owner) steal.push(best);
  }
  return { ...byCount, steal, settled: moves === 0 && byCount.handoff.length === 0 && !pending };
}

/** Free or left over for `owner`, exactly as {@link planBalance} classifies leases. */
function isFreeFor(lease: Lease, owner: string, nowMs: number, expirationMs: number, owned: ReadonlySet<string> | undefined): boolean {
  const expired = isLeaseExpired(lease, nowMs, expirationMs);
  const mine = lease.owner === owner && (owned === undefined ? !expired : owned.has(lease.id));
  return !mine && (expired || (lease.owner === owner && isUntaken(lease)));
}

function byId(a: Lease, b: Lease): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
