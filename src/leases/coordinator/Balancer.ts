// Role: the balance loop — one round at a time, each scheduled by the timing policy (schedule.ts,
// nextScanDelay). A round lists the leases, ends the ownerships the listing shows lost, plans with the count
// or load planner, then hands over, takes and asks for leases (the Acquirer, Endings).
import type { Subscription } from 'rxjs';
import { errorEvent } from '../../errors/errorEvent.js';
import { InvalidOptionsError } from '../../errors/index.js';
import { logger, type Logger } from '../../internal/log.js';
import { planBalance, type BalancePlan } from '../balancing.js';
import type { Lease } from '../Lease.js';
import { planLoadBalance } from '../loadBalancing.js';
import { listProcessorLeases } from '../protocol/listing.js';
import { haltsHeldBack } from '../protocol/haltBackoff.js';
import { isReplaced } from '../protocol/signals.js';
import { isLeaseExpired } from '../protocol/timings.js';
import type { Acquirer } from './Acquirer.js';
import type { ProcessorListing } from './bootstrap.js';
import type { CoordinatorContext } from './context.js';
import type { Endings } from './Endings.js';
import type { LeaseWriter } from './LeaseWriter.js';
import type { SharedName } from './NameGuard.js';
import { nextScanDelay, type Cooldown } from './schedule.js';

/** @internal The roles a round works with. */
export interface BalancerLinks {
  readonly acquirer: Acquirer;
  readonly endings: Endings;
  readonly writer: LeaseWriter;
  readonly cooldown: Cooldown;
  /** Finishes the replacement of a lease marked replaced whose owner is gone (GonePartitions.finish). */
  readonly finish: (lease: Lease) => void;
  /** No lease of this processor is left: bootstrap again; returns the delay until the next round. */
  readonly leasesGone: () => Promise<number>;
}

/** @internal Runs the balance loop; see the role above. */
export class Balancer {
  readonly #log: Logger;
  readonly #reportedCorrupt = new Set<string>();
  #timer: Subscription | undefined;
  #round: Promise<void> | undefined;
  #again = false;
  /** Delay of the next quick round while waiting for leases asked for (0 when not waiting). */
  #lookMs = 0;

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly links: BalancerLinks,
    private readonly balanceBy: 'count' | 'load',
    private readonly limits: { readonly minLeases: number; readonly maxLeases: number },
    /** Reviews a listing for key ranges no lease covers and repairs them (Coverage); true when leases were created. */
    private readonly coverage: (leases: readonly Lease[]) => false | Promise<boolean>,
  ) {
    this.#log = logger('balancer', { owner: ctx.owner });
  }

  /** The round in flight, if any (`stop()` waits for it). */
  get running(): Promise<void> | undefined {
    return this.#round;
  }

  /**
   * Schedules a round in `delayMs` (at once after the one running); `known` (the leases a bootstrap just created,
   * all there are) stands in for the first round's listing, or `listed`, a listing made a moment ago.
   */
  soon(delayMs: number, known?: readonly Lease[], listed?: ProcessorListing): void {
    const { ctx } = this;
    if (ctx.stopped()) return;
    if (this.#round) {
      this.#again = true;
      return;
    }
    this.#timer?.unsubscribe();
    this.#timer = ctx.scheduler.schedule(() => {
      this.#round = this.#scan(known, listed)
        .then(
          (nextMs) => {
            ctx.failures.succeeded('scan');
            return nextMs;
          },
          (error: unknown) => {
            if (!ctx.fatal(error)) ctx.failures.failed('scan', error);
            return ctx.t.acquireMs;
          },
        )
        .then((nextMs) => {
          this.#round = undefined;
          if (this.#again) {
            this.#again = false;
            nextMs = 0;
          }
          this.soon(nextMs);
        });
    }, Math.max(0, delayMs));
  }

  /** Cancels the next round (one running finishes; see {@link Balancer.running}). */
  cancel(): void {
    this.#timer?.unsubscribe();
  }

  /** One balancing round; returns the delay until the next one. */
  async #scan(known?: readonly Lease[], listed?: ProcessorListing): Promise<number> {
    const { ctx, links } = this;
    const { leases, corrupt } = known ? { leases: known, corrupt: [] } : (listed ?? (await listProcessorLeases(ctx.store, ctx.naming)));
    if (ctx.stopped()) return 0;
    if (leases.length === 0 && corrupt.length === 0) {
      this.#reconcile(leases);
      return links.leasesGone();
    }
    for (const problem of corrupt) {
      const key = `${problem.documentId}\u0000${problem.problem}`;
      if (this.#reportedCorrupt.has(key)) continue;
      this.#reportedCorrupt.add(key);
      ctx.log('skipping corrupt lease document %s: %s', problem.documentId, problem.problem);
      ctx.emit(errorEvent(ctx.owner, problem, { lease: problem.documentId }));
    }
    // Every decision below is on this host's clock: the leases as it saw them (see Observations).
    const now = ctx.scheduler.now();
    const seen = leases.map((l) => ctx.observed.observe(l, now));
    ctx.observed.keepOnly(new Set(leases.map((l) => l.id)));
    this.#reconcile(leases);
    const repair = known ? false : this.coverage(leases); // `false` at once while the leases cover the key space
    if (repair && (await repair)) this.soon(0); // the leases created are taken next round

    const shared = ctx.names.review(seen, ctx.owned, now);
    if (shared) this.#reportSharedName(shared);
    // A lease marked replaced (its partition gone, its children being created) is never taken again: it is
    // left out of the plan, and finished by any host once its owner released it or is silent for an expiration.
    for (const l of seen) {
      if (isReplaced(l) && !ctx.owned.has(l.id) && isLeaseExpired(l, now, ctx.t.expirationMs)) links.finish(leases.find((s) => s.id === l.id)!);
    }
    // A lease its halting owner released is left alone by every host for a backoff (haltBackoff.ts): not
    // taken, nor counted as free. The round after it ends is scheduled no later than then.
    const held = haltsHeldBack(seen, now, ctx.t.acquireMs);
    const live = seen.filter((l) => !isReplaced(l) && !held.ids.has(l.id));
    const plan = this.#plan(ctx.names.balanced(live, ctx.owned, now), leases, now);
    const take = plan.take.filter((l) => !links.cooldown.holds(l.id, ctx.scheduler.now()));
    if (take.length || plan.steal.length || plan.release.length || plan.handoff.length) {
      this.#log(
        '%d leases, %d live hosts, target %d, mine %d: take %d, ask for %d, hand over %d, release %d',
        leases.length,
        plan.liveOwners,
        plan.target,
        ctx.owned.size,
        take.length,
        plan.steal.length,
        plan.handoff.length,
        plan.release.length,
      );
    }
    for (const l of [...plan.release, ...plan.handoff]) {
      // Not awaited: a drain may take a while, and balancing (and failover) must not wait for it.
      const owned = ctx.owned.get(l.id);
      if (owned) void links.endings.handOver(owned, 'Rebalanced');
    }
    // Under a name another live process shares, asking other hosts for leases only feeds that process (it
    // takes leases under the name it does not hold as left over): free leases are still taken.
    const steal = ctx.names.shared ? [] : plan.steal;
    await Promise.all([...take.map((l) => links.acquirer.acquire(l, false)), ...steal.map((l) => links.acquirer.askFor(l))]);

    const next = nextScanDelay(
      { nextExpiryMs: earliest(plan.nextExpiryMs, held.untilMs), awaiting: plan.awaiting + steal.length, settled: plan.settled, justCreated: known !== undefined },
      now,
      this.#lookMs,
      ctx.t,
    );
    this.#lookMs = next.lookMs;
    return next.delayMs;
  }

  /** The plan for `seen` (the leases in local time), with its leases back as `stored`: writes are conditional on them. */
  #plan(seen: readonly Lease[], stored: readonly Lease[], now: number): BalancePlan {
    const { ctx } = this;
    const planned = (this.balanceBy === 'load' ? planLoadBalance : planBalance)(seen, ctx.owner, now, {
      expirationMs: ctx.t.expirationMs,
      minLeases: this.limits.minLeases,
      maxLeases: this.limits.maxLeases,
      owned: new Set(ctx.owned.keys()),
    });
    const byId = new Map(stored.map((l) => [l.id, l]));
    const asStored = (list: readonly Lease[]) => list.map((l) => byId.get(l.id)!);
    return { ...planned, take: asStored(planned.take), steal: asStored(planned.steal), release: asStored(planned.release), handoff: asStored(planned.handoff) };
  }

  /** Ends ownership of leases the listing shows someone else owns now (or that are gone); watches handoff requests. */
  #reconcile(leases: readonly Lease[]): void {
    const { ctx, links } = this;
    const byId = new Map(leases.map((l) => [l.id, l]));
    for (const owned of ctx.owned.values()) {
      const stored = byId.get(owned.lease.id);
      if (!stored) {
        links.endings.lose(owned, 'lease document deleted');
      } else if (stored.owner !== ctx.owner || stored.epoch !== owned.epoch) {
        links.writer.lostUnderOwnName(owned, stored);
        links.endings.lose(owned, `now owned by ${stored.owner ?? 'nobody'} (epoch ${stored.epoch})`, stored.owner);
      } else {
        links.writer.watchHandoff(owned, stored);
      }
    }
  }

  /** Another live process uses this host's name: reported once, with what to fix. */
  #reportSharedName(shared: SharedName): void {
    const { ctx } = this;
    const how = shared.heldEpoch > 0 ? `took lease ${shared.leaseToken} (epoch ${shared.epoch}) while this one held it (epoch ${shared.heldEpoch})` : `holds lease ${shared.leaseToken} (epoch ${shared.epoch})`;
    const problem =
      `another live processor uses instanceName '${ctx.owner}' with lease prefix '${ctx.naming.prefix}': it ${how} and keeps renewing it. ` +
      'Give every process its own instanceName (e.g. host name and process id); until then this one leaves the leases ' +
      'under that name that it does not hold to the other, until they expire.';
    ctx.log('%s', problem);
    ctx.emit(errorEvent(ctx.owner, new InvalidOptionsError('instanceName', problem), { lease: shared.leaseToken }));
  }
}

function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
