import { Observable, Subject } from 'rxjs';
import type { SchedulerLike, Subscription } from 'rxjs';
import { errorEvent } from '../errors/errorEvent.js';
import type { CloseReason, FeedEvent } from '../core/events.js';
import type { FeedRange, Partition, Position } from '../core/Partition.js';
import { InvalidOptionsError, LeaseLostError } from '../errors/index.js';
import { sleep } from '../internal/wait.js';
import { logger } from '../internal/log.js';
import type { Logger } from '../internal/log.js';
import { HANDOFF_TO, handoffRequest, isUntaken, planBalance, withoutSignals } from './balancing.js';
import { LOAD_PROPERTY, planLoadBalance } from './loadBalancing.js';
import { bootstrapLeases, type BootstrapResult } from './coordinator/bootstrap.js';
import { announceRelease, askForLease, handBack, onlyNoticeChanged, releaseNotice, withoutNotice, withoutRequest } from './coordinator/handover.js';
import { namingOf, type LeaseNaming } from './coordinator/leaseDocuments.js';
import { listProcessorLeases } from './leaseNaming.js';
import { NameGuard, type SharedName } from './coordinator/NameGuard.js';
import { Observations } from './coordinator/Observations.js';
import { Ownership, type OwnershipHost } from './coordinator/Ownership.js';
import { FailureCounter } from './coordinator/FailureCounter.js';
import { replaceGoneLease } from './coordinator/replaceGoneLease.js';
import type { Timings } from './coordinator/timings.js';
import { fatalCloseReason } from '../errors/classify.js';
import { validateOptions, type LeaseCoordinatorOptions } from './coordinator/options.js';
import type { Lease } from './Lease.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import type { LeaseCoordinator, OwnedLease } from './LeaseCoordinator.js';
import type { LeaseStore } from './LeaseStore.js';

export { DEFAULT_LEASE_PREFIX, LEASE_DEFAULTS } from './coordinator/options.js';
export type { LeaseCoordinatorOptions, LeaseOptions } from './coordinator/options.js';

const FULL_RANGE: FeedRange = { minInclusive: '', maxExclusive: 'FF' };
/** Replacing a gone partition's lease is retried with this first delay (ms), doubling up to the acquire interval. */
const SPLIT_RETRY_MS = 500;
/** First wait (ms) before a lease write is retried when the store reads back the very version it refused; doubles. */
const LAGGING_READ_MS = 10;
/** First delay (ms) of the quick rounds a host makes while leases it asked for are being handed over; doubles up to the acquire interval. */
const HANDOVER_LOOK_MS = 1_000;
/** The golden ratio's fractional part: successive multiples of it spread evenly over [0, 1). */
const GOLDEN = (Math.sqrt(5) - 1) / 2;

/**
 * Creates the lease coordinator of one host: it bootstraps one lease per partition under `prefix`
 * (exactly once, however many hosts start together), acquires free and expired leases, renews the ones
 * it owns, balances them evenly with the other hosts (taking over from the most loaded), fences every
 * write with the lease etag and an epoch, replaces leases of split/merged partitions, and drains then
 * releases its leases on {@link LeaseCoordinator.stop}, telling the other hosts so they take them at once.
 * One coordinator runs once: after `stop()` create another.
 *
 * Nothing runs until `acquired$` is subscribed.
 *
 * @example
 * ```ts
 * const coordinator = createLeaseCoordinator({ store: new MemoryLeaseStore(), source, owner: 'host-a', prefix: 'orders.' });
 * coordinator.acquired$.subscribe((lease) => startReading(lease));
 * process.on('SIGTERM', () => void coordinator.stop());
 * ```
 * @throws InvalidOptionsError when an option is missing or out of range.
 */
export function createLeaseCoordinator(options: LeaseCoordinatorOptions): LeaseCoordinator {
  return new Coordinator(options);
}

class Coordinator implements LeaseCoordinator, OwnershipHost {
  readonly owner: string;
  readonly acquired$: Observable<OwnedLease>;
  readonly events$: Observable<FeedEvent>;

  readonly #store: LeaseStore;
  readonly #naming: LeaseNaming;
  readonly #balanceBy: 'count' | 'load';
  readonly #listPartitions: (signal?: AbortSignal) => Promise<readonly Partition[]>;
  readonly #startPosition: LeaseCoordinatorOptions['startPosition'];
  readonly #t: Timings;
  readonly #minLeases: number;
  readonly #maxLeases: number;
  readonly #scheduler: SchedulerLike;
  readonly #now: () => number;
  readonly #log: Logger;
  readonly #balancerLog: Logger;
  readonly #acquired = new Subject<OwnedLease>();
  readonly #events = new Subject<FeedEvent>();
  /** Leases this host owns, by document id. */
  readonly #owned = new Map<string, Ownership>();
  readonly #partitions = new Map<string, Partition>();
  readonly #reportedCorrupt = new Set<string>();
  readonly #names: NameGuard;
  readonly #observed: Observations;
  readonly #failures: FailureCounter;
  /** Lease ids this host gave back because it could not use them, and until when (scheduler time) it leaves them to others. */
  readonly #cooldown = new Map<string, number>();
  readonly #stopSignal = new AbortController();
  #started = false;
  #stopping: Promise<void> | undefined;
  #scanTimer: Subscription | undefined;
  #scanning: Promise<void> | undefined;
  #rescanRequested = false;
  #failedFatally = false;
  /** Whether this host reported that its processor's leases are gone while `.info` says they exist. */
  #goneReported = false;
  /** Leases released to nobody by this host's shutdown (the other hosts are told, see `#announceRelease`). */
  #releasedOnStop = 0;
  /** Delay of the next quick round while waiting for leases asked for (0 when not waiting). */
  #handoverLookMs = 0;
  /** Phase of the next lease's first renewal, as a fraction of the renew interval. */
  #renewPhase = 0;
  /** Leases this host asked for: one may be handed to it when it stops, before it took it. */
  readonly #askedFor = new Set<string>();
  /** Voluntary closes and split replacements in progress. */
  readonly #pending = new Set<Promise<unknown>>();

  constructor(options: LeaseCoordinatorOptions) {
    const o = validateOptions(options);
    this.#t = o.timings;
    this.owner = options.owner;
    this.#store = options.store;
    const source = options.source;
    this.#listPartitions = options.listPartitions ?? ((signal) => source!.listPartitions(signal));
    this.#startPosition = options.startPosition;
    this.#minLeases = o.minLeases;
    this.#maxLeases = o.maxLeases;
    this.#scheduler = o.scheduler;
    const scheduler = this.#scheduler;
    this.#now = options.now ?? (() => scheduler.now());
    this.#balanceBy = o.balanceBy;
    this.#names = new NameGuard(this.owner, this.#t.expirationMs);
    this.#observed = new Observations(this.owner);
    this.#naming = namingOf(
      o.prefix,
      o.leaseScheme,
      this.owner,
      options.mode ?? options.source?.mode ?? 'latestVersion',
      this.#now,
    );
    this.#log = logger('lease', { owner: this.owner });
    this.#balancerLog = logger('balancer', { owner: this.owner });
    this.#failures = new FailureCounter(this.owner, (event) => this.#events.next(event));
    this.events$ = this.#events.asObservable();
    this.acquired$ = new Observable<OwnedLease>((subscriber) => {
      if (this.#stopping) {
        subscriber.complete();
        return;
      }
      const inner = this.#acquired.subscribe(subscriber);
      for (const owned of this.#owned.values()) subscriber.next(owned);
      if (!this.#started) {
        this.#started = true;
        // Tracked: stop() waits for a bootstrap in flight, so leases it creates as this host's are released.
        this.#track(this.#start());
      }
      return () => {
        inner.unsubscribe();
        if (!this.#acquired.observed) void this.stop();
      };
    });
  }

  owned(): readonly OwnedLease[] {
    return [...this.#owned.values()];
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#log('stopping');
      this.#stopSignal.abort();
      this.#scanTimer?.unsubscribe();
      await this.#scanning;
      await Promise.all([...this.#owned.values()].map((owned) => this.#close(owned, 'Shutdown')));
      if (!this.#failedFatally) await this.#afterRelease();
      while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
      this.#log('stopped');
      this.#acquired.complete();
      this.#events.complete();
    })();
    return this.#stopping;
  }

  // ---- lifecycle -------------------------------------------------------------------------------------

  get #stopped(): boolean {
    return this.#stopping !== undefined;
  }

  async #start(): Promise<void> {
    let bootstrap: BootstrapResult;
    try {
      bootstrap = await this.#bootstrap();
    } catch (error) {
      if (this.#fatal(error)) return;
      this.#failures.failed('bootstrap', error);
      if (!this.#stopped) this.#scanTimer = this.#scheduler.schedule(() => this.#track(this.#start()), this.#t.acquireMs);
      return;
    }
    // Leases this host just created are all there are: the first round starts on them without a listing.
    this.#scanSoon(0, bootstrap.complete ? bootstrap.created : undefined);
  }

  /** Creates the leases unless `.info` says they exist, and owns those it claimed; throws what failed. */
  async #bootstrap(): Promise<BootstrapResult> {
    // The partitions are listed while the bootstrap looks for its marker: a fresh container needs them to
    // create the leases, and every host needs them (with parents) for the leases it will own.
    const partitions = this.#refreshPartitions();
    partitions.catch(() => undefined); // awaited below, or by the bootstrap
    const bootstrap = await bootstrapLeases({
      store: this.#store,
      naming: this.#naming,
      expirationMs: this.#t.expirationMs,
      retryMs: Math.min(1000, this.#t.acquireMs),
      listPartitions: () => partitions,
      ...(this.#startPosition ? { startPosition: this.#startPosition } : {}),
      claim: this.#maxLeases > 0 ? this.#maxLeases : Infinity,
      clock: () => this.#scheduler.now(),
      stopped: () => this.#stopped,
      delay: (ms) => this.#delay(ms),
      log: this.#log,
      warn: (message) => this.#events.next({ type: 'stall', owner: this.owner, message }),
      background: (work) => this.#track(work.catch((error: unknown) => this.#fatal(error) || this.#failures.failed('bootstrap', error))),
    });
    this.#failures.succeeded('bootstrap');
    await partitions.catch((error: unknown) => this.#fatal(error) || this.#failures.failed('partitions', error));
    // Owned (or, after a stop() meanwhile, released) from when their creates were sent.
    for (const lease of bootstrap.created) if (lease.owner === this.owner) this.#track(this.#own(lease, bootstrap.sentAt));
    return bootstrap;
  }

  /**
   * No lease of this processor is left: a reset deleted them (hosts that held one lost it at their next
   * write), or they were deleted by hand. Bootstraps again, as a start does (once `.info` is gone, as after a
   * reset); while `.info` says the leases exist there is nothing to read: reported once, with what to do.
   * Returns the delay until the next round.
   */
  async #leasesGone(): Promise<number> {
    const { created } = await this.#bootstrap();
    if (created.length > 0) {
      this.#log('no lease was left under the prefix: bootstrapped again (%d leases)', created.length);
      this.#goneReported = false;
      return 0;
    }
    if (!this.#goneReported && !this.#stopped) {
      this.#goneReported = true;
      const info = `${this.#naming.markerPrefix}.info`;
      this.#events.next({
        type: 'stall',
        owner: this.owner,
        message: `no lease under prefix '${this.#naming.prefix}' while its bootstrap marker ${info} says they exist: nothing to read. ` +
          `Delete ${info} (or run \`rxfeed leases reset\`) and the hosts bootstrap again`,
      });
    }
    return this.#t.acquireMs;
  }

  async #refreshPartitions(): Promise<readonly Partition[]> {
    const partitions = await this.#listPartitions(this.#stopSignal.signal);
    for (const p of partitions) this.#partitions.set(p.id, p);
    return partitions;
  }

  // ---- scanning and balancing -------------------------------------------------------------------------

  /** Schedules a balancing round; `known` stands in for the listing of the first one (leases just created). */
  #scanSoon(delayMs: number, known?: readonly Lease[]): void {
    if (this.#stopped) return;
    if (this.#scanning) {
      this.#rescanRequested = true;
      return;
    }
    this.#scanTimer?.unsubscribe();
    this.#scanTimer = this.#scheduler.schedule(() => {
      this.#scanning = this.#scan(known)
        .then(
          (nextMs) => {
            this.#failures.succeeded('scan');
            return nextMs;
          },
          (error: unknown) => {
            if (!this.#fatal(error)) this.#failures.failed('scan', error);
            return this.#t.acquireMs;
          },
        )
        .then((nextMs) => {
          this.#scanning = undefined;
          if (this.#rescanRequested) {
            this.#rescanRequested = false;
            nextMs = 0;
          }
          this.#scanSoon(nextMs);
        });
    }, Math.max(0, delayMs));
  }

  /** One balancing round; returns the delay until the next one. */
  async #scan(known?: readonly Lease[]): Promise<number> {
    const { leases, corrupt: unreadable } = known ? { leases: known, corrupt: [] } : await listProcessorLeases(this.#store, this.#naming);
    if (this.#stopped) return 0;
    if (leases.length === 0 && unreadable.length === 0) {
      this.#reconcile(leases);
      return this.#leasesGone();
    }
    for (const corrupt of unreadable) {
      const key = `${corrupt.documentId}\u0000${corrupt.problem}`;
      if (this.#reportedCorrupt.has(key)) continue;
      this.#reportedCorrupt.add(key);
      this.#log('skipping corrupt lease document %s: %s', corrupt.documentId, corrupt.problem);
      this.#events.next(errorEvent(this.owner, corrupt, { lease: corrupt.documentId }));
    }
    // Every decision below is on this host's clock: the leases as it saw them (see Observations).
    const now = this.#scheduler.now();
    const seen = leases.map((l) => this.#observed.observe(l, now));
    this.#observed.keepOnly(new Set(leases.map((l) => l.id)));
    this.#reconcile(leases);

    const shared = this.#names.review(seen, this.#owned, now);
    if (shared) this.#reportSharedName(shared);
    const planned = (this.#balanceBy === 'load' ? planLoadBalance : planBalance)(this.#names.balanced(seen, this.#owned, now), this.owner, now, {
      expirationMs: this.#t.expirationMs,
      minLeases: this.#minLeases,
      maxLeases: this.#maxLeases,
      owned: new Set(this.#owned.keys()),
    });
    // Back to the leases as stored: writes are conditional on them and keep their fields.
    const stored = new Map(leases.map((l) => [l.id, l]));
    const asStored = (list: readonly Lease[]) => list.map((l) => stored.get(l.id)!);
    const plan = { ...planned, take: asStored(planned.take), steal: asStored(planned.steal), release: asStored(planned.release), handoff: asStored(planned.handoff) };
    const take = plan.take.filter((l) => !this.#coolingDown(l.id));
    if (take.length || plan.steal.length || plan.release.length || plan.handoff.length) {
      this.#balancerLog(
        '%d leases, %d live hosts, target %d, mine %d: take %d, ask for %d, hand over %d, release %d',
        leases.length,
        plan.liveOwners,
        plan.target,
        this.#owned.size,
        take.length,
        plan.steal.length,
        plan.handoff.length,
        plan.release.length,
      );
    }
    for (const l of [...plan.release, ...plan.handoff]) {
      // Not awaited: a drain may take a while, and balancing (and failover) must not wait for it.
      const owned = this.#owned.get(l.id);
      if (owned) void this.#close(owned, 'Rebalanced');
    }
    // Under a name another live process shares, asking other hosts for leases only feeds that process (it
    // takes leases under the name it does not hold as left over): free leases are still taken.
    const steal = this.#names.shared ? [] : plan.steal;
    await Promise.all([...take.map((l) => this.#acquire(l, false)), ...steal.map((l) => this.#askFor(l))]);

    // Never scan later than the moment a lease owned elsewhere could expire, so a crashed host's leases
    // are taken over one expiration after its last write. Otherwise: every acquire interval while the
    // share is moving; once settled, at least every half expiration (to pick up released leases). A host
    // that just created the leases took them all: it looks again soon for hosts that ask for their share.
    // While leases this host asked for are being handed over, it looks again after 1 s, 2 s, 4 s, … (up to
    // the acquire interval): a busy owner hands over at its next checkpoint, and the lease is read as soon as
    // this host sees it is its own. A few extra rounds per join; none once settled.
    const untilExpiry = plan.nextExpiryMs === undefined ? Infinity : Math.max(1, plan.nextExpiryMs - now + 1);
    const awaiting = plan.awaiting > 0 || steal.length > 0;
    this.#handoverLookMs = awaiting ? Math.min(this.#t.acquireMs, this.#handoverLookMs * 2 || HANDOVER_LOOK_MS) : 0;
    const next = awaiting ? this.#handoverLookMs : plan.settled && !known ? this.#t.expirationMs / 2 : this.#t.acquireMs;
    return Math.min(next, untilExpiry);
  }

  #coolingDown(id: string): boolean {
    const until = this.#cooldown.get(id);
    if (until === undefined) return false;
    if (this.#scheduler.now() < until) return true;
    this.#cooldown.delete(id);
    return false;
  }

  /** Ends ownership of leases the listing shows someone else owns now (or that are gone). */
  #reconcile(leases: readonly Lease[]): void {
    const byId = new Map(leases.map((l) => [l.id, l]));
    for (const owned of this.#owned.values()) {
      const stored = byId.get(owned.lease.id);
      if (!stored) {
        this.lose(owned, undefined, 'lease document deleted');
      } else if (stored.owner !== this.owner || stored.epoch !== owned.epoch) {
        this.#lostUnderOwnName(owned, stored);
        this.lose(owned, stored.owner, `now owned by ${stored.owner ?? 'nobody'} (epoch ${stored.epoch})`);
      } else {
        this.#watchHandoff(owned, stored);
      }
    }
  }

  /** A lease this host held turned up as `stored`: under its own name at an epoch it never wrote, it is suspect. */
  #lostUnderOwnName(owned: Ownership, stored: Lease): void {
    if (this.#names.lost(this.#observed.observe(stored, this.#scheduler.now()), owned.epoch)) {
      owned.log('taken under this host\'s own name at epoch %d (held at %d): left alone until renewed or expired', stored.epoch, owned.epoch);
    }
  }

  /** Another live process uses this host's name: reported once, with what to fix. */
  #reportSharedName(shared: SharedName): void {
    const how = shared.heldEpoch > 0 ? `took lease ${shared.leaseToken} (epoch ${shared.epoch}) while this one held it (epoch ${shared.heldEpoch})` : `holds lease ${shared.leaseToken} (epoch ${shared.epoch})`;
    const problem =
      `another live processor uses instanceName '${this.owner}' with lease prefix '${this.#naming.prefix}': it ${how} and keeps renewing it. ` +
      'Give every process its own instanceName (e.g. host name and process id); until then this one leaves the leases ' +
      'under that name that it does not hold to the other, until they expire.';
    this.#log('%s', problem);
    this.#events.next(errorEvent(this.owner, new InvalidOptionsError('instanceName', problem), { lease: shared.leaseToken }));
  }

  /**
   * A host that asked for a lease takes it by force once its request is an expiration old. The owner stops
   * using the lease a margin before that (as before its own expiry), even while a drain for the handover is
   * still running, so it never writes once the requester may own the lease.
   */
  #watchHandoff(owned: Ownership, lease: Lease): boolean {
    const to = lease.properties[HANDOFF_TO];
    // Counted from when this host first saw the request (never from the requester's clock; see Observations).
    const since = this.#observed.requestSince(lease);
    if (!to || to === this.owner || since === undefined) return false;
    owned.handoffRequested(to, since + this.#t.expirationMs - this.#t.deadlineMarginMs - this.#scheduler.now());
    return true;
  }

  /** The host a handoff request in `lease` names, if this host first saw it less than `freshMs` ago. */
  #freshRequester(lease: Lease, freshMs: number): string | undefined {
    const now = this.#scheduler.now();
    const seen = this.#observed.observe(lease, now);
    return handoffRequest(seen, now, freshMs);
  }

  /**
   * Asks the owner of a live lease to hand it over (it drains first). Only when a request of ours went
   * unanswered for a whole expiration (an owner that does not know handoffs) is the lease taken by force.
   */
  async #askFor(lease: Lease): Promise<void> {
    if (this.#stopped) return;
    if (lease.properties[HANDOFF_TO] === this.owner) {
      await this.#acquire(lease, true);
      return;
    }
    try {
      const stored = await askForLease(this.#store, lease, this.owner, this.#now());
      if (stored) {
        this.#observed.asked(stored);
        this.#askedFor.add(lease.id);
        this.#balancerLog('asked %s to hand over lease %s', lease.owner, lease.leaseToken);
      }
    } catch (error) {
      if (!this.#fatal(error)) this.#failures.failed(`ask:${lease.id}`, error, lease.leaseToken);
    }
  }

  /**
   * Takes `lease` as listed (epoch + 1). A conflict is another host's write: usually a host that took it
   * first. When the lease changed only by a release notice (a stopping host wrote it into the leases of the
   * hosts it saw, this one's included, e.g. a lease just handed to this host), it is taken as it is now.
   */
  async #acquire(lease: Lease, takeOver: boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (this.#stopped) return;
      const sentAt = this.#scheduler.now();
      let stored: Lease;
      // Noted before it is sent: a write of an older ownership of this lease may meet this epoch first.
      this.#names.wrote(lease.id, lease.epoch + 1);
      try {
        stored = await this.#store.replace({
          ...lease,
          owner: this.owner,
          epoch: lease.epoch + 1,
          timestampMs: this.#now(),
          properties: withoutSignals(lease.properties),
        });
      } catch (error) {
        if (error instanceof LeaseConflictError) {
          const fresh = error.kind === 'missing' || attempt >= 3 ? undefined : await this.#store.read(lease.id).catch(() => undefined);
          if (fresh && onlyNoticeChanged(lease, fresh)) {
            lease = fresh;
            continue;
          }
          this.#log('lease %s taken by another host first', lease.leaseToken);
        } else if (!this.#fatal(error)) {
          this.#failures.failed(`acquire:${lease.id}`, error, lease.leaseToken);
        }
        return;
      }
      this.#failures.succeeded(`acquire:${lease.id}`);
      await this.#own(stored, sentAt, takeOver ? lease.owner : undefined);
      return;
    }
  }

  /** Starts owning `stored`, written as ours by a request sent at `sentAt` (scheduler time). */
  async #own(stored: Lease, sentAt: number, takenFrom?: string | null): Promise<void> {
    if (this.#stopped) {
      // Acquired (or created) while stopping: released at once, re-read if a signal landed in it meanwhile.
      const ctx = { store: this.#store, owner: this.owner, epoch: stored.epoch, now: this.#now, requester: () => undefined };
      await handBack(ctx, stored).catch((error: unknown) => {
        if (!(error instanceof LeaseConflictError)) this.#failures.failed(`release:${stored.id}`, error, stored.leaseToken);
      });
      return;
    }
    const partition = this.#partitions.get(stored.leaseToken) ?? { id: stored.leaseToken, range: stored.feedRange ?? FULL_RANGE };
    const log = logger('lease', { owner: this.owner, lease: stored.leaseToken });
    const usableMs = this.#t.expirationMs - this.#t.deadlineMarginMs;
    const owned = new Ownership(stored, partition, log, this, this.#scheduler, sentAt, usableMs);
    this.#names.wrote(stored.id, stored.epoch);
    this.#owned.set(stored.id, owned);
    this.#scheduleRenew(owned, this.#firstRenewalMs());
    log('acquired (epoch %d%s)', stored.epoch, takenFrom !== undefined ? `, taken over from ${takenFrom}` : '');
    if (takenFrom !== undefined) this.#events.next({ type: 'leaseTakenOver', owner: this.owner, lease: stored.leaseToken, from: takenFrom });
    this.#events.next({ type: 'leaseAcquired', owner: this.owner, lease: stored.leaseToken, epoch: stored.epoch });
    this.#acquired.next(owned);
  }

  // ---- writes under an owned lease ----------------------------------------------------------------------

  /**
   * Writes `change(current)` conditional on the etag. On a conflict it re-reads: while this host still owns
   * the lease under the same epoch (someone touched another field, e.g. asked for a handoff) it retries;
   * otherwise the lease is lost. Each write that lands moves the local deadline.
   */
  #write(owned: Ownership, change: (current: Lease) => Lease): Promise<Lease> {
    return owned.enqueue(async () => {
      for (let lagging = 0; ; ) {
        if (owned.ended) throw new LeaseLostError(owned.leaseToken, this.owner, undefined);
        const sentAt = this.#scheduler.now();
        try {
          const stored = await this.#store.replace(change(owned.current));
          owned.confirm(stored, sentAt);
          this.#scheduleRenew(owned, this.#t.renewMs);
          return stored;
        } catch (error) {
          if (!(error instanceof LeaseConflictError)) throw error;
          const fresh = error.kind === 'missing' ? undefined : await this.#store.read(owned.lease.id);
          if (fresh) this.#observed.observe(fresh, this.#scheduler.now());
          if (fresh && fresh.owner === this.owner && fresh.epoch === owned.epoch) {
            if (fresh.etag === owned.current.etag) {
              // Refused, yet read back as the version written against: the store's reads lag its writes. Wait
              // (doubling from LAGGING_READ_MS up to the renewal retry delay) instead of spinning on 412s; the
              // local deadline still ends an ownership whose write never lands.
              await sleep(Math.min(this.#t.renewRetryMs, LAGGING_READ_MS * 2 ** lagging++), this.#scheduler, owned.signal);
              continue;
            }
            lagging = 0;
            // Another host left a signal in this lease (that is what changed it): a handoff request, honoured
            // while it is fresh instead of at the next round (half an expiration away once settled), or a
            // release notice, whose leases are free now. Either way: balance now. A notice is read once.
            const from = releaseNotice(fresh);
            owned.current = from === undefined ? fresh : { ...fresh, properties: withoutNotice(fresh.properties) };
            if (from !== undefined) owned.log('%s released leases: balancing now', from);
            if (this.#watchHandoff(owned, fresh) || from !== undefined) this.#scanSoon(0);
            continue;
          }
          const newOwner = fresh ? fresh.owner : undefined;
          if (fresh && !owned.ended) this.#lostUnderOwnName(owned, fresh);
          this.lose(owned, newOwner, fresh ? `now owned by ${fresh.owner ?? 'nobody'}` : 'lease document deleted');
          throw new LeaseLostError(owned.leaseToken, this.owner, newOwner, { cause: error });
        }
      }
    });
  }

  async checkpoint(owned: Ownership, position: Position): Promise<void> {
    await this.#write(owned, (l) => this.#withLoad(owned, { ...l, continuation: position, timestampMs: this.#now() }));
    owned.log('checkpoint %s', position);
  }

  /** With `balanceBy: 'load'`, the lease with the reader's latest load in its properties. */
  #withLoad(owned: Ownership, lease: Lease): Lease {
    if (this.#balanceBy !== 'load' || owned.load === undefined) return lease;
    return { ...lease, properties: { ...lease.properties, [LOAD_PROPERTY]: formatLoad(owned.load) } };
  }

  #scheduleRenew(owned: Ownership, delayMs: number): void {
    owned.renewTimer?.unsubscribe();
    // Renewals go on while a drain runs (it may outlast the expiration), until the lease is let go.
    if (owned.ended) return;
    owned.renewTimer = this.#scheduler.schedule(() => void this.#renew(owned), this.#onGrid(delayMs));
  }

  /**
   * `delayMs`, shortened so the renewal falls on the renewal grid: renewals due close together then go out
   * in the same turn, which a lease store that groups writes sends as one request. Short delays (retries
   * in tests' timings) are left alone.
   */
  #onGrid(delayMs: number): number {
    const grid = this.#t.renewGridMs;
    if (delayMs < 2 * grid) return delayMs;
    const now = this.#scheduler.now();
    return Math.floor((now + delayMs) / grid) * grid - now;
  }

  async #renew(owned: Ownership): Promise<void> {
    if (owned.ended) return;
    const key = `renew:${owned.lease.id}`;
    try {
      await this.#write(owned, (l) => this.#withLoad(owned, { ...l, timestampMs: this.#now() }));
      this.#failures.succeeded(key);
      owned.log('renewed');
    } catch (error) {
      if (error instanceof LeaseLostError || owned.ended) return;
      if (this.#fatal(error)) return;
      this.#failures.failed(key, error, owned.leaseToken);
      // The local deadline ends the ownership if no retry lands in time.
      this.#scheduleRenew(owned, this.#t.renewRetryMs);
    }
  }

  // ---- split and merge -------------------------------------------------------------------------------------

  /**
   * Replaces the lease of a gone partition by leases for the partitions covering its range now. Retried
   * with backoff while this host still owns the lease; if it cannot be done within an expiration, the
   * lease is given back (a host never owns a lease it does not read) so a later scan retries.
   */
  partitionGone(owned: Ownership, position: Position | null): Promise<void> {
    const work = (async () => {
      const key = `split:${owned.lease.id}`;
      const since = this.#scheduler.now();
      for (let attempt = 1; !owned.ended && !this.#stopped; attempt++) {
        try {
          await owned.enqueue(() => this.#replaceGone(owned, position));
          this.#failures.succeeded(key);
          return;
        } catch (error) {
          if (error instanceof LeaseLostError || owned.ended) return;
          if (this.#fatal(error)) return;
          this.#failures.failed(key, error, owned.leaseToken);
          if (this.#scheduler.now() - since >= this.#t.expirationMs) {
            this.giveBack(owned, `could not replace the lease of the gone partition for ${this.#t.expirationMs} ms`);
            return;
          }
          await this.#delay(Math.min(this.#t.acquireMs, SPLIT_RETRY_MS * 2 ** (attempt - 1)));
        }
      }
      // Stopped while retrying: let the lease go so the next run (or host) handles the split.
      if (!owned.ended) this.giveBack(owned, 'stopped before the split was handled');
    })();
    this.#track(work);
    return work.finally(() => this.#scanSoon(0));
  }

  async #replaceGone(owned: Ownership, position: Position | null): Promise<void> {
    if (owned.ended) return;
    const context = { store: this.#store, naming: this.#naming, listPartitions: () => this.#refreshPartitions() };
    const replacement = await replaceGoneLease(context, owned, position);
    if (replacement.kind === 'fenced') {
      this.lose(owned, replacement.owner, 'lost before handling the split');
      throw new LeaseLostError(owned.leaseToken, this.owner, replacement.owner);
    }
    owned.log('partition gone: replaced by %s from %s', replacement.children.join(', '), replacement.from);
    this.#events.next({ type: 'partitionSplit', owner: this.owner, lease: owned.leaseToken, children: replacement.children });
    this.#end(owned, 'PartitionGone');
    this.#events.next({ type: 'leaseReleased', owner: this.owner, lease: owned.leaseToken, reason: 'PartitionGone' });
  }

  // ---- ending ownership -----------------------------------------------------------------------------------

  /** Involuntary end: no drain, no release (the lease is not ours to write any more). */
  lose(owned: Ownership, newOwner: string | null | undefined, why: string): void {
    if (owned.ended) return;
    owned.log('lost: %s', why);
    this.#end(owned, 'LeaseLost');
    this.#events.next({ type: 'leaseLost', owner: this.owner, lease: owned.leaseToken, ...(newOwner !== undefined ? { newOwner } : {}) });
  }

  /** Ends the ownership at once and releases the lease to nobody; this host leaves it to others for an expiration. */
  giveBack(owned: Ownership, why: string, reason: CloseReason = 'Error'): void {
    if (owned.ended) return;
    owned.log('giving back: %s', why);
    this.#events.next({ type: 'stall', owner: this.owner, lease: owned.leaseToken, message: `lease ${owned.leaseToken} released: ${why}` });
    this.#end(owned, reason);
    this.#cooldown.set(owned.lease.id, this.#scheduler.now() + this.#t.expirationMs);
    const release = owned
      .enqueue(() => handBack({ store: this.#store, owner: this.owner, epoch: owned.epoch, now: this.#now, requester: () => undefined }, owned.current))
      .then(
        () => undefined,
        (error: unknown) => {
          if (!(error instanceof LeaseConflictError)) this.#failures.failed(`release:${owned.lease.id}`, error, owned.leaseToken);
        },
      )
      .then(() => this.#events.next({ type: 'leaseReleased', owner: this.owner, lease: owned.leaseToken, reason }));
    this.#track(release);
  }

  #end(owned: Ownership, reason: CloseReason): void {
    owned.end(reason);
    if (this.#owned.get(owned.lease.id) === owned) this.#owned.delete(owned.lease.id);
  }

  /**
   * Voluntary end: drain (bounded), then release the lease so another host can take it at once: to the
   * host that asked for it, if one did recently, else to nobody. A lease given up to rebalance and released
   * to nobody (the request went stale while this host got round to it, or a `maxLeases` release) is left to
   * others for two acquire intervals: the host that asked for it, still without a lease, is invisible to
   * this host's count, which would otherwise take the lease straight back at its next scan.
   */
  #close(owned: Ownership, reason: CloseReason): Promise<void> {
    if (owned.ended) return Promise.resolve();
    owned.closing ??= (async () => {
      if (owned.drain) {
        try {
          await this.#withTimeout(
            owned.drain(),
            this.#t.drainBoundMs,
            'drain did not finish within %d ms; releasing anyway (batches still in the pipeline will be read again by the next owner)',
          );
        } catch (error) {
          this.#events.next({ type: 'stall', owner: this.owner, lease: owned.leaseToken, message: (error as Error).message });
        }
      }
      if (owned.ended) return; // lost while draining
      this.#end(owned, reason);
      let to: string | null | undefined = null;
      try {
        to = await owned.enqueue(() =>
          handBack(
            { store: this.#store, owner: this.owner, epoch: owned.epoch, now: this.#now, requester: (lease) => this.#freshRequester(lease, 2 * this.#t.acquireMs) },
            owned.current,
          ),
        );
      } catch (error) {
        if (!(error instanceof LeaseConflictError)) this.#failures.failed(`release:${owned.lease.id}`, error, owned.leaseToken);
      }
      if (to === null && reason === 'Shutdown') this.#releasedOnStop++;
      if (to === null && reason === 'Rebalanced') this.#cooldown.set(owned.lease.id, this.#scheduler.now() + 2 * this.#t.acquireMs);
      owned.log('released (%s)%s', reason, to ? ` to ${to}` : '');
      this.#events.next({ type: 'leaseReleased', owner: this.owner, lease: owned.leaseToken, reason });
    })();
    this.#track(owned.closing);
    return owned.closing;
  }

  /**
   * After a shutdown released what it held: settles the leases this host asked for. One handed to it that
   * it has not taken yet (nobody reads it, see `isUntaken`) is released; a request not answered yet is
   * withdrawn, so its owner does not hand the lease to a stopped host. Either would otherwise wait for an
   * expiration. Then, if it released any to nobody, tells the live hosts (a notice in a few of their leases,
   * which they meet at their next write), so one of them takes the leases within about a checkpoint or a
   * renewal instead of at its next round. Best effort and bounded: without it, the next rounds find the leases.
   */
  async #afterRelease(): Promise<void> {
    const asked = [...this.#askedFor].filter((id) => !this.#owned.has(id));
    const announce = async () => {
      const { leases } = await listProcessorLeases(this.#store, this.#naming);
      const notices = await announceRelease(this.#store, leases, this.owner, this.#now(), this.#t.expirationMs);
      this.#log('released %d leases; left a notice in %d leases of the other hosts', this.#releasedOnStop, notices);
    };
    // Each step bounded: past an acquire interval the other hosts' own rounds are as quick.
    try {
      if (asked.length > 0) {
        await this.#withTimeout(Promise.all(asked.map((id) => this.#settleAsked(id))).then(() => undefined), this.#t.acquireMs, 'settling the leases asked for took over %d ms; gave up');
      }
    } catch (error) {
      this.#failures.failed('settle', error);
    }
    try {
      if (this.#releasedOnStop > 0) await this.#withTimeout(announce(), this.#t.acquireMs, 'telling the other hosts of the released leases took over %d ms; gave up');
    } catch (error) {
      this.#failures.failed('announce', error);
    }
  }

  /** Releases lease `id` if it was handed to this host and not taken, or withdraws this host's request in it. */
  async #settleAsked(id: string): Promise<void> {
    for (let attempt = 1; attempt <= 3; attempt++) {
      const lease = await this.#store.read(id);
      const handed = lease?.owner === this.owner && isUntaken(lease);
      if (!lease || (!handed && lease.properties[HANDOFF_TO] !== this.owner)) return;
      try {
        // Conditional on the version read: an owner handing the lease over meanwhile makes this conflict.
        await this.#store.replace(
          handed ? { ...lease, owner: null, properties: withoutSignals(lease.properties), timestampMs: this.#now() } : { ...lease, properties: withoutRequest(lease.properties) },
        );
        if (handed) {
          this.#releasedOnStop++;
          this.#log('released lease %s, handed to this host and not taken yet', lease.leaseToken);
        }
        return;
      } catch (error) {
        if (!(error instanceof LeaseConflictError)) {
          this.#failures.failed(`release:${id}`, error, lease.leaseToken);
          return;
        }
      }
    }
  }

  /**
   * When a lease just acquired first renews: at a spread fraction of the renew interval (successive
   * golden-ratio steps), so the leases a host takes together do not all renew in the same instant. Their
   * renewals stay spread over the interval afterwards, which keeps the request rate even and gives a release
   * notice a lease that its owner writes soon. Costs at most one early renewal per acquisition.
   */
  #firstRenewalMs(): number {
    const phase = this.#renewPhase;
    this.#renewPhase = (phase + GOLDEN) % 1;
    return Math.max(this.#t.renewMs / 10, this.#t.renewMs * (1 - phase));
  }

  // ---- helpers -------------------------------------------------------------------------------------------

  #track(work: Promise<unknown>): void {
    this.#pending.add(work);
    const forget = () => this.#pending.delete(work);
    work.then(forget, forget);
  }

  /** Errors no retry can fix end the coordinator: `acquired$` errors, leases are dropped. */
  #fatal(error: unknown): boolean {
    const reason = fatalCloseReason(error);
    if (!reason) return false;
    if (this.#failedFatally) return true;
    this.#failedFatally = true;
    this.#events.next(errorEvent(this.owner, error));
    for (const owned of [...this.#owned.values()]) this.#end(owned, reason);
    this.#stopping ??= Promise.resolve();
    this.#stopSignal.abort();
    this.#scanTimer?.unsubscribe();
    this.#acquired.error(error);
    this.#events.complete();
    return true;
  }

  /** Waits `ms` (scheduler time), or until the coordinator stops. */
  #delay(ms: number): Promise<void> {
    return sleep(ms, this.#scheduler, this.#stopSignal.signal);
  }

  /** `work`, or a rejection with `message` (its `%d` replaced by `ms`) if it takes longer than `ms`. */
  #withTimeout(work: Promise<void>, ms: number, message: string): Promise<void> {
    let timer: Subscription | undefined;
    const timeout = new Promise<void>((_, reject) => {
      timer = this.#scheduler.schedule(() => reject(new Error(message.replace('%d', String(ms)))), ms);
    });
    return Promise.race([work, timeout]).finally(() => timer?.unsubscribe());
  }
}

/** A load as a short decimal string (3 significant digits are plenty to balance on). */
function formatLoad(load: number): string {
  return load === 0 ? '0' : String(Number(load.toPrecision(3)));
}
