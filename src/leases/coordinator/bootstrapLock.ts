// Role: the bootstrap lock's state apart from the bootstrap itself — what a failed bootstrap keeps for its
// host's next try (HeldLock), the leases a lock handed over at a stop names (its record), when a lock is stale,
// and the hold of a lock an expiration after the last write under it (holdLock: bootstraps and gap repairs).
import type { FeedRange } from '../../core/Partition.js';
import type { Lease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import { isLeaseOf, type LeaseNaming } from '../protocol/documents.js';

/**
 * @internal The lock a host keeps after its bootstrap failed, or after a gap repair ({@link holdLock}), with the
 * leases that bootstrap or repair knew of: the host's next bootstrap takes it back at once (and counts them as
 * listed) rather than wait the hold out. This host's own writes are no lag to it.
 */
export class HeldLock {
  #held: { readonly lock: Lease; readonly known: readonly KnownLease[] } | undefined;

  /** Keeps `lock` for the next bootstrap to take back; the token {@link end} takes. */
  keep(lock: Lease, known: readonly KnownLease[]): object {
    const held = { lock, known };
    this.#held = held;
    return held;
  }

  /** Ends the hold `token` gave: false when a bootstrap took the lock back meanwhile (its fate is that one's). */
  end(token: object): boolean {
    if (this.#held !== token) return false;
    this.#held = undefined;
    return true;
  }

  /** Takes the lock back from its hold, if one keeps it. */
  takeBack(): { readonly lock: Lease; readonly known: readonly KnownLease[] } | undefined {
    const held = this.#held;
    this.#held = undefined;
    return held;
  }
}

/** @internal What a bootstrap knows exists: a lease's token and, when known, its range. */
export interface KnownLease {
  readonly leaseToken: string;
  readonly feedRange: FeedRange | undefined;
}

/**
 * @internal The property of a bootstrap lock handed over at a stop (owner `null`): the leases its unfinished
 * bootstrap knew of, JSON `[token, min?, max?][]`.
 */
export const HANDED_OVER_LEASES = 'rxfeed.bootstrapLeases';

export function knownLease(lease: KnownLease): KnownLease {
  return { leaseToken: lease.leaseToken, feedRange: lease.feedRange };
}

export function knownOf(naming: LeaseNaming, listing: Awaited<ReturnType<LeaseStore['list']>>): KnownLease[] {
  return listing.leases.filter((l) => isLeaseOf(naming, l)).map(knownLease);
}

/** The leases a lock handed over names, `undefined` unless it is one (released, with the property, readable). */
export function handedOverLeases(lock: Lease): KnownLease[] | undefined {
  const recorded = lock.properties[HANDED_OVER_LEASES];
  if (lock.owner !== null || recorded === undefined) return undefined;
  try {
    const entries: unknown = JSON.parse(recorded);
    if (!Array.isArray(entries)) return undefined;
    const known: KnownLease[] = [];
    for (const entry of entries) {
      if (!Array.isArray(entry) || !entry.every((x) => typeof x === 'string') || (entry.length !== 1 && entry.length !== 3)) return undefined;
      const [leaseToken, min, max] = entry as string[];
      known.push({ leaseToken: leaseToken!, feedRange: min !== undefined && max !== undefined ? { minInclusive: min, maxExclusive: max } : undefined });
    }
    return known;
  } catch {
    return undefined;
  }
}

export function handOverProperty(known: readonly KnownLease[]): Record<string, string> {
  const byToken = new Map(known.map((l) => [l.leaseToken, l]));
  const entries = [...byToken.values()].map((l) => (l.feedRange ? [l.leaseToken, l.feedRange.minInclusive, l.feedRange.maxExclusive] : [l.leaseToken]));
  return { [HANDED_OVER_LEASES]: JSON.stringify(entries) };
}

/**
 * @internal Judges a bootstrap lock stale by observation: the same version of it seen unchanged for an
 * expiration on this host's monotonic clock. Never by the lock's wall-clock timestamp, which another host's
 * clock wrote (see docs/lease-protocol.md, Clocks).
 */
export class LockWatch {
  #seen: { readonly etag: string; readonly since: number } | undefined;

  /** Whether `lock`, seen at `now` (monotonic ms), has stood unchanged for `expirationMs`. */
  stale(lock: Lease, now: number, expirationMs: number): boolean {
    if (this.#seen?.etag !== lock.etag) this.#seen = { etag: lock.etag, since: now };
    return now - this.#seen.since >= expirationMs;
  }
}

/** @internal What {@link holdLock} needs: the store, the clocks, and whether the host stopped. */
export interface LockHolder {
  readonly store: LeaseStore;
  readonly naming: LeaseNaming;
  readonly expirationMs: number;
  /** Waits `ms` (scheduler time), or until the host stops. */
  readonly delay: (ms: number) => Promise<void>;
  readonly stopped: () => boolean;
  /** Where a failed bootstrap keeps the lock for its host's next try (bootstraps only). */
  readonly held?: HeldLock | undefined;
}

/**
 * @internal Keeps the lock of a bootstrap for an expiration after its last write (`.info`, or the lease creates of one
 * that failed), then removes it; a gap repair that sent lease creates keeps it the same way (Coverage). A
 * host's reads may lag other hosts' writes (the protocol assumes by less than an expiration): one that read
 * `.info` absent just before it landed, and took the lock the moment it was removed, bootstrapped again on
 * listings that lagged this bootstrap's creates and the replacements since (a lease created again for a
 * partition its claimed lease had already been replaced for by split/merge children: the parent came back
 * below their epochs, was fenced and retaken until its epoch passed theirs, and its writes were accepted
 * after theirs; seeds 433, 866, 1091 of `--faults all`). A host that takes the lock after the hold reads
 * `.info` under it, and sees it. The lock is touched first, so that a host waiting on it counts its
 * expiration from then, not from the lock's create: the bootstrap may have taken most of one, and a lag is per
 * document (a host may see the lock at once and `.info` late).
 *
 * A `stop()` during the hold never removes the lock (removed early, it would let a lagging host bootstrap
 * again), and leaves it owned by nobody. After a bootstrap that finished (`unfinished` not given) it is
 * released as it stands: `.info` exists, so no host waits on it; it goes stale an expiration later (a reset
 * deletes it). After one that did not, it is handed over: released with the leases the bootstrap knew of
 * (listed, handed to it, created: `unfinished`) in {@link HANDED_OVER_LEASES}; the next host to bootstrap
 * takes it over at once and counts them as listed, so its own listing, however it lags, never leaves them out.
 */
export async function holdLock(ctx: LockHolder, lock: Lease, unfinished?: readonly KnownLease[]): Promise<void> {
  const held = (await ctx.store.replace({ ...lock, timestampMs: ctx.naming.now() }).catch(() => undefined)) ?? lock;
  const kept = unfinished && ctx.held?.keep(held, unfinished);
  await ctx.delay(ctx.expirationMs);
  if (kept && !ctx.held!.end(kept)) return; // this host's next bootstrap took it back
  // Conditional on our version: a reset since deleted it (and a bootstrap after it may hold a lock of its own).
  if (!ctx.stopped()) await ctx.store.delete(held).catch(() => undefined);
  else if (unfinished) await ctx.store.replace({ ...held, owner: null, properties: handOverProperty(unfinished) }).catch(() => undefined);
  else await ctx.store.replace({ ...held, owner: null }).catch(() => undefined);
}
