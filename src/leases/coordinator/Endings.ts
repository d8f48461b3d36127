// Role: the one place an ownership ends. Each verb is one way, with its close reason and what it writes
// (docs/lease-protocol.md, "Ownership"):
//   lose     → LeaseLost              nothing written (but a write in flight that lands after is released)
//   handOver → Rebalanced | Shutdown  drain (bounded), then release to the host that asked for it, or to nobody
//   giveUp   → Error | Halted         no drain: release to nobody at once, and leave the lease to others a while
//                                     (Halted: the release carries the halt signal, a fleet-wide backoff)
//   retire   → PartitionGone          children replaced the lease of a gone partition, and it was deleted
//   abortAll → (fatal reason)         the coordinator failed: every ownership ends, nothing written
import type { CloseReason } from '../../core/events.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import type { Lease } from '../Lease.js';
import { handBack } from '../protocol/handover.js';
import { handoffRequest } from '../protocol/signals.js';
import { withTimeout, type CoordinatorContext } from './context.js';
import type { Ownership } from './Ownership.js';
import type { Cooldown } from './schedule.js';

/** @internal What a voluntary end reports back: the lease went to nobody (the other hosts may be told). */
export type ReleasedToNobody = () => void;

/** @internal Ends ownerships: see the verbs above. */
export class Endings {
  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly cooldown: Cooldown,
    /** Called for each lease a shutdown released to nobody. */
    private readonly releasedOnStop: ReleasedToNobody,
  ) {}

  /** Involuntary end: no drain, no release (the lease is not ours to write any more). */
  lose(owned: Ownership, why: string, newOwner?: string | null): void {
    if (owned.ended) return;
    const { ctx } = this;
    owned.log('lost: %s', why);
    const before = owned.current;
    this.#end(owned, 'LeaseLost');
    ctx.emit({ type: 'leaseLost', owner: ctx.owner, lease: owned.leaseToken, ...(newOwner !== undefined ? { newOwner } : {}) });
    // A write sent before the loss (a renewal or checkpoint that outlived the local deadline) may still land:
    // the store then shows this host owning a lease it no longer reads (after stop(): a stopped host). Once
    // the writes in flight settled (the queue), one that landed is released; tracked, so stop() waits for it.
    ctx.track(
      owned.enqueue(async () => {
        const landed = owned.current;
        if (landed === before || landed.owner !== ctx.owner || landed.epoch !== owned.epoch) return;
        owned.log('a write sent before the lease was lost landed after: releasing it');
        await handBack({ store: ctx.store, owner: ctx.owner, epoch: owned.epoch, now: ctx.now, requester: () => undefined }, landed).catch((error: unknown) => {
          if (!(error instanceof LeaseConflictError)) ctx.failures.failed(`release:${owned.lease.id}`, error, owned.leaseToken);
        });
      }),
    );
  }

  /** Ends the ownership at once and releases the lease to nobody; this host leaves it to others for an expiration. */
  giveUp(owned: Ownership, why: string, reason: CloseReason = 'Error'): void {
    if (owned.ended) return;
    const { ctx } = this;
    owned.log('giving back: %s', why);
    ctx.emit({ type: 'stall', owner: ctx.owner, lease: owned.leaseToken, message: `lease ${owned.leaseToken} released: ${why}` });
    this.#end(owned, reason);
    this.cooldown.leave(owned.lease.id, ctx.scheduler.now() + ctx.t.expirationMs);
    const release = owned
      .enqueue(() =>
        handBack({ store: ctx.store, owner: ctx.owner, epoch: owned.epoch, now: ctx.now, requester: () => undefined, halted: reason === 'Halted' }, owned.current),
      )
      .then(
        () => undefined,
        (error: unknown) => {
          if (!(error instanceof LeaseConflictError)) ctx.failures.failed(`release:${owned.lease.id}`, error, owned.leaseToken);
        },
      )
      .then(() => ctx.emit({ type: 'leaseReleased', owner: ctx.owner, lease: owned.leaseToken, reason }));
    ctx.track(release);
  }

  /**
   * Voluntary end: drain (bounded), then release the lease so another host can take it at once: to the
   * host that asked for it, if one did recently, else to nobody. A lease given up to rebalance and released
   * to nobody (the request went stale while this host got round to it, or a `maxLeases` release) is left to
   * others for two acquire intervals: the host that asked for it, still without a lease, is invisible to
   * this host's count, which would otherwise take the lease straight back at its next scan.
   */
  handOver(owned: Ownership, reason: 'Rebalanced' | 'Shutdown'): Promise<void> {
    if (owned.ended) return Promise.resolve();
    const { ctx } = this;
    owned.closing ??= (async () => {
      if (owned.drain) {
        try {
          await withTimeout(
            ctx.scheduler,
            owned.drain(),
            ctx.t.drainBoundMs,
            'drain did not finish within %d ms; releasing anyway (batches still in the pipeline will be read again by the next owner)',
          );
        } catch (error) {
          ctx.emit({ type: 'stall', owner: ctx.owner, lease: owned.leaseToken, message: (error as Error).message });
        }
      }
      if (owned.ended) return; // lost while draining
      this.#end(owned, reason);
      let to: string | null | undefined = null;
      try {
        to = await owned.enqueue(() =>
          handBack(
            { store: ctx.store, owner: ctx.owner, epoch: owned.epoch, now: ctx.now, requester: (lease) => this.#freshRequester(lease, 2 * ctx.t.acquireMs) },
            owned.current,
          ),
        );
      } catch (error) {
        if (!(error instanceof LeaseConflictError)) ctx.failures.failed(`release:${owned.lease.id}`, error, owned.leaseToken);
      }
      if (to === null && reason === 'Shutdown') this.releasedOnStop();
      if (to === null && reason === 'Rebalanced') this.cooldown.leave(owned.lease.id, ctx.scheduler.now() + 2 * ctx.t.acquireMs);
      owned.log('released (%s)%s', reason, to ? ` to ${to}` : '');
      ctx.emit({ type: 'leaseReleased', owner: ctx.owner, lease: owned.leaseToken, reason });
    })();
    ctx.track(owned.closing);
    return owned.closing;
  }

  /** The lease of a gone partition was replaced by its children (and deleted): the ownership ends with it. */
  retire(owned: Ownership): void {
    this.#end(owned, 'PartitionGone');
    this.ctx.emit({ type: 'leaseReleased', owner: this.ctx.owner, lease: owned.leaseToken, reason: 'PartitionGone' });
  }

  /** The coordinator failed (`reason` says how): every ownership ends without a write. */
  abortAll(reason: CloseReason): void {
    for (const owned of [...this.ctx.owned.values()]) this.#end(owned, reason);
  }

  #end(owned: Ownership, reason: CloseReason): void {
    owned.end(reason);
    if (this.ctx.owned.get(owned.lease.id) === owned) this.ctx.owned.delete(owned.lease.id);
  }

  /** The host a handoff request in `lease` names, if this host first saw it less than `freshMs` ago. */
  #freshRequester(lease: Lease, freshMs: number): string | undefined {
    const now = this.ctx.scheduler.now();
    const seen = this.ctx.observed.observe(lease, now);
    return handoffRequest(seen, now, freshMs);
  }
}
