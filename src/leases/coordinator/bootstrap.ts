// Role: the bootstrap — creates one lease per partition exactly once, however many hosts start together
// (`.info` / `.lock` markers, the epoch floor), claiming the first ones for this host.
import { rangesOverlap, type Partition, type Position } from '../../core/Partition.js';
import { CorruptLeaseError } from '../../errors/index.js';
import type { Logger } from '../../internal/log.js';
import type { Lease, NewLease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import { listProcessorLeases } from '../protocol/listing.js';
import { confirmEpochFloor, infoId, leaseDocument, lockId, markerDocument, readEpochFloor, type LeaseNaming } from '../protocol/documents.js';
import { coversRange } from './splitMerge.js';
import { handedOverLeases, holdLock, knownLease, knownOf, LockWatch, type HeldLock, type KnownLease } from './bootstrapLock.js';

/** @internal The whole key space: what the partitions a bootstrap creates leases for must cover between them. */
export const KEY_SPACE = { minInclusive: '', maxExclusive: 'FF' } as const;

/** A marker document that exists but is not in our format (e.g. the .NET processor's `{ id }`). */
const FOREIGN = Symbol('foreign marker');

/** @internal What {@link bootstrapLeases} needs. */
export interface BootstrapContext {
  readonly store: LeaseStore;
  readonly naming: LeaseNaming;
  readonly expirationMs: number;
  readonly retryMs: number;
  readonly listPartitions: () => Promise<readonly Partition[]>;
  /** Where a new lease starts (`null`: at the reader's start); asked for every partition before any lease is created. */
  readonly startPosition?: (partition: Partition) => Promise<Position | null>;
  readonly stopped: () => boolean;
  readonly delay: (ms: number) => Promise<void>;
  readonly log: Logger;
  /** Reports something a user should see (an event), e.g. a lock that never goes away. */
  readonly warn: (message: string) => void;
  /**
   * How many of the leases it creates this host takes at once (created with it as owner, epoch 1): what its
   * first balancing round would take of leases nobody owns. The others are created free.
   */
  readonly claim: number;
  /**
   * Monotonic scheduler time (ms): when the creates are sent is when the leases this host claims were last
   * confirmed; how long a foreign lock has been waited on.
   */
  readonly clock: () => number;
  /** Work that must finish before the host stops, but that nothing needs to wait for (marking the bootstrap done). */
  readonly background: (work: Promise<unknown>) => void;
  /**
   * Lists the processor's leases beside the first `.info` read, for the first balancing round to start on when
   * `.info` is there (a start on existing leases saves the round trip of a listing after it). Never used to
   * create leases: a bootstrap lists under its lock. Default false.
   */
  readonly listBeside?: boolean;
  /**
   * Told of each lease this host claims as its create is sent (its first page is read meanwhile); returns what
   * to call when the create did not make it this host's.
   */
  readonly claiming?: (lease: NewLease) => (() => void) | void;
  /** The lock this host's last bootstrap keeps after it failed: its next bootstrap takes it back at once. */
  readonly held?: HeldLock;
  /**
   * Told when a bootstrap that created (or found) every lease could not write `.info` after it returned: its
   * host has gone on with those leases, and must try again (its next bootstrap takes the lock back, finds the
   * leases and writes `.info`), or `.info` is written by no host until another one starts.
   */
  readonly unfinished?: () => void;
}

/** The processor's leases and unreadable lease documents, as the balance loop lists them. */
export type ProcessorListing = Awaited<ReturnType<typeof listProcessorLeases>>;

/** What {@link bootstrapLeases} found or did. */
export interface BootstrapResult {
  /** The leases this call created (those it claims are this host's own from `sentAt` on). */
  readonly created: readonly Lease[];
  /** True when it created one for every partition and none existed: the first balancing round needs no listing. */
  readonly complete: boolean;
  /** When the creates were sent (scheduler time): where the local deadline of a claimed lease counts from. */
  readonly sentAt: number;
  /**
   * Why some of the creates failed, when any did: the bootstrap is not done (`.info` is not written; its lock
   * is kept an expiration, or handed over at a stop; the next attempt, which takes it back, creates what is
   * missing). The creates that landed are in `created` all the
   * same, once every create settled: those claimed are this host's, to own (or release), never to leave
   * behind owned by nobody's reader (or by a host that stopped).
   */
  readonly failure?: unknown;
  /** With `listBeside`: the listing sent beside the `.info` read that found `.info`, when it succeeded. */
  readonly listing?: ProcessorListing;
}

const NOTHING_CREATED: BootstrapResult = { created: [], complete: false, sentAt: 0 };

/** The creates' answers, one per partition (`undefined`: the lease existed, a parent's covers it, or its create failed), when they were sent, and the first failure. */
interface Creates {
  readonly results: readonly (Lease | undefined)[];
  readonly sentAt: number;
  /** The first failure, if a create failed. */
  readonly failure?: unknown;
}

function createdBy({ results, sentAt, failure }: Creates): BootstrapResult {
  const created = results.filter((l) => l !== undefined);
  if (failure !== undefined) return { created, complete: false, sentAt, failure };
  return { created, complete: created.length === results.length, sentAt };
}

async function readMarker(store: LeaseStore, id: string): Promise<Lease | typeof FOREIGN | undefined> {
  try {
    return await store.read(id);
  } catch (error) {
    if (error instanceof CorruptLeaseError) return FOREIGN;
    throw error;
  }
}

/**
 * Creates one lease per partition unless `<prefix>.info` says that was done, one host at a time (the host
 * that creates `<prefix>.lock`, or takes over one handed over at a stop, and reads `.info` absent again under
 * it; it keeps the lock an expiration after its last write: its `.info`, or, when the bootstrap failed, its
 * lease creates), above the epoch floor a reset left (`<prefix>.floor`). A lock of ours whose version this host saw unchanged for an
 * expiration on its monotonic clock is stale (its host died) and is removed. A lock in another format (another processor's, which we cannot date) is waited on for one
 * expiration, then ignored: creating leases is idempotent (deterministic ids), the lock only saves work.
 *
 * @internal
 */
export async function bootstrapLeases(ctx: BootstrapContext): Promise<BootstrapResult> {
  const { store, naming, log } = ctx;
  const info = infoId(naming.markerPrefix);
  const lock = lockId(naming.markerPrefix);
  let foreignLockSince: number | undefined;
  const lockWatch = new LockWatch();
  let listBeside = ctx.listBeside ?? false;
  while (!ctx.stopped()) {
    if (listBeside) {
      // Only beside the first read: a listing is the balance loop's, never the bootstrap's (see below).
      listBeside = false;
      const [done, listing] = await Promise.allSettled([readMarker(store, info), listProcessorLeases(store, naming)]);
      if (done.status === 'rejected') throw done.reason;
      if (done.value) return listing.status === 'fulfilled' ? { ...NOTHING_CREATED, listing: listing.value } : NOTHING_CREATED;
    } else if (await readMarker(store, info)) return NOTHING_CREATED;
    const mine = ctx.held?.takeBack();
    if (mine) {
      // This host's last bootstrap failed and keeps the lock: taken back (touched, conditional on its version:
      // a reset may have deleted it), the floor read beside.
      const [touch, floorRead] = await Promise.allSettled([store.replace({ ...mine.lock, timestampMs: naming.now() }), epochFloor(ctx)]);
      if (touch.status === 'fulfilled' && floorRead.status === 'fulfilled') return await underLock(ctx, touch.value, floorRead.value, mine.known);
      // Kept again (to hand over at a stop) unless the lock changed: a reset deleted it, or another host took it.
      const current = touch.status === 'fulfilled' ? touch.value : await readMarker(store, lock).catch(() => undefined);
      if (current && current !== FOREIGN && current.owner === naming.owner) ctx.background(holdLock(ctx, current, mine.known));
      throw touch.status === 'rejected' ? touch.reason : (floorRead as PromiseRejectedResult).reason;
    }
    // The epoch floor is read beside the lock (no extra round trip), and used only if the lock is ours. The
    // leases already there are listed only once the lock is ours: a listing sent beside the lock may be
    // answered before the creates of a bootstrap that held the lock a moment ago land (it finished, or failed
    // part way, between our `.info` read and our lock), and this one would then create leases for the
    // partitions of its own listing beside that one's (say a gone parent beside its children: the parent then
    // read above their epoch). All settle before any failure is thrown: a lock created while a read failed is
    // removed, not left behind (nor landing after a stop() that did not wait for it).
    const [lockCreate, floorRead] = await Promise.allSettled([store.createIfAbsent(markerDocument(naming, lock)), epochFloor(ctx)]);
    if (lockCreate.status === 'rejected') throw lockCreate.reason;
    const created = lockCreate.value;
    if (floorRead.status === 'rejected') {
      if (created) await store.delete(created).catch(() => undefined);
      throw floorRead.reason;
    }
    const floor = (floorRead as PromiseFulfilledResult<Lease | undefined>).value;
    if (created) return await underLock(ctx, created, floor, []);
    const existing = await readMarker(store, lock);
    const handed = existing && existing !== FOREIGN ? handedOverLeases(existing) : undefined;
    if (existing && existing !== FOREIGN && handed) {
      // A bootstrap that failed handed its lock over as its host stopped, with the leases it knew of: taken
      // over at once (conditional on that version), the listing under it counted with them.
      const taken = await store.replace({ ...existing, owner: naming.owner, timestampMs: naming.now(), properties: {} }).catch(() => undefined);
      if (taken) {
        log('taking over the bootstrap lock handed over by a host that stopped (%d leases known)', handed.length);
        return await underLock(ctx, taken, floor, handed);
      }
    } else if (existing === FOREIGN) {
      // How long it has been there, on this host's monotonic clock (a step of the wall clock does not shorten it).
      foreignLockSince ??= ctx.clock();
      if (ctx.clock() - foreignLockSince >= ctx.expirationMs) {
        ctx.warn(
          `the bootstrap lock ${lock} is not in rxfeed's format and has not gone away for ${ctx.expirationMs} ms; ` +
            'creating the leases without it (safe: lease ids are deterministic)',
        );
        const [floorRead, existing] = await Promise.all([epochFloor(ctx), store.list(naming.prefix)]);
        const creates = await createLeases(ctx, await confirmEpochFloor(store, naming, naming.now, floorRead), knownOf(ctx.naming, existing));
        if (creates.failure === undefined) await markDone(ctx);
        return createdBy(creates);
      }
    } else if (existing) {
      // Stale once this version was seen unchanged for an expiration on this host's monotonic clock; never
      // judged by the lock's wall-clock timestamp (seed 338 of `--faults all`: a host whose wall clock ran ahead
      // removed the lock of a bootstrap that had just finished, then bootstrapped on listings that lagged it).
      if (lockWatch.stale(existing, ctx.clock(), ctx.expirationMs)) {
        log('removing stale bootstrap lock of %s', existing.owner);
        // At once again only once the delete landed: one that failed (a conflict: the read lagged a newer
        // version of the lock, maybe a live one) would be read the same way again, and the loop would spin
        // without a delay (sim seed 948: h6 removing h1's lock over 200 times within 1 virtual ms).
        const removed = await store.delete(existing).then(
          () => true,
          () => false,
        );
        if (removed) continue;
      }
    }
    await ctx.delay(ctx.retryMs);
  }
  return NOTHING_CREATED;
}

/**
 * The bootstrap under our lock `ours`: reads `.info` again and lists the leases, counted with those a lock
 * handed over to us named (`handed`), and creates the missing ones. The lock is removed at once only when
 * nothing was written under it and nothing was handed over with it; else it is kept an expiration after
 * the last write ({@link holdLock}), whether the bootstrap finished or not: a host whose reads lag ours
 * that took the lock at once would list the leases without those writes (seed 532 of the `late`,
 * `topology` sets, `--start now`, with FirstPages: `.info` failed, the lock was removed, a lagging host took
 * it, listed no lease and created split children 3 and 4 from `startFrom` beside claimed parent 2, child 3 at
 * LSN 6 below 2's checkpoint at 11).
 */
async function underLock(ctx: BootstrapContext, ours: Lease, floorRead: Lease | undefined, handed: readonly KnownLease[]): Promise<BootstrapResult> {
  const { store, naming } = ctx;
  let creates: Creates;
  let known: readonly KnownLease[];
  try {
    // `.info` is read again under the lock, beside the listing: the read before the lock may be older than
    // an expiration (a slow lock create), and a bootstrap that finished keeps its lock an expiration after
    // its `.info` landed (`holdLock`), so a read sent once the lock is ours sees that `.info`.
    const [done, existing] = await Promise.all([readMarker(store, infoId(naming.markerPrefix)), store.list(naming.prefix)]);
    if (done) {
      // A lock handed over may follow a `.info` create that failed and landed all the same, a moment ago.
      if (handed.length > 0) ctx.background(holdLock(ctx, ours));
      else await store.delete(ours).catch(() => undefined);
      return NOTHING_CREATED;
    }
    known = [...knownOf(naming, existing), ...handed];
    creates = await createLeases(ctx, await confirmEpochFloor(store, naming, naming.now, floorRead), known);
  } catch (error) {
    // Nothing was created: the leases handed over are handed on.
    if (handed.length > 0) ctx.background(holdLock(ctx, ours, handed));
    else await store.delete(ours).catch(() => undefined);
    throw error;
  }
  const knowledge = [...known, ...creates.results.filter((l) => l !== undefined).map(knownLease)];
  // The leases exist (or some failed: the bootstrap is not done, its lock kept all the same): this host may
  // start on them while the bootstrap is marked done and unlocked.
  if (creates.failure !== undefined) ctx.background(holdLock(ctx, ours, knowledge));
  else ctx.background(markDone(ctx, ours, knowledge));
  return createdBy(creates);
}

/** The record of the highest epoch a reset deleted (`<prefix>.floor`): new leases start above it ({@link confirmEpochFloor}). */
function epochFloor(ctx: BootstrapContext): Promise<Lease | undefined> {
  return readEpochFloor(ctx.store, ctx.naming);
}

/**
 * Creates one lease per partition, in parallel (the first `claim` owned by us), above the epoch `floor`,
 * leaving out partitions a `leased` one (listed, or handed over) covers, and waits for every create to settle, failed or not: a create still in flight when another failed may land
 * later, claimed by this host, and must be in the result. Throws only when nothing was sent. `sentAt` is taken
 * when the creates leave (after the listings and the start positions), so that the leases this host claims are
 * not counted as its own from before.
 */
async function createLeases(ctx: BootstrapContext, floor: number, leased: readonly KnownLease[]): Promise<Creates> {
  const all = await ctx.listPartitions();
  // A listing that misses a partition (a routing map that lags a split: one new child not listed yet) would
  // leave its range without a lease for good: no lease's owner ever sees it gone, and `.info` says the
  // bootstrap is done. Thrown: the lock is removed and the bootstrap retried on a fresh listing.
  if (!coversRange(all.map((p) => ({ token: p.id, range: p.range })), KEY_SPACE)) {
    throw new Error(`the partitions listed (${all.length}) do not cover the key space (the listing lags a split?); retrying the bootstrap`);
  }
  // A bootstrap that never marked itself done (its host died, or its `.info` write failed) may have left leases
  // of partitions that split or merged since. Their children are not created here, from `startFrom`: the gone
  // lease's owner creates them from its checkpoint (else the changes in between would be skipped).
  const covered = (p: Partition): boolean =>
    leased.some((l) => l.leaseToken !== p.id && ((p.parents?.includes(l.leaseToken) ?? false) || (l.feedRange !== undefined && rangesOverlap(l.feedRange, p.range))));
  const partitions = all.filter((p) => !covered(p));
  if (partitions.length < all.length) ctx.log('bootstrapping %d leases; %d partitions are covered by the leases of their parents', partitions.length, all.length - partitions.length);
  else ctx.log('bootstrapping %d leases', partitions.length);
  // Every start is pinned before the first lease exists: no reader can begin before its lease's start is fixed.
  const starts = await Promise.all(partitions.map((p) => ctx.startPosition?.(p) ?? null));
  const sentAt = ctx.clock();
  const settled = await Promise.allSettled(
    partitions.map((p, i) => {
      if (i >= ctx.claim) return ctx.store.createIfAbsent(leaseDocument(ctx.naming, p.id, p.range, starts[i]!, {}, floor));
      const claimed = leaseDocument(ctx.naming, p.id, p.range, starts[i]!, {}, floor + 1, ctx.naming.owner);
      const unclaimed = ctx.claiming?.(claimed);
      const created = ctx.store.createIfAbsent(claimed);
      if (unclaimed) void created.then((lease) => lease === undefined && unclaimed(), unclaimed);
      return created;
    }),
  );
  const failed = settled.find((s) => s.status === 'rejected');
  // A covered partition counts as one whose lease existed (the bootstrap did not create every lease).
  const results = [...settled.map((s) => (s.status === 'fulfilled' ? s.value : undefined)), ...all.filter(covered).map(() => undefined)];
  return failed ? { results, sentAt, failure: failed.reason } : { results, sentAt };
}

/**
 * Records that the leases exist (`<prefix>.info`), then removes our lock, if we hold one, an expiration later
 * ({@link holdLock}); also when `.info` failed (the failure is thrown at once, the hold goes on in the
 * background, and hands the lock over with the leases `known` if the host stops meanwhile; the host is told,
 * `unfinished`, and its next bootstrap takes the lock back and writes `.info`).
 */
async function markDone(ctx: BootstrapContext, lock?: Lease, known: readonly KnownLease[] = []): Promise<void> {
  try {
    await ctx.store.createIfAbsent(markerDocument(ctx.naming, infoId(ctx.naming.markerPrefix)));
  } catch (error) {
    if (lock) {
      ctx.background(holdLock(ctx, lock, known));
      ctx.unfinished?.();
    }
    throw error;
  }
  if (lock) await holdLock(ctx, lock);
}
