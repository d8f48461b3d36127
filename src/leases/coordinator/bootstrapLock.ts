// Role: the bootstrap lock's state apart from the bootstrap itself — what a failed bootstrap keeps for its
// host's next try (HeldLock), the leases a lock handed over at a stop names (its record), and when a lock is stale.
import type { FeedRange } from '../../core/Partition.js';
import type { Lease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import { isLeaseOf, type LeaseNaming } from '../protocol/documents.js';

/**
 * @internal The lock a host keeps after its bootstrap failed (`holdLock` in bootstrap.ts), with the leases that bootstrap
 * knew of: the host's next bootstrap takes it back at once (and counts them as listed) rather than wait the
 * hold out. This host's own writes are no lag to it.
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
