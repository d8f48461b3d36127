// Role: every write under an owned lease (renewal, checkpoint), conditional on its etag. A conflict is read
// back: another host's signal in the lease (handoff request, release notice) is taken in and the write retried;
// another owner or epoch ends the ownership as lost. Each write that lands moves the local deadline.
import { LeaseLostError } from '../../errors/index.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import { sleep } from '../../internal/wait.js';
import type { Position } from '../../core/Partition.js';
import type { Lease } from '../Lease.js';
import { clearHaltOnProgress } from '../protocol/haltBackoff.js';
import { formatLoad, HANDOFF_TO, LOAD_PROPERTY, releaseNotice, withoutNotice } from '../protocol/signals.js';
import type { CoordinatorContext } from './context.js';
import type { Endings } from './Endings.js';
import type { Ownership } from './Ownership.js';

/** First wait (ms) before a lease write is retried when the store reads back the very version it refused; doubles. */
const LAGGING_READ_MS = 10;

/** @internal What the writer tells the other roles. */
export interface WriterSignals {
  /** A write landed: the next renewal is due a renew interval from now. */
  readonly confirmed: (owned: Ownership) => void;
  /** Another host left a signal that calls for a balancing round now. */
  readonly balanceNow: () => void;
}

/** @internal Writes owned leases; see the role above. */
export class LeaseWriter {
  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly endings: Endings,
    private readonly signals: WriterSignals,
    private readonly balanceBy: 'count' | 'load',
  ) {}

  /**
   * Writes `change(current)` conditional on the etag. On a conflict it re-reads: while this host still owns
   * the lease under the same epoch (someone touched another field, e.g. asked for a handoff) it retries;
   * otherwise the lease is lost. Each write that lands moves the local deadline.
   */
  write(owned: Ownership, change: (current: Lease) => Lease): Promise<Lease> {
    const { ctx } = this;
    return owned.enqueue(async () => {
      for (let lagging = 0; ; ) {
        if (owned.ended) throw new LeaseLostError(owned.leaseToken, ctx.owner, undefined);
        const sentAt = ctx.scheduler.now();
        try {
          const stored = await ctx.store.replace(change(owned.current));
          owned.confirm(stored, sentAt);
          this.signals.confirmed(owned);
          return stored;
        } catch (error) {
          if (!(error instanceof LeaseConflictError)) throw error;
          const fresh = error.kind === 'missing' ? undefined : await ctx.store.read(owned.lease.id);
          if (fresh) ctx.observed.observe(fresh, ctx.scheduler.now());
          if (fresh && fresh.owner === ctx.owner && fresh.epoch === owned.epoch) {
            if (fresh.etag === owned.current.etag) {
              // Refused, yet read back as the version written against: the store's reads lag its writes. Wait
              // (doubling from LAGGING_READ_MS up to the renewal retry delay) instead of spinning on 412s; the
              // local deadline still ends an ownership whose write never lands.
              await sleep(Math.min(ctx.t.renewRetryMs, LAGGING_READ_MS * 2 ** lagging++), ctx.scheduler, owned.signal);
              continue;
            }
            lagging = 0;
            // Another host left a signal in this lease (that is what changed it): a handoff request, honoured
            // while it is fresh instead of at the next round (half an expiration away once settled), or a
            // release notice, whose leases are free now. Either way: balance now. A notice is read once.
            const from = releaseNotice(fresh);
            owned.current = from === undefined ? fresh : { ...fresh, properties: withoutNotice(fresh.properties) };
            if (from !== undefined) owned.log('%s released leases: balancing now', from);
            if (this.watchHandoff(owned, fresh) || from !== undefined) this.signals.balanceNow();
            continue;
          }
          const newOwner = fresh ? fresh.owner : undefined;
          if (fresh && !owned.ended) this.lostUnderOwnName(owned, fresh);
          this.endings.lose(owned, fresh ? `now owned by ${fresh.owner ?? 'nobody'}` : 'lease document deleted', newOwner);
          throw new LeaseLostError(owned.leaseToken, ctx.owner, newOwner, { cause: error });
        }
      }
    });
  }

  async checkpoint(owned: Ownership, position: Position): Promise<void> {
    // Past the position a halted owner left, the partition moved on: the halt signal goes (haltBackoff.ts).
    await this.write(owned, (l) => this.withLoad(owned, { ...clearHaltOnProgress(l, position), continuation: position, timestampMs: this.ctx.now() }));
    owned.log('checkpoint %s', position);
  }

  /** With `balanceBy: 'load'`, the lease with the reader's latest load in its properties. */
  withLoad(owned: Ownership, lease: Lease): Lease {
    if (this.balanceBy !== 'load' || owned.load === undefined) return lease;
    return { ...lease, properties: { ...lease.properties, [LOAD_PROPERTY]: formatLoad(owned.load) } };
  }

  /**
   * A host that asked for a lease takes it by force once its request is an expiration old. The owner stops
   * using the lease a margin before that (as before its own expiry), even while a drain for the handover is
   * still running, so it never writes once the requester may own the lease. Returns whether `lease` carries
   * another host's request.
   */
  watchHandoff(owned: Ownership, lease: Lease): boolean {
    const { ctx } = this;
    const to = lease.properties[HANDOFF_TO];
    // Counted from when this host first saw the request (never from the requester's clock; see Observations).
    const since = ctx.observed.requestSince(lease);
    if (!to || to === ctx.owner || since === undefined) return false;
    owned.handoffRequested(to, since + ctx.t.expirationMs - ctx.t.deadlineMarginMs - ctx.scheduler.now());
    return true;
  }

  /** A lease this host held turned up as `stored`: under its own name at an epoch it never wrote, it is suspect. */
  lostUnderOwnName(owned: Ownership, stored: Lease): void {
    const { ctx } = this;
    if (ctx.names.lost(ctx.observed.observe(stored, ctx.scheduler.now()), owned.epoch)) {
      owned.log('taken under this host\'s own name at epoch %d (held at %d): left alone until renewed or expired', stored.epoch, owned.epoch);
    }
  }
}
