import { TIMINGS, UNREAD_BOUND_MS } from './config.js';
import type { Sim } from './context.js';
import type { Hosts } from './hosts.js';
import type { ObservedStores } from './observedStores.js';
import type { World } from './world.js';

/**
 * The invariants checked after every tick: `credit-above-budget` (a host holds more changes than its
 * budget) and `owned-but-unread` (a live host owns an unexpired lease with no read of its partition, nor a view
 * write of it between reads, for {@link UNREAD_BOUND_MS}).
 */
export class Throughout {
  readonly #ownedSince = new Map<string, number>();

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
    private readonly stores: ObservedStores,
    private readonly hosts: Hosts,
  ) {}

  check(): void {
    const { clock, violations } = this.sim;
    const now = clock.now();
    const budget = this.hosts.settings.budget;
    for (const h of this.hosts.all) {
      if (h.clock.state === 'dead') continue;
      if (h.processor.inFlightChanges > budget) {
        violations.report('credit-above-budget', `${h.name}: ${h.processor.inFlightChanges} changes in flight > maxInFlightChanges ${budget}`, `credit:${h.name}`);
      }
    }
    const seen = new Set<string>();
    for (const lease of this.stores.leaseSnapshot()) {
      // Twins (two live hosts under one name): the lease is read by one of them.
      const named = this.hosts.all.filter((x) => x.name === lease.owner && x.clock.state === 'running' && !x.stopped);
      // Expiry as the owner would date it (by its own wall clock, which may be off: the `clock` fault set).
      if (named.length === 0 || named[0]!.clock.wallNow() - lease.timestampMs >= TIMINGS.leaseExpirationMs) continue;
      const key = `${lease.id}|${lease.owner}|${lease.epoch}`;
      seen.add(key);
      const since = this.#ownedSince.get(key) ?? now;
      this.#ownedSince.set(key, since);
      const quiet = named.map((h) => {
        const activity = h.reads.get(lease.leaseToken);
        // A read in flight counts from its start (one that never returns is no read). Between reads, a view write
        // of the lease leaving or landing is work on it too: a slow sink holds the read budget, and no read
        // starts until it catches up (backpressure, not an abandoned lease: its batches stop once its reads do).
        const sink = h.sinkWrites.get(lease.leaseToken) ?? -Infinity;
        const lastRead = activity?.inFlight.length ? Math.min(...activity.inFlight) : Math.max(activity?.last ?? -Infinity, sink);
        return { h, activity, quietFor: now - Math.max(since, h.joinedAt, lastRead) };
      });
      const { h, activity, quietFor } = quiet.reduce((a, b) => (b.quietFor < a.quietFor ? b : a));
      if (quietFor > UNREAD_BOUND_MS) {
        const how = activity?.inFlight.length ? 'a read in flight that never returned' : 'no read';
        const gone = this.world.partitions().some((p) => p.id === lease.leaseToken) ? '' : ' (its partition is gone: split)';
        violations.report('owned-but-unread', `${h.name} owns ${lease.leaseToken}${gone} (epoch ${lease.epoch}) with ${how} for ${Math.round(quietFor / 1000)} s`, key);
      }
    }
    for (const key of [...this.#ownedSince.keys()]) if (!seen.has(key)) this.#ownedSince.delete(key);
  }
}
