// Role: finds key ranges no lease of this processor covers (a reset that raced a bootstrap, or failed part
// way; leases deleted by hand) and creates leases for them, under the bootstrap lock (kept an expiration after
// the creates), once the gap has lasted.
// `uncoveredRanges` is the pure planner; `Coverage` the step the balance loop runs every round.
import type { FeedRange, Partition, Position } from '../../core/Partition.js';
import { CorruptLeaseError } from '../../errors/index.js';
import type { Lease } from '../Lease.js';
import { confirmEpochFloor, leaseDocument, lockId, markerDocument, readEpochFloor } from '../protocol/documents.js';
import { listProcessorLeases } from '../protocol/listing.js';
import { KEY_SPACE } from './bootstrap.js';
import { holdLock, knownLease, knownOf, LockWatch, type HeldLock, type KnownLease } from './bootstrapLock.js';
import { delay, type CoordinatorContext } from './context.js';
import { childLeases, type ChildLease, coversRange, uncoveredParts } from './splitMerge.js';

/**
 * @internal The error of the `error` event that reports a repaired gap: leases were created for a key range
 * that had none (its changes were read by nobody until then). Important enough to become a process warning
 * when nobody listens to the events.
 */
export class LeaseGapError extends Error {
  override readonly name = 'LeaseGapError';
}

/** @internal What {@link uncoveredRanges} found: the ranges no lease covers, and the leases that would cover them. */
export interface Gaps {
  readonly gaps: readonly FeedRange[];
  readonly create: readonly ChildLease[];
}

/**
 * The key ranges none of `leases` covers, and the leases that would cover them: one per listed partition
 * inside a gap, an EPK lease for the part of a partition a gap covers (as a merge's replacement has). A lease
 * covers its `feedRange`; a partition-id lease without one covers its partition's range, or, when its
 * partition is gone (not listed), the ranges of the listed partitions that name it as a parent: its owner's
 * replacement is about to create those, from its checkpoint. Answers `undefined` (cannot tell: no repair)
 * when the partitions listed do not cover the key space (the listing lags a split) or a lease's range is not
 * known. Pure.
 *
 * @internal
 */
export function uncoveredRanges(leases: readonly Lease[], partitions: readonly Partition[]): Gaps | undefined {
  if (!coversRange(partitions.map((p) => ({ token: p.id, range: p.range })), KEY_SPACE)) return undefined;
  const covered: FeedRange[] = [];
  for (const l of leases) {
    const ranges = rangesOf(l, partitions);
    if (!ranges) return undefined;
    covered.push(...ranges);
  }
  const gaps = uncoveredParts(KEY_SPACE, covered);
  const create = new Map<string, ChildLease>();
  for (const gap of gaps) for (const c of childLeases('', gap, partitions) ?? []) create.set(c.token, c);
  return { gaps, create: [...create.values()] };
}

function rangesOf(lease: Lease, partitions: readonly Partition[]): readonly FeedRange[] | undefined {
  if (lease.feedRange) return [lease.feedRange];
  const listed = partitions.find((p) => p.id === lease.leaseToken);
  if (listed) return [listed.range];
  const children = partitions.filter((p) => p.parents?.includes(lease.leaseToken));
  return children.length > 0 ? children.map((p) => p.range) : undefined;
}

/** How a range is named in logs and events. */
function show(r: FeedRange): string {
  return `[${r.minInclusive === '' ? "''" : r.minInclusive}, ${r.maxExclusive})`;
}

/** @internal What {@link Coverage} needs beside the coordinator's context. */
export interface CoverageOptions {
  /** Where a new lease starts, as a bootstrap pins it (`null` or absent: at the reader's start). */
  readonly startPosition?: ((partition: Partition) => Promise<Position | null>) | undefined;
  /**
   * Where the lock a repair keeps is held for this host's next bootstrap to take back at once (with the leases
   * the repair knew of): the try at `.info` that follows a repair, or a bootstrap after a reset.
   */
  readonly held?: HeldLock | undefined;
}

/**
 * The balance loop's coverage step. A round's listing that leaves part of the key space without a lease is
 * checked against a fresh partition listing; a gap is repaired only once it has been seen in every round for
 * at least a lease expiration (a host's lease listing may lag other hosts' writes), and again under
 * the bootstrap lock on a fresh lease listing: a bootstrap in progress (lock held) is never mistaken for a
 * gap, and two hosts never repair together. The leases created are free, at the epoch floor, starting where a
 * bootstrap starts them; the balance loop takes them as any free lease.
 *
 * @internal
 */
export class Coverage {
  /** The gaps seen in the last rounds (as a key) and since when (scheduler time), while they last. */
  #suspected: { readonly key: string; readonly sinceMs: number } | undefined;
  /** How long the bootstrap lock has stood unchanged, on this host's monotonic clock. */
  readonly #lockWatch = new LockWatch();

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly options: CoverageOptions,
  ) {}

  /**
   * Reviews a round's listing; answers whether leases were created (the next round should come at once):
   * `false` at once, without a request, when the leases cover the key space (nearly every round), else a
   * promise.
   */
  review(leases: readonly Lease[]): false | Promise<boolean> {
    const { ctx } = this;
    // The ranges the leases name, or their partitions had when last listed (an unknown one counts as the
    // whole key space).
    const known = leases.map((l) => l.feedRange ?? ctx.partitions.of(l.leaseToken, undefined).range);
    if (uncoveredParts(KEY_SPACE, known).length === 0) {
      this.#suspected = undefined;
      return false;
    }
    return this.#reviewGaps(leases);
  }

  /** The leases leave part of the key space uncovered: checked against the partitions listed now. */
  async #reviewGaps(leases: readonly Lease[]): Promise<boolean> {
    const { ctx } = this;
    const plan = uncoveredRanges(leases, await ctx.partitions.refresh());
    if (!plan || plan.gaps.length === 0) {
      this.#suspected = undefined;
      return false;
    }
    const key = plan.gaps.map(show).join(' ');
    const now = ctx.scheduler.now();
    if (this.#suspected?.key !== key) {
      this.#suspected = { key, sinceMs: now };
      ctx.log('key range %s has no lease; repaired if it still has none in %d ms', key, ctx.t.expirationMs);
      return false;
    }
    // A lease expiration: the protocol already assumes no listing lags that long (a live lease would look
    // expired, and be taken), so a lease another host created is seen by then.
    if (now - this.#suspected.sinceMs < ctx.t.expirationMs) return false;
    return this.#repair(key);
  }

  /** Creates the leases the gaps `key` miss, under the bootstrap lock, if a fresh listing still shows them. */
  async #repair(key: string): Promise<boolean> {
    const { ctx } = this;
    const { store, naming } = ctx;
    const lockName = lockId(naming.markerPrefix);
    const lock = await store.createIfAbsent(markerDocument(naming, lockName));
    if (!lock) {
      await this.#clearStaleLock(lockName);
      return false;
    }
    let known: KnownLease[] | undefined;
    try {
      const [floorRead, listing, partitions] = await Promise.all([readEpochFloor(store, naming), listProcessorLeases(store, naming), ctx.partitions.refresh()]);
      const plan = uncoveredRanges(listing.leases, partitions);
      const fresh = plan?.gaps.map(show).join(' ');
      if (!plan || fresh !== key) {
        // The gap closed, or changed: a fresh look, from the start.
        this.#suspected = undefined;
        return false;
      }
      const starts = await Promise.all(plan.create.map((c) => this.options.startPosition?.({ id: c.token, range: c.range }) ?? null));
      // The highest epoch a reset deleted: the leases are created at it, never below (confirmed current first).
      const floor = await confirmEpochFloor(store, naming, naming.now, floorRead);
      known = knownOf(naming, listing);
      const settled = await Promise.allSettled(plan.create.map((c, i) => store.createIfAbsent(leaseDocument(naming, c.token, c.range, starts[i]!, {}, floor))));
      const created = settled.flatMap((s) => (s.status === 'fulfilled' && s.value ? [s.value] : []));
      known.push(...created.map(knownLease));
      const failed = settled.find((s) => s.status === 'rejected');
      this.#suspected = undefined;
      if (created.length > 0) {
        const message =
          `key range ${key} had no lease under prefix '${naming.prefix}' (its changes were read by nobody): ` +
          `created leases ${created.map((l) => l.leaseToken).join(', ')} at epoch ${floor}` +
          (failed ? `; some creates failed and are retried next round` : '');
        ctx.log('%s', message);
        ctx.emit({ type: 'error', owner: ctx.owner, error: new LeaseGapError(message), kind: 'infrastructure' });
      }
      if (failed) throw failed.reason;
      return created.length > 0;
    } finally {
      // Once creates were sent, the lock is kept an expiration, as a bootstrap's (`holdLock`): a host whose reads
      // lag this one's that took it at once would list the leases without them and repair the same gap again,
      // after a split meanwhile with the children of a repaired lease from the start position beside it (its
      // owner creates them from its checkpoint). This host's next bootstrap takes it back at once; a stop hands
      // it over with the leases known. Nothing sent: removed at once.
      if (known) {
        const holder = { store, naming, expirationMs: ctx.t.expirationMs, delay: (ms: number) => delay(ctx, ms), stopped: ctx.stopped, held: this.options.held };
        ctx.track(holdLock(holder, lock, known));
      } else await store.delete(lock).catch(() => undefined);
    }
  }

  /** A lock that stood unchanged for an expiration was left by a host that died: removed, as a bootstrap does. */
  async #clearStaleLock(id: string): Promise<void> {
    const { ctx } = this;
    let existing: Lease | undefined;
    try {
      existing = await ctx.store.read(id);
    } catch (error) {
      if (error instanceof CorruptLeaseError) return; // another processor's lock: a bootstrap in its hands
      throw error;
    }
    if (existing && this.#lockWatch.stale(existing, ctx.scheduler.now(), ctx.t.expirationMs)) {
      ctx.log('removing stale bootstrap lock of %s', existing.owner);
      await ctx.store.delete(existing).catch(() => undefined);
    }
  }
}
