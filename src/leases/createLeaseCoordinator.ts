import { asyncScheduler, Observable, Subject } from 'rxjs';
import type { SchedulerLike, Subscription } from 'rxjs';
import type { CloseReason, FeedEvent } from '../core/events.js';
import type { FeedMode, FeedRange, Partition, Position } from '../core/Partition.js';
import { rangesOverlap } from '../core/Partition.js';
import { CorruptLeaseError, CredentialsError, InvalidOptionsError, LeaseLostError, ResourceGoneError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import type { Logger } from '../internal/log.js';
import { HANDOFF_AT, HANDOFF_TO, handoffRequest, planBalance, withoutHandoff } from './balancing.js';
import type { Lease, NewLease } from './Lease.js';
import { LeaseConflictError } from './LeaseConflictError.js';
import type { LeaseCoordinator, OwnedLease } from './LeaseCoordinator.js';
import type { LeaseStore } from './LeaseStore.js';

/** Options of {@link createLeaseCoordinator}. */
export interface LeaseCoordinatorOptions {
  /** Where leases live (shared by every host of the processor). Required. */
  readonly store: LeaseStore;
  /** The feed whose partitions get one lease each; only `listPartitions` (and `mode`) are used. */
  readonly source?: {
    /** Lists the live partitions. */
    listPartitions(signal?: AbortSignal): Promise<readonly Partition[]>;
    readonly mode?: FeedMode;
  };
  /** Alternative to `source`: how to list the live partitions. */
  readonly listPartitions?: (signal?: AbortSignal) => Promise<readonly Partition[]>;
  /** This host's unique name, written to the lease `Owner` field. Required, non-empty. */
  readonly owner: string;
  /**
   * Prefix of every lease id of this processor, so several processors can share one store. End it with a
   * separator (e.g. `'orders-view.'`) so that no other processor's prefix starts with it. Default `''`.
   */
  readonly prefix?: string;
  /** Feed mode written to new leases (`Mode`). Default: `source.mode`, else `'latestVersion'`. */
  readonly mode?: FeedMode;
  /**
   * How often (ms) a host scans the leases while the share is still moving (free leases, imbalance, or it
   * just acquired something). Once settled it scans when the next lease held by another host would
   * expire, and at least every `leaseExpirationMs / 2`. Default 13 000 (as .NET).
   */
  readonly leaseAcquireIntervalMs?: number;
  /**
   * How long (ms) after its last write a held lease is renewed. A checkpoint counts as a renewal, so busy
   * leases cost nothing extra. A failed renewal is retried every `(expiration − renew) / 4` until the
   * lease would expire. Default 40 000 (.NET: 17 000 with a read before each write; see bench/leaseCost.ts).
   */
  readonly leaseRenewIntervalMs?: number;
  /** A lease not renewed for this long (ms) is free for any host to take. Default 60 000 (as .NET). */
  readonly leaseExpirationMs?: number;
  /** Hold at least this many leases when there are enough (0 = no minimum). Default 0. */
  readonly minLeases?: number;
  /** Never hold more than this many leases (0 = no limit). Default 0. */
  readonly maxLeases?: number;
  /** How long (ms) a voluntary release waits for the partition's drain before releasing anyway. Default 10 000. */
  readonly drainTimeoutMs?: number;
  /** Clock and timers. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /** Clock override (ms since the epoch); default `scheduler.now()`. */
  readonly now?: () => number;
}

/**
 * Default lease timings, in ms: acquire 13 000 (as .NET), renew 40 000 (.NET 17 000), expiration 60 000 (as
 * .NET), drain timeout 10 000. Renewing every 40 s with retries leaves 20 s for 4 retries before expiry and
 * costs under half the .NET lease-store requests when idle (bench/leaseCost.ts).
 *
 * @example
 * ```ts
 * createLeaseCoordinator({ ...options, leaseExpirationMs: 2 * LEASE_DEFAULTS.leaseExpirationMs });
 * ```
 */
export const LEASE_DEFAULTS = Object.freeze({
  leaseAcquireIntervalMs: 13_000,
  leaseRenewIntervalMs: 40_000,
  leaseExpirationMs: 60_000,
  drainTimeoutMs: 10_000,
});

const FULL_RANGE: FeedRange = { minInclusive: '', maxExclusive: 'FF' };
/** A marker document that exists but is not in our format. */
const FOREIGN = Symbol('foreign marker');

/**
 * Creates the lease coordinator of one host: it bootstraps one lease per partition under `prefix`
 * (exactly once, however many hosts start together), acquires free and expired leases, renews the ones
 * it holds, balances them evenly with the other hosts (stealing from the most loaded), fences every
 * write with the lease etag and an epoch, replaces leases of split/merged partitions, and drains then
 * releases its leases on {@link LeaseCoordinator.stop}.
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

interface Timings {
  acquireMs: number;
  renewMs: number;
  expirationMs: number;
  drainTimeoutMs: number;
  renewRetryMs: number;
}

function validate(options: LeaseCoordinatorOptions): Timings {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('options', 'pass an options object');
  if (!options.store) throw new InvalidOptionsError('store', 'pass a LeaseStore, e.g. new MemoryLeaseStore()');
  if (typeof options.owner !== 'string' || options.owner.length === 0) {
    throw new InvalidOptionsError('owner', 'pass a non-empty, unique host name (e.g. the pod name)');
  }
  if (!options.listPartitions && typeof options.source?.listPartitions !== 'function') {
    throw new InvalidOptionsError('source', 'pass a source (or a listPartitions function) so leases can be created');
  }
  if (options.prefix !== undefined && typeof options.prefix !== 'string') {
    throw new InvalidOptionsError('prefix', 'must be a string');
  }
  const positive = (name: keyof typeof LEASE_DEFAULTS, allowZero = false): number => {
    const value = options[name] ?? LEASE_DEFAULTS[name];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
      throw new InvalidOptionsError(name, `must be a ${allowZero ? 'non-negative' : 'positive'} number of milliseconds, got ${String(value)}`);
    }
    return value;
  };
  const acquireMs = positive('leaseAcquireIntervalMs');
  const renewMs = positive('leaseRenewIntervalMs');
  const expirationMs = positive('leaseExpirationMs');
  const drainTimeoutMs = positive('drainTimeoutMs', true);
  if (renewMs >= expirationMs) {
    throw new InvalidOptionsError(
      'leaseRenewIntervalMs',
      `must be less than leaseExpirationMs (${expirationMs}), or leases expire before they are renewed`,
    );
  }
  if (acquireMs > expirationMs) {
    throw new InvalidOptionsError('leaseAcquireIntervalMs', `must not exceed leaseExpirationMs (${expirationMs})`);
  }
  for (const name of ['minLeases', 'maxLeases'] as const) {
    const value = options[name];
    if (value !== undefined && (!Number.isInteger(value) || value < 0)) {
      throw new InvalidOptionsError(name, `must be a non-negative integer (0 = no limit), got ${String(value)}`);
    }
  }
  if (options.maxLeases && options.minLeases && options.minLeases > options.maxLeases) {
    throw new InvalidOptionsError('minLeases', `must not exceed maxLeases (${options.maxLeases})`);
  }
  return { acquireMs, renewMs, expirationMs, drainTimeoutMs, renewRetryMs: Math.max(1, (expirationMs - renewMs) / 4) };
}

class Held implements OwnedLease {
  readonly leaseToken: string;
  readonly epoch: number;
  readonly controller = new AbortController();
  closeReason: CloseReason | undefined;
  /** The latest stored version (its etag is the one the next write is conditional on). */
  current: Lease;
  drain: (() => Promise<void>) | undefined;
  /** Writes to one lease run one after the other, so renewals never race our own checkpoints. */
  queue: Promise<unknown> = Promise.resolve();
  renewTimer: Subscription | undefined;
  closing: Promise<void> | undefined;
  readonly log: Logger;

  constructor(
    readonly lease: Lease,
    readonly partition: Partition,
    private readonly host: Coordinator,
  ) {
    this.leaseToken = lease.leaseToken;
    this.epoch = lease.epoch;
    this.current = lease;
    this.log = logger('lease', { owner: lease.owner ?? '', lease: lease.leaseToken });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  checkpoint(position: Position): Promise<void> {
    return this.host.checkpoint(this, position);
  }

  partitionGone(position: Position | null): Promise<void> {
    return this.host.partitionGone(this, position);
  }

  onDrain(drain: () => Promise<void>): void {
    this.drain = drain;
  }

  enqueue<R>(work: () => Promise<R>): Promise<R> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

class Coordinator implements LeaseCoordinator {
  readonly owner: string;
  readonly acquired$: Observable<OwnedLease>;
  readonly events$: Observable<FeedEvent>;

  readonly #store: LeaseStore;
  readonly #prefix: string;
  readonly #mode: FeedMode;
  readonly #listPartitions: (signal?: AbortSignal) => Promise<readonly Partition[]>;
  readonly #t: Timings;
  readonly #minLeases: number;
  readonly #maxLeases: number;
  readonly #scheduler: SchedulerLike;
  readonly #now: () => number;
  readonly #log: Logger;
  readonly #balancerLog: Logger;
  readonly #acquired = new Subject<OwnedLease>();
  readonly #events = new Subject<FeedEvent>();
  readonly #held = new Map<string, Held>();
  readonly #partitions = new Map<string, Partition>();
  readonly #reportedCorrupt = new Set<string>();
  readonly #stopSignal = new AbortController();
  #subscribers = 0;
  #started = false;
  #stopping: Promise<void> | undefined;
  #scanTimer: Subscription | undefined;
  #scanning: Promise<void> | undefined;
  #rescanRequested = false;
  /** Voluntary closes in progress (drain, then release). */
  readonly #closings = new Set<Promise<void>>();

  constructor(options: LeaseCoordinatorOptions) {
    this.#t = validate(options);
    this.owner = options.owner;
    this.#store = options.store;
    this.#prefix = options.prefix ?? '';
    this.#mode = options.mode ?? options.source?.mode ?? 'latestVersion';
    const source = options.source;
    this.#listPartitions = options.listPartitions ?? ((signal) => source!.listPartitions(signal));
    this.#minLeases = options.minLeases ?? 0;
    this.#maxLeases = options.maxLeases ?? 0;
    this.#scheduler = options.scheduler ?? asyncScheduler;
    const scheduler = this.#scheduler;
    this.#now = options.now ?? (() => scheduler.now());
    this.#log = logger('lease', { owner: this.owner });
    this.#balancerLog = logger('balancer', { owner: this.owner });
    this.events$ = this.#events.asObservable();
    this.acquired$ = new Observable<OwnedLease>((subscriber) => {
      if (this.#stopping) {
        subscriber.complete();
        return;
      }
      const inner = this.#acquired.subscribe(subscriber);
      for (const held of this.#held.values()) subscriber.next(held);
      this.#subscribers++;
      if (!this.#started) {
        this.#started = true;
        void this.#start();
      }
      return () => {
        inner.unsubscribe();
        if (--this.#subscribers === 0) void this.stop();
      };
    });
  }

  owned(): readonly OwnedLease[] {
    return [...this.#held.values()];
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#log('stopping');
      this.#stopSignal.abort();
      this.#scanTimer?.unsubscribe();
      await this.#scanning;
      await Promise.all([...this.#held.values()].map((held) => this.#close(held, 'Shutdown', true)));
      await Promise.all([...this.#closings]); // handovers begun by balancing
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
    try {
      await this.#bootstrap();
    } catch (error) {
      if (this.#fatal(error)) return;
      this.#error(error);
      if (!this.#stopped) this.#scanTimer = this.#scheduler.schedule(() => void this.#start(), this.#t.acquireMs);
      return;
    }
    this.#scanSoon(0);
  }

  /** Creates one lease per partition unless `<prefix>.info` says it was done; one host at a time (`.lock`). */
  async #bootstrap(): Promise<void> {
    const infoId = `${this.#prefix}.info`;
    const lockId = `${this.#prefix}.lock`;
    while (!this.#stopped) {
      if (await this.#readMarker(infoId)) {
        // Partitions as the source describes them (with parents), for the leases this host will own.
        await this.#refreshPartitions().catch((error: unknown) => this.#error(error));
        return;
      }
      const lock = await this.#store.createIfAbsent(this.#marker(lockId));
      if (lock) {
        try {
          const partitions = await this.#refreshPartitions();
          this.#log('bootstrapping %d leases', partitions.length);
          await Promise.all(
            partitions.map((p) => this.#store.createIfAbsent(this.#newLease(p.id, p.range, null, {}))),
          );
          await this.#store.createIfAbsent(this.#marker(infoId));
        } finally {
          await this.#store.delete(lock).catch(() => undefined);
        }
        return;
      }
      const existing = await this.#readMarker(lockId);
      if (existing && existing !== FOREIGN && this.#now() - existing.timestampMs >= this.#t.expirationMs) {
        // The host that took the lock died while bootstrapping; take over.
        this.#log('removing stale bootstrap lock of %s', existing.owner);
        await this.#store.delete(existing).catch(() => undefined);
        continue;
      }
      await this.#delay(Math.min(1000, this.#t.acquireMs));
    }
  }

  /** Reads a marker document; one in another format (e.g. the .NET processor's `{ id }`) still counts. */
  async #readMarker(id: string): Promise<Lease | typeof FOREIGN | undefined> {
    try {
      return await this.#store.read(id);
    } catch (error) {
      if (error instanceof CorruptLeaseError) return FOREIGN;
      throw error;
    }
  }

  #marker(id: string): NewLease {
    return {
      id,
      leaseToken: id.slice(this.#prefix.length),
      feedRange: undefined,
      owner: this.owner,
      continuation: null,
      timestampMs: this.#now(),
      epoch: 0,
      mode: this.#mode,
      properties: {},
    };
  }

  #isMarker(id: string): boolean {
    return id === `${this.#prefix}.info` || id === `${this.#prefix}.lock`;
  }

  #newLease(token: string, range: FeedRange, continuation: Position | null, properties: Readonly<Record<string, string>>): NewLease {
    return {
      id: this.#prefix + token,
      leaseToken: token,
      feedRange: range,
      owner: null,
      continuation,
      timestampMs: this.#now(),
      epoch: 0,
      mode: this.#mode,
      properties: { ...properties },
    };
  }

  async #refreshPartitions(): Promise<readonly Partition[]> {
    const partitions = await this.#listPartitions(this.#stopSignal.signal);
    for (const p of partitions) this.#partitions.set(p.id, p);
    return partitions;
  }

  // ---- scanning and balancing -------------------------------------------------------------------------

  #scanSoon(delayMs: number): void {
    if (this.#stopped) return;
    if (this.#scanning) {
      this.#rescanRequested = true;
      return;
    }
    this.#scanTimer?.unsubscribe();
    this.#scanTimer = this.#scheduler.schedule(() => {
      this.#scanning = this.#scan()
        .catch((error: unknown) => {
          if (!this.#fatal(error)) this.#error(error);
          return this.#t.acquireMs;
        })
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
  async #scan(): Promise<number> {
    const listing = await this.#store.list(this.#prefix);
    if (this.#stopped) return 0;
    for (const corrupt of listing.corrupt) {
      const key = `${corrupt.documentId}\u0000${corrupt.problem}`;
      if (this.#isMarker(corrupt.documentId) || this.#reportedCorrupt.has(key)) continue;
      this.#reportedCorrupt.add(key);
      this.#log('skipping corrupt lease document %s: %s', corrupt.documentId, corrupt.problem);
      this.#events.next({ type: 'error', owner: this.owner, lease: corrupt.documentId, error: corrupt });
    }
    const leases = listing.leases.filter((l) => !this.#isMarker(l.id));
    this.#reconcile(leases);

    const now = this.#now();
    const plan = planBalance(leases, this.owner, now, {
      expirationMs: this.#t.expirationMs,
      minLeases: this.#minLeases,
      maxLeases: this.#maxLeases,
      held: new Set(this.#held.keys()),
    });
    const mine = this.#held.size;
    if (plan.take.length || plan.steal.length || plan.release.length || plan.handoff.length) {
      this.#balancerLog(
        '%d leases, %d live hosts, target %d, mine %d: take %d, ask for %d, hand over %d, release %d',
        leases.length,
        plan.liveOwners,
        plan.target,
        mine,
        plan.take.length,
        plan.steal.length,
        plan.handoff.length,
        plan.release.length,
      );
    }
    for (const l of [...plan.release, ...plan.handoff]) {
      // Not awaited: a drain may take a while, and balancing (and failover) must not wait for it.
      const held = this.#held.get(l.id);
      if (held) void this.#close(held, 'Rebalanced', true);
    }
    await Promise.all([
      ...plan.take.map((l) => this.#acquire(l, false)),
      ...plan.steal.map((l) => this.#askFor(l)),
    ]);

    // Never scan later than the moment a lease held elsewhere could expire, so a crashed host's leases
    // are taken over one expiration after its last write. Otherwise: every acquire interval while the
    // share is moving; once settled, at least every half expiration (to pick up released leases).
    const untilExpiry = plan.nextExpiryMs === undefined ? Infinity : Math.max(1, plan.nextExpiryMs - now + 1);
    return Math.min(plan.settled ? this.#t.expirationMs / 2 : this.#t.acquireMs, untilExpiry);
  }

  /** Ends ownership of held leases the listing shows someone else holds now (or that are gone). */
  #reconcile(leases: readonly Lease[]): void {
    const byId = new Map(leases.map((l) => [l.id, l]));
    for (const held of this.#held.values()) {
      const stored = byId.get(held.lease.id);
      if (!stored) {
        this.#lose(held, undefined, 'lease document deleted');
      } else if (stored.owner !== this.owner || stored.epoch !== held.epoch) {
        this.#lose(held, stored.owner, `now owned by ${stored.owner ?? 'nobody'} (epoch ${stored.epoch})`);
      }
    }
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
      await this.#store.replace({
        ...lease,
        properties: { ...lease.properties, [HANDOFF_TO]: this.owner, [HANDOFF_AT]: String(this.#now()) },
      });
      this.#balancerLog('asked %s to hand over lease %s', lease.owner, lease.leaseToken);
    } catch (error) {
      if (error instanceof LeaseConflictError) return; // it moved meanwhile; the next scan sees how
      if (!this.#fatal(error)) this.#error(error, lease.leaseToken);
    }
  }

  async #acquire(lease: Lease, steal: boolean): Promise<void> {
    if (this.#stopped) return;
    let stored: Lease;
    try {
      stored = await this.#store.replace({
        ...lease,
        owner: this.owner,
        epoch: lease.epoch + 1,
        timestampMs: this.#now(),
        properties: withoutHandoff(lease.properties),
      });
    } catch (error) {
      if (error instanceof LeaseConflictError) {
        this.#log('lease %s taken by another host first', lease.leaseToken);
        return;
      }
      if (!this.#fatal(error)) this.#error(error, lease.leaseToken);
      return;
    }
    if (this.#stopped) {
      await this.#store.replace({ ...stored, owner: null, timestampMs: this.#now() }).catch(() => undefined);
      return;
    }
    const partition = this.#partitions.get(stored.leaseToken) ?? {
      id: stored.leaseToken,
      range: stored.feedRange ?? FULL_RANGE,
    };
    const held = new Held(stored, partition, this);
    this.#held.set(stored.id, held);
    this.#scheduleRenew(held, this.#t.renewMs);
    held.log('acquired (epoch %d%s)', stored.epoch, steal ? `, stolen from ${lease.owner}` : '');
    if (steal) this.#events.next({ type: 'leaseStolen', owner: this.owner, lease: stored.leaseToken, from: lease.owner });
    this.#events.next({ type: 'leaseAcquired', owner: this.owner, lease: stored.leaseToken, epoch: stored.epoch });
    this.#acquired.next(held);
  }

  // ---- writes under a held lease ------------------------------------------------------------------------

  /**
   * Writes `change(current)` conditional on the etag. On a conflict it re-reads: if this host still owns
   * the lease under the same epoch (someone touched another field) it retries; otherwise the lease is lost.
   */
  #write(held: Held, change: (current: Lease) => Lease): Promise<Lease> {
    return held.enqueue(async () => {
      for (let attempt = 0; ; attempt++) {
        if (held.closeReason) throw new LeaseLostError(held.leaseToken, this.owner, undefined);
        try {
          const stored = await this.#store.replace(change(held.current));
          held.current = stored;
          this.#scheduleRenew(held, this.#t.renewMs);
          return stored;
        } catch (error) {
          if (!(error instanceof LeaseConflictError)) throw error;
          const fresh = error.kind === 'missing' ? undefined : await this.#store.read(held.lease.id);
          if (fresh && fresh.owner === this.owner && fresh.epoch === held.epoch && attempt < 3) {
            held.current = fresh;
            continue;
          }
          const newOwner = fresh ? fresh.owner : undefined;
          this.#lose(held, newOwner, fresh ? `now owned by ${fresh.owner ?? 'nobody'}` : 'lease document deleted');
          throw new LeaseLostError(held.leaseToken, this.owner, newOwner, { cause: error });
        }
      }
    });
  }

  async checkpoint(held: Held, position: Position): Promise<void> {
    await this.#write(held, (l) => ({ ...l, continuation: position, timestampMs: this.#now() }));
    held.log('checkpoint %s', position);
  }

  #scheduleRenew(held: Held, delayMs: number): void {
    held.renewTimer?.unsubscribe();
    // Renewals go on while a drain runs (it may outlast the expiration), until the lease is let go.
    if (held.closeReason) return;
    held.renewTimer = this.#scheduler.schedule(() => void this.#renew(held), delayMs);
  }

  async #renew(held: Held): Promise<void> {
    if (held.closeReason) return;
    try {
      await this.#write(held, (l) => ({ ...l, timestampMs: this.#now() }));
      held.log('renewed');
    } catch (error) {
      if (error instanceof LeaseLostError || held.closeReason) return;
      if (this.#fatal(error)) return;
      this.#error(error, held.leaseToken);
      if (this.#now() - held.current.timestampMs >= this.#t.expirationMs) {
        // Another host may take it from now on: stop before it does rather than process twice.
        this.#lose(held, undefined, 'could not renew before expiry');
      } else {
        this.#scheduleRenew(held, this.#t.renewRetryMs);
      }
    }
  }

  // ---- split and merge -------------------------------------------------------------------------------------

  async partitionGone(held: Held, position: Position | null): Promise<void> {
    if (held.closeReason) return;
    await held.enqueue(async () => {
      if (held.closeReason) return; // handled by an earlier call
      const fresh = await this.#store.read(held.lease.id);
      if (fresh && (fresh.owner !== this.owner || fresh.epoch !== held.epoch)) {
        // Fenced: the current owner will split it (from its own, newer, position).
        this.#lose(held, fresh.owner, 'lost before handling the split');
        throw new LeaseLostError(held.leaseToken, this.owner, fresh.owner);
      }
      const parent = fresh ?? held.current;
      const from = position ?? parent.continuation;
      const parentRange = parent.feedRange ?? held.partition.range;
      const live = await this.#refreshPartitions();
      const children = live
        .filter((p) => rangesOverlap(p.range, parentRange))
        .map((p) => childOf(p, parentRange));
      if (children.length === 0 || (children.length === 1 && children[0]!.token === held.leaseToken)) {
        this.#error(new Error(`partition ${held.leaseToken} reported gone but the source still lists it`), held.leaseToken);
        return;
      }
      // Child ids are deterministic, so hosts noticing together create each child once.
      await Promise.all(
        children.map((c) =>
          this.#store.createIfAbsent(this.#newLease(c.token, c.range, from, withoutHandoff(parent.properties))),
        ),
      );
      if (fresh) await this.#store.delete(fresh).catch(() => undefined);
      held.log('partition gone: replaced by %s from %s', children.map((c) => c.token).join(', '), from);
      this.#events.next({
        type: 'partitionSplit',
        owner: this.owner,
        lease: held.leaseToken,
        children: children.map((c) => c.token),
      });
      this.#end(held, 'PartitionGone');
      this.#events.next({ type: 'leaseReleased', owner: this.owner, lease: held.leaseToken, reason: 'PartitionGone' });
    });
    this.#scanSoon(0);
  }

  // ---- ending ownership -----------------------------------------------------------------------------------

  /** Involuntary end: no drain, no release (the lease is not ours to write any more). */
  #lose(held: Held, newOwner: string | null | undefined, why: string): void {
    if (held.closeReason) return;
    held.log('lost: %s', why);
    this.#end(held, 'LeaseLost');
    this.#events.next({
      type: 'leaseLost',
      owner: this.owner,
      lease: held.leaseToken,
      ...(newOwner !== undefined ? { newOwner } : {}),
    });
  }

  #end(held: Held, reason: CloseReason): void {
    held.closeReason = reason;
    held.renewTimer?.unsubscribe();
    if (this.#held.get(held.lease.id) === held) this.#held.delete(held.lease.id);
    held.controller.abort(reason);
  }

  /**
   * Voluntary end: drain (bounded), then release the lease so another host can take it at once: to the
   * host that asked for it, if one did, else to nobody.
   */
  #close(held: Held, reason: CloseReason, release: boolean): Promise<void> {
    if (held.closeReason) return Promise.resolve();
    held.closing ??= (async () => {
      if (held.drain) {
        try {
          await this.#withTimeout(held.drain(), this.#t.drainTimeoutMs);
        } catch (error) {
          this.#error(error, held.leaseToken);
        }
      }
      if (held.closeReason) return; // lost while draining
      this.#end(held, reason);
      let to: string | null = null;
      if (release) {
        try {
          to = await held.enqueue(() => this.#handBack(held));
        } catch (error) {
          if (!(error instanceof LeaseConflictError)) this.#error(error, held.leaseToken);
        }
      }
      held.log('released (%s)%s', reason, to ? ` to ${to}` : '');
      this.#events.next({ type: 'leaseReleased', owner: this.owner, lease: held.leaseToken, reason });
    })();
    const closing = held.closing;
    this.#closings.add(closing);
    void closing.finally(() => this.#closings.delete(closing));
    return closing;
  }

  /** Writes the release; a concurrent handoff request (same owner and epoch) is re-read and honoured. */
  async #handBack(held: Held): Promise<string | null> {
    let current = held.current;
    for (let attempt = 0; ; attempt++) {
      const now = this.#now();
      const to = handoffRequest(current, now, this.#t.expirationMs) ?? null;
      try {
        await this.#store.replace({ ...current, owner: to, properties: withoutHandoff(current.properties), timestampMs: now });
        return to;
      } catch (error) {
        if (!(error instanceof LeaseConflictError) || error.kind === 'missing' || attempt >= 3) throw error;
        const fresh = await this.#store.read(held.lease.id);
        if (!fresh || fresh.owner !== this.owner || fresh.epoch !== held.epoch) return null; // not ours any more
        current = fresh;
      }
    }
  }

  // ---- helpers -------------------------------------------------------------------------------------------

  /** Errors no retry can fix end the coordinator: `acquired$` errors, leases are dropped. */
  #fatal(error: unknown): boolean {
    if (!(error instanceof CredentialsError) && !(error instanceof ResourceGoneError)) return false;
    this.#error(error);
    const reason: CloseReason = error instanceof CredentialsError ? 'Unauthorized' : 'ResourceGone';
    for (const held of [...this.#held.values()]) {
      held.renewTimer?.unsubscribe();
      this.#end(held, reason);
    }
    this.#stopping ??= Promise.resolve();
    this.#stopSignal.abort();
    this.#scanTimer?.unsubscribe();
    this.#acquired.error(error);
    this.#events.complete();
    return true;
  }

  #error(error: unknown, lease?: string): void {
    const err = error instanceof Error ? error : new Error(String(error));
    (lease ? logger('lease', { owner: this.owner, lease }) : this.#log)('error: %s', err.message);
    this.#events.next({ type: 'error', owner: this.owner, ...(lease ? { lease } : {}), error: err });
  }

  #delay(ms: number): Promise<void> {
    return new Promise((resolve) => this.#scheduler.schedule(() => resolve(), ms));
  }

  #withTimeout(work: Promise<void>, ms: number): Promise<void> {
    let timer: Subscription | undefined;
    const timeout = new Promise<void>((_, reject) => {
      timer = this.#scheduler.schedule(() => reject(new Error(`drain did not finish within ${ms} ms; releasing anyway`)), ms);
    });
    return Promise.race([work, timeout]).finally(() => timer?.unsubscribe());
  }
}

/** The lease for the part of `parentRange` that partition `p` covers now (.NET: PK-range or EPK lease). */
function childOf(p: Partition, parentRange: FeedRange): { token: string; range: FeedRange } {
  const contained = p.range.minInclusive >= parentRange.minInclusive && rangeMaxLe(p.range.maxExclusive, parentRange.maxExclusive);
  if (contained) return { token: p.id, range: p.range };
  // A merge: keep reading only the parent's part of the merged partition, as an EPK lease.
  const min = p.range.minInclusive > parentRange.minInclusive ? p.range.minInclusive : parentRange.minInclusive;
  const max = rangeMaxLe(p.range.maxExclusive, parentRange.maxExclusive) ? p.range.maxExclusive : parentRange.maxExclusive;
  return { token: `${min}-${max}`, range: { minInclusive: min, maxExclusive: max } };
}

function rangeMaxLe(a: string, b: string): boolean {
  return a <= b;
}
