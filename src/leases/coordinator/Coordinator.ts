// Role: the life cycle of one host's lease coordinator and the wiring of its roles. Subscribing to
// `acquired$` starts it: bootstrap (create the leases once, own those claimed) → the balance loop (Balancer)
// → `stop()`: hand every ownership over (Endings), settle and announce (Departure), wait for work in flight.
// A fatal error ends it at once. The roles: Balancer, Acquirer, LeaseWriter, Renewer, GonePartitions,
// Endings, Departure (see docs/architecture.md).
import { Observable, Subject } from 'rxjs';
import type { Subscription } from 'rxjs';
import { errorEvent } from '../../errors/errorEvent.js';
import { fatalCloseReason } from '../../errors/classify.js';
import type { FeedEvent } from '../../core/events.js';
import { monotonicOf, wallClockOf } from '../../internal/clocks.js';
import { logger } from '../../internal/log.js';
import type { Lease, NewLease } from '../Lease.js';
import type { LeaseCoordinator, OwnedLease } from '../LeaseCoordinator.js';
import { namingOf } from '../protocol/documents.js';
import { Acquirer } from './Acquirer.js';
import { Balancer } from './Balancer.js';
import { bootstrapLeases, type BootstrapResult } from './bootstrap.js';
import { HeldLock } from './bootstrapLock.js';
import { delay, PartitionList, Tasks, type CoordinatorContext } from './context.js';
import { Departure } from './Departure.js';
import { Endings } from './Endings.js';
import { FailureCounter } from './FailureCounter.js';
import { GonePartitions } from './GonePartitions.js';
import { LeaseWriter } from './LeaseWriter.js';
import { NameGuard } from './NameGuard.js';
import { Observations } from './Observations.js';
import { validateOptions, type LeaseCoordinatorOptions, type ResolvedCoordinatorOptions } from './options.js';
import type { Ownership } from './Ownership.js';
import { Renewer } from './Renewer.js';
import { Cooldown } from './schedule.js';
import { Coverage } from './Coverage.js';

/** @internal One host's lease coordinator: see {@link createLeaseCoordinator}. */
export class Coordinator implements LeaseCoordinator {
  readonly owner: string;
  readonly acquired$: Observable<OwnedLease>;
  readonly events$: Observable<FeedEvent>;

  readonly #ctx: CoordinatorContext;
  readonly #acquired = new Subject<OwnedLease>();
  readonly #events = new Subject<FeedEvent>();
  readonly #stopSignal = new AbortController();
  readonly #tasks = new Tasks();
  /** The options as given, with the lease options resolved (defaults applied). */
  readonly #options: LeaseCoordinatorOptions & ResolvedCoordinatorOptions;
  readonly #balancer: Balancer;
  readonly #acquirer: Acquirer;
  readonly #endings: Endings;
  readonly #departure: Departure;
  readonly #coverage: Coverage;
  /** The bootstrap lock a failed bootstrap or a gap repair of this host keeps, for its next bootstrap to take back. */
  readonly #heldLock = new HeldLock();
  #started = false;
  #stopping: Promise<void> | undefined;
  #failedFatally = false;
  /** The next bootstrap attempt after one failed. */
  #retry: Subscription | undefined;
  /** The next try at a bootstrap this host went on from without `.info` written (see {@link Coordinator.#unfinished}). */
  #finishing: Subscription | undefined;
  /** Whether this host reported that its processor's leases are gone while `.info` says they exist. */
  #goneReported = false;

  constructor(options: LeaseCoordinatorOptions) {
    const o = validateOptions(options);
    const t = o.timings;
    this.#options = { ...options, ...o };
    this.owner = options.owner;
    const ctx = this.#contextOf(options, o);
    this.#ctx = ctx;

    // The roles, wired: each gets the ones it hands work to.
    const balanceBy = o.balanceBy;
    const cooldown = new Cooldown();
    this.#departure = new Departure(ctx);
    this.#endings = new Endings(ctx, cooldown, () => this.#departure.releasedToNobody());
    const writer = new LeaseWriter(ctx, this.#endings, { confirmed: (owned) => renewer.schedule(owned, t.renewMs), balanceNow: () => this.#balancer.soon(0) }, balanceBy);
    const renewer = new Renewer(ctx, writer);
    const gone = new GonePartitions(ctx, this.#endings, () => this.#balancer.soon(0));
    this.#acquirer = new Acquirer(ctx, {
      roles: { writer, gone, endings: this.#endings },
      renewer,
      acquired: (owned) => this.#acquired.next(owned),
      asked: (id) => this.#departure.asked(id),
    });
    const coverage = new Coverage(ctx, { startPosition: options.startPosition, held: this.#heldLock });
    this.#coverage = coverage;
    this.#balancer = new Balancer(
      ctx,
      { acquirer: this.#acquirer, endings: this.#endings, writer, cooldown, finish: (lease) => gone.finish(lease), leasesGone: () => this.#leasesGone() },
      balanceBy,
      { minLeases: o.minLeases, maxLeases: o.maxLeases },
      (leases) => this.#reviewCoverage(coverage, leases),
    );

    this.events$ = this.#events.asObservable();
    this.acquired$ = this.#acquiredStream();
  }

  owned(): readonly OwnedLease[] {
    return [...this.#ctx.owned.values()];
  }

  stop(): Promise<void> {
    const ctx = this.#ctx;
    this.#stopping ??= (async () => {
      ctx.log('stopping');
      this.#cancelRounds();
      await this.#balancer.running;
      await Promise.all([...ctx.owned.values()].map((owned) => this.#endings.handOver(owned, 'Shutdown')));
      if (!this.#failedFatally) await this.#departure.leave();
      await this.#tasks.settle();
      ctx.log('stopped');
      this.#acquired.complete();
      this.#events.complete();
    })();
    return this.#stopping;
  }

  /** The state and services the roles share. */
  #contextOf(options: LeaseCoordinatorOptions, o: ResolvedCoordinatorOptions): CoordinatorContext {
    const t = o.timings;
    // Durations on a monotonic clock, timestamps for other processes on the wall clock (docs/lease-protocol.md, "Clocks").
    const scheduler = monotonicOf(options.scheduler);
    const now = wallClockOf(options.now, options.scheduler);
    const source = options.source;
    return {
      owner: this.owner,
      store: options.store,
      naming: namingOf(o.prefix, o.leaseScheme, this.owner, options.mode ?? source?.mode ?? 'latestVersion', now),
      t,
      scheduler,
      now,
      log: logger('lease', { owner: this.owner }),
      owned: new Map<string, Ownership>(),
      partitions: new PartitionList(options.listPartitions ?? ((signal) => source!.listPartitions(signal)), this.#stopSignal.signal),
      names: new NameGuard(this.owner, t.expirationMs),
      observed: new Observations(this.owner),
      failures: new FailureCounter(this.owner, (event) => this.#events.next(event)),
      emit: (event) => this.#events.next(event),
      stopped: () => this.#stopping !== undefined,
      stopSignal: this.#stopSignal.signal,
      fatal: (error) => this.#fatal(error),
      track: (work) => this.#tasks.track(work),
      ...(options.claiming ? { claiming: options.claiming } : {}),
    };
  }

  /** `acquired$`: the first subscriber starts the coordinator, the last one leaving stops it. */
  #acquiredStream(): Observable<OwnedLease> {
    const ctx = this.#ctx;
    return new Observable<OwnedLease>((subscriber) => {
      if (this.#stopping) {
        subscriber.complete();
        return;
      }
      const inner = this.#acquired.subscribe(subscriber);
      for (const owned of ctx.owned.values()) subscriber.next(owned);
      if (!this.#started) {
        this.#started = true;
        // Tracked: stop() waits for a bootstrap in flight, so leases it creates as this host's are released.
        ctx.track(this.#start());
      }
      return () => {
        inner.unsubscribe();
        if (!this.#acquired.observed) void this.stop();
      };
    });
  }

  async #start(): Promise<void> {
    const ctx = this.#ctx;
    let bootstrap: BootstrapResult;
    try {
      bootstrap = await this.#bootstrap(true);
    } catch (error) {
      if (this.#fatal(error)) return;
      ctx.failures.failed('bootstrap', error);
      if (!ctx.stopped()) this.#retry = ctx.scheduler.schedule(() => ctx.track(this.#start()), ctx.t.acquireMs);
      return;
    }
    // Leases this host just created are all there are: the first round starts on them without a listing.
    // On existing leases, the listing made beside the `.info` read stands in for the first round's.
    this.#balancer.soon(0, bootstrap.complete ? bootstrap.created : undefined, bootstrap.listing);
  }

  /**
   * Creates the leases unless `.info` says they exist, and owns those it claimed; throws what failed. At the
   * start (`listBeside`), the leases are listed beside the first `.info` read, for the first balancing round.
   * `claim: false` creates every lease free (a try at finishing a bootstrap, while this host owns leases).
   */
  async #bootstrap(listBeside = false, claim = true): Promise<BootstrapResult> {
    const ctx = this.#ctx;
    const maxLeases = this.#options.maxLeases;
    // The partitions are listed while the bootstrap looks for its marker: a fresh container needs them to
    // create the leases, and every host needs them (with parents) for the leases it will own.
    const partitions = ctx.partitions.refresh();
    partitions.catch(() => undefined); // awaited below, or by the bootstrap
    const bootstrap = await bootstrapLeases({
      store: ctx.store,
      naming: ctx.naming,
      expirationMs: ctx.t.expirationMs,
      retryMs: Math.min(1000, ctx.t.acquireMs),
      listPartitions: () => partitions,
      ...(this.#options.startPosition ? { startPosition: this.#options.startPosition } : {}),
      claim: !claim ? 0 : maxLeases > 0 ? maxLeases : Infinity,
      clock: () => ctx.scheduler.now(),
      stopped: () => ctx.stopped(),
      delay: (ms) => delay(ctx, ms),
      log: ctx.log,
      warn: (message) => ctx.emit({ type: 'stall', owner: this.owner, message }),
      listBeside,
      ...(ctx.claiming ? { claiming: (lease: NewLease) => ctx.claiming!(lease, ctx.partitions.of(lease.leaseToken, lease.feedRange)) } : {}),
      background: (work) => ctx.track(work.catch((error: unknown) => this.#fatal(error) || ctx.failures.failed('bootstrap', error))),
      held: this.#heldLock,
      unfinished: () => this.#unfinished(),
    });
    if (bootstrap.failure === undefined) ctx.failures.succeeded('bootstrap');
    await partitions.catch((error: unknown) => this.#fatal(error) || ctx.failures.failed('partitions', error));
    // Owned (or, after a stop() meanwhile, released) from when their creates were sent; also when some of
    // the creates failed: those that landed are claimed by this host all the same.
    for (const lease of bootstrap.created) if (lease.owner === this.owner) ctx.track(this.#acquirer.ownCreated(lease, bootstrap.sentAt));
    if (bootstrap.failure !== undefined) throw bootstrap.failure;
    return bootstrap;
  }

  /**
   * No lease of this processor is left: a reset deleted them (hosts that held one lost it at their next
   * write), or they were deleted by hand. Bootstraps again, as a start does (once `.info` is gone, as after a
   * reset). While `.info` says the leases exist, the whole key space is a gap like any other (Coverage): a
   * reset that landed between a bootstrap's lease creates and its `.info` write leaves exactly that, and no
   * host would bootstrap again. Repaired once it has lasted a lease expiration; reported once meanwhile.
   * Returns the delay until the next round.
   */
  async #leasesGone(): Promise<number> {
    const ctx = this.#ctx;
    const { created } = await this.#bootstrap().catch((error: unknown) => {
      // Some creates may have landed: the next round lists leases and would not bootstrap again.
      this.#unfinished();
      throw error;
    });
    if (created.length > 0) {
      ctx.log('no lease was left under the prefix: bootstrapped again (%d leases)', created.length);
      this.#goneReported = false;
      return 0;
    }
    if (ctx.stopped()) return 0;
    const review = this.#reviewCoverage(this.#coverage, []);
    if (review && (await review)) {
      this.#goneReported = false;
      return 0;
    }
    if (!this.#goneReported && !ctx.stopped()) {
      this.#goneReported = true;
      const info = `${ctx.naming.markerPrefix}.info`;
      ctx.emit({
        type: 'stall',
        owner: this.owner,
        message: `no lease under prefix '${ctx.naming.prefix}' while its bootstrap marker ${info} says they exist: nothing is read. ` +
          `Unless leases appear, they are created again (from startFrom) once none has been seen for ${ctx.t.expirationMs} ms`,
      });
    }
    return ctx.t.acquireMs;
  }

  /**
   * A bootstrap this host went on from is not finished: `.info` is not written (its create failed after the
   * leases were created, or a bootstrap after the leases were found gone failed). Tried again an acquire
   * interval later, until `.info` is there: the try takes this host's lock back while its hold lasts (counting
   * the leases the failed bootstrap knew of as listed), creates what is missing (free) and writes `.info`.
   * Without it, `.info` stayed absent for as long as this host ran, and every start until another host wrote it
   * bootstrapped again under the lock (docs/lease-protocol.md, *Bootstrap*).
   */
  #unfinished(): void {
    const ctx = this.#ctx;
    if (ctx.stopped() || this.#finishing) return;
    this.#finishing = ctx.scheduler.schedule(() => {
      this.#finishing = undefined;
      ctx.track(this.#finishBootstrap());
    }, ctx.t.acquireMs);
  }

  async #finishBootstrap(): Promise<void> {
    const ctx = this.#ctx;
    try {
      await this.#bootstrap(false, false);
    } catch (error) {
      if (this.#fatal(error)) return;
      ctx.failures.failed('bootstrap', error);
      this.#unfinished();
    }
  }

  /**
   * The balance loop's coverage step (Coverage): `false` at once while the leases cover the key space. A
   * failed review or repair is counted and retried next round; it does not fail the round. A repair that
   * created leases is followed by a try at the bootstrap (`.info` read; written if absent): a create that
   * landed after a reset deleted the leases and `.info` leaves a lease without `.info`, and no round
   * bootstraps while leases are listed (the gap beside it is repaired, `.info` was written by nobody).
   */
  #reviewCoverage(coverage: Coverage, leases: readonly Lease[]): false | Promise<boolean> {
    const ctx = this.#ctx;
    const review = coverage.review(leases);
    if (!review) {
      ctx.failures.succeeded('coverage');
      return false;
    }
    return review.then(
      (created) => {
        ctx.failures.succeeded('coverage');
        if (created) this.#unfinished();
        return created;
      },
      (error: unknown) => {
        if (!this.#fatal(error)) ctx.failures.failed('coverage', error);
        return false;
      },
    );
  }

  /** Errors no retry can fix end the coordinator: `acquired$` errors, leases are dropped. */
  #fatal(error: unknown): boolean {
    const reason = fatalCloseReason(error);
    if (!reason) return false;
    if (this.#failedFatally) return true;
    this.#failedFatally = true;
    this.#events.next(errorEvent(this.owner, error));
    this.#endings.abortAll(reason);
    this.#stopping ??= Promise.resolve();
    this.#cancelRounds();
    this.#acquired.error(error);
    this.#events.complete();
    return true;
  }

  /** Starts nothing more: aborts the stop signal, cancels a scheduled start retry and bootstrap finish, stops balancing. */
  #cancelRounds(): void {
    this.#stopSignal.abort();
    this.#retry?.unsubscribe();
    this.#finishing?.unsubscribe();
    this.#balancer.cancel();
  }
}
