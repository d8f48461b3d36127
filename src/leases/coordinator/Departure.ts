// Role: what a stopping host leaves behind once its ownerships are released — the leases it asked for settled
// (one handed to it and not taken is released, an unanswered request withdrawn), and release notices in the
// other hosts' leases so they take what it released at once.
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import { announceRelease } from '../protocol/handover.js';
import { listProcessorLeases } from '../protocol/listing.js';
import { HANDOFF_TO, isUntaken, withoutRequest, withoutSignals } from '../protocol/signals.js';
import { withTimeout, type CoordinatorContext } from './context.js';

/** @internal A stopping host's last steps; see the role above. */
export class Departure {
  /** Leases this host asked for: one may be handed to it when it stops, before it took it. */
  readonly #askedFor = new Set<string>();
  /** Leases released to nobody by this host's shutdown (the other hosts are told). */
  #releasedOnStop = 0;

  constructor(private readonly ctx: CoordinatorContext) {}

  /** This host asked for lease `id`. */
  asked(id: string): void {
    this.#askedFor.add(id);
  }

  /** The shutdown released a lease to nobody. */
  releasedToNobody(): void {
    this.#releasedOnStop++;
  }

  /**
   * After a shutdown released what it held: settles the leases this host asked for. One handed to it that
   * it has not taken yet (nobody reads it, see `isUntaken`) is released; a request not answered yet is
   * withdrawn, so its owner does not hand the lease to a stopped host. Either would otherwise wait for an
   * expiration. Then, if it released any to nobody, tells the live hosts (a notice in a few of their leases,
   * which they meet at their next write), so one of them takes the leases within about a checkpoint or a
   * renewal instead of at its next round. Best effort and bounded: without it, the next rounds find the leases.
   */
  async leave(): Promise<void> {
    const { ctx } = this;
    const asked = [...this.#askedFor].filter((id) => !ctx.owned.has(id));
    const announce = async () => {
      const { leases } = await listProcessorLeases(ctx.store, ctx.naming);
      const notices = await announceRelease(ctx.store, leases, ctx.owner, ctx.now(), ctx.t.expirationMs);
      ctx.log('released %d leases; left a notice in %d leases of the other hosts', this.#releasedOnStop, notices);
    };
    // Each step bounded: past an acquire interval the other hosts' own rounds are as quick.
    try {
      if (asked.length > 0) {
        await withTimeout(
          ctx.scheduler,
          Promise.all(asked.map((id) => this.#settleAsked(id))).then(() => undefined),
          ctx.t.acquireMs,
          'settling the leases asked for took over %d ms; gave up',
        );
      }
    } catch (error) {
      ctx.failures.failed('settle', error);
    }
    try {
      if (this.#releasedOnStop > 0) await withTimeout(ctx.scheduler, announce(), ctx.t.acquireMs, 'telling the other hosts of the released leases took over %d ms; gave up');
    } catch (error) {
      ctx.failures.failed('announce', error);
    }
  }

  /** Releases lease `id` if it was handed to this host and not taken, or withdraws this host's request in it. */
  async #settleAsked(id: string): Promise<void> {
    const { ctx } = this;
    for (let attempt = 1; attempt <= 3; attempt++) {
      const lease = await ctx.store.read(id);
      const handed = lease?.owner === ctx.owner && isUntaken(lease);
      if (!lease || (!handed && lease.properties[HANDOFF_TO] !== ctx.owner)) return;
      try {
        // Conditional on the version read: an owner handing the lease over meanwhile makes this conflict.
        await ctx.store.replace(
          handed ? { ...lease, owner: null, properties: withoutSignals(lease.properties), timestampMs: ctx.now() } : { ...lease, properties: withoutRequest(lease.properties) },
        );
        if (handed) {
          this.#releasedOnStop++;
          ctx.log('released lease %s, handed to this host and not taken yet', lease.leaseToken);
        }
        return;
      } catch (error) {
        if (!(error instanceof LeaseConflictError)) {
          ctx.failures.failed(`release:${id}`, error, lease.leaseToken);
          return;
        }
      }
    }
  }
}
