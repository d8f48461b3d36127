// Role: becoming the owner of a lease — taking a free one (epoch + 1, signals dropped), asking the owner of a
// live one to hand it over (or, its request unanswered for an expiration, taking it by force), and starting an
// Ownership on each lease won: its renewals, its events, and `acquired$`.
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import { logger } from '../../internal/log.js';
import type { Logger } from '../../internal/log.js';
import type { OwnedLease } from '../LeaseCoordinator.js';
import type { Lease } from '../Lease.js';
import { buriedEpoch } from '../protocol/documents.js';
import { askForLease, handBack } from '../protocol/handover.js';
import { HANDOFF_TO, isReplaced, onlyNoticeChanged, withoutSignals } from '../protocol/signals.js';
import type { CoordinatorContext } from './context.js';
import { Ownership, type OwnershipRoles } from './Ownership.js';
import type { Renewer } from './Renewer.js';

/** @internal What the acquirer hands on. */
export interface AcquirerLinks {
  /** The roles each new Ownership talks to. */
  readonly roles: OwnershipRoles;
  readonly renewer: Renewer;
  /** Publishes an ownership on `acquired$`. */
  readonly acquired: (owned: OwnedLease) => void;
  /** This host asked for lease `id`: a shutdown settles it. */
  readonly asked: (id: string) => void;
}

/** @internal Acquires leases; see the role above. */
export class Acquirer {
  readonly #balancerLog: Logger;

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly links: AcquirerLinks,
  ) {
    this.#balancerLog = logger('balancer', { owner: ctx.owner });
  }

  /**
   * Takes `lease` as listed (epoch + 1). A conflict is another host's write: usually a host that took it
   * first. When the lease changed only by a release notice (a stopping host wrote it into the leases of the
   * hosts it saw, this one's included, e.g. a lease just handed to this host), it is taken as it is now.
   */
  async acquire(lease: Lease, takeOver: boolean): Promise<void> {
    const { ctx } = this;
    if ((await this.#buried(lease, `acquire:${lease.id}`)) !== 'clear') return;
    for (let attempt = 1; ; attempt++) {
      // A lease marked replaced is never taken again (its children may be read above its epoch already).
      if (ctx.stopped() || isReplaced(lease)) return;
      const sentAt = ctx.scheduler.now();
      let stored: Lease;
      // Noted before it is sent: a write of an older ownership of this lease may meet this epoch first.
      ctx.names.wrote(lease.id, lease.epoch + 1);
      const taking: Lease = { ...lease, owner: ctx.owner, epoch: lease.epoch + 1, timestampMs: ctx.now(), properties: withoutSignals(lease.properties) };
      const unclaimed = ctx.claiming?.(taking, ctx.partitions.of(lease.leaseToken, lease.feedRange));
      try {
        stored = await ctx.store.replace(taking);
      } catch (error) {
        unclaimed?.();
        if (error instanceof LeaseConflictError) {
          const fresh = error.kind === 'missing' || attempt >= 3 ? undefined : await ctx.store.read(lease.id).catch(() => undefined);
          if (fresh && onlyNoticeChanged(lease, fresh)) {
            lease = fresh;
            continue;
          }
          ctx.log('lease %s taken by another host first', lease.leaseToken);
        } else if (!ctx.fatal(error)) {
          ctx.failures.failed(`acquire:${lease.id}`, error, lease.leaseToken);
        }
        return;
      }
      ctx.failures.succeeded(`acquire:${lease.id}`);
      await this.own(stored, sentAt, takeOver ? lease.owner : undefined);
      return;
    }
  }

  /**
   * Asks the owner of a live lease to hand it over (it drains first). Only when a request of ours went
   * unanswered for a whole expiration (an owner that does not know handoffs) is the lease taken by force.
   */
  async askFor(lease: Lease): Promise<void> {
    const { ctx } = this;
    if (ctx.stopped() || isReplaced(lease)) return;
    if (lease.properties[HANDOFF_TO] === ctx.owner) {
      await this.acquire(lease, true);
      return;
    }
    try {
      const stored = await askForLease(ctx.store, lease, ctx.owner, ctx.now());
      if (stored) {
        ctx.observed.asked(stored);
        this.links.asked(lease.id);
        this.#balancerLog('asked %s to hand over lease %s', lease.owner, lease.leaseToken);
      }
    } catch (error) {
      if (!ctx.fatal(error)) ctx.failures.failed(`ask:${lease.id}`, error, lease.leaseToken);
    }
  }

  /**
   * Starts owning `created`, a lease this host's bootstrap created as its own by a request sent at `sentAt`
   * (scheduler time), unless the create landed late below the epoch its id had when it was deleted (a paused
   * bootstrap, in the `dotnet` scheme): such a lease is deleted, never owned. When that cannot be told (the record's
   * read failed) it is released to nobody, for the next host that takes it to look again.
   */
  async ownCreated(created: Lease, sentAt: number): Promise<void> {
    const verdict = await this.#buried(created, `bootstrap:${created.id}`);
    if (verdict === 'clear') await this.own(created, sentAt);
    else if (verdict === 'unknown') await this.#release(created);
  }

  /**
   * Whether `lease` lies below the epoch its id had when it was last deleted (`buriedEpoch`, the `dotnet` scheme;
   * docs/lease-protocol.md, "Late creates in the `dotnet` scheme"): created late, after that delete, it would be
   * owned at an epoch a former owner of its range held, or its range read again by a lease its descendants
   * replaced. It is deleted (conditional on the version listed) instead of taken. `'unknown'`: the record's read
   * failed (counted as a failure); nothing is taken.
   */
  async #buried(lease: Lease, key: string): Promise<'clear' | 'buried' | 'unknown'> {
    const { ctx } = this;
    let buried: number | undefined;
    try {
      buried = await buriedEpoch(ctx.store, ctx.naming, lease);
    } catch (error) {
      if (!ctx.fatal(error)) ctx.failures.failed(key, error, lease.leaseToken);
      return 'unknown';
    }
    if (buried === undefined) return 'clear';
    ctx.log('lease %s at epoch %d was created late, after its delete at epoch %d: deleted, not taken', lease.leaseToken, lease.epoch, buried);
    await ctx.store.delete(lease).catch((error: unknown) => {
      if (!(error instanceof LeaseConflictError) && !ctx.fatal(error)) ctx.failures.failed(key, error, lease.leaseToken);
    });
    return 'buried';
  }

  /** Releases `stored`, written as ours, to nobody without owning it (re-read if a signal landed in it meanwhile). */
  async #release(stored: Lease): Promise<void> {
    const { ctx } = this;
    const release = { store: ctx.store, owner: ctx.owner, epoch: stored.epoch, now: ctx.now, requester: () => undefined };
    await handBack(release, stored).catch((error: unknown) => {
      if (!(error instanceof LeaseConflictError)) ctx.failures.failed(`release:${stored.id}`, error, stored.leaseToken);
    });
  }

  /** Starts owning `stored`, written as ours by a request sent at `sentAt` (scheduler time). */
  async own(stored: Lease, sentAt: number, takenFrom?: string | null): Promise<void> {
    const { ctx } = this;
    if (ctx.stopped()) {
      // Acquired (or created) while stopping: released at once.
      await this.#release(stored);
      return;
    }
    const partition = ctx.partitions.of(stored.leaseToken, stored.feedRange);
    const log = logger('lease', { owner: ctx.owner, lease: stored.leaseToken });
    const usableMs = ctx.t.expirationMs - ctx.t.deadlineMarginMs;
    const owned = new Ownership(stored, partition, log, this.links.roles, ctx.scheduler, sentAt, usableMs);
    ctx.names.wrote(stored.id, stored.epoch);
    ctx.owned.set(stored.id, owned);
    this.links.renewer.start(owned);
    log('acquired (epoch %d%s)', stored.epoch, takenFrom !== undefined ? `, taken over from ${takenFrom}` : '');
    if (takenFrom !== undefined) ctx.emit({ type: 'leaseTakenOver', owner: ctx.owner, lease: stored.leaseToken, from: takenFrom });
    ctx.emit({ type: 'leaseAcquired', owner: ctx.owner, lease: stored.leaseToken, epoch: stored.epoch });
    this.links.acquired(owned);
  }
}
