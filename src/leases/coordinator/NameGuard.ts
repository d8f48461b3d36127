// Role: tells another live process under this host's name from what a previous run left, and keeps this
// host off the leases such a process may be reading.
import { isUntaken } from '../protocol/signals.js';
import { isLeaseExpired } from '../protocol/timings.js';
import type { Lease } from '../Lease.js';

/** A lease taken under this host's name at an epoch it never wrote, and how it was stored then. */
interface Suspect {
  readonly epoch: number;
  readonly timestampMs: number;
  readonly heldEpoch: number;
}

/** Another live process under this host's name, as shown by one of its leases. */
export interface SharedName {
  readonly leaseToken: string;
  /** The epoch this host held the lease at when it was taken (0: never held by this host). */
  readonly heldEpoch: number;
  /** The epoch the other process took it at (and keeps renewing). */
  readonly epoch: number;
}

/**
 * Tells another live process under this host's name (same `instanceName` and lease prefix) from what a
 * previous run left. Leases under the name that this host does not hold are left alone until they expire
 * (another process may be reading them), unless handed to this host and not taken since; a live process
 * renews them, a dead one does not.
 *
 * Another live process is reported once, with what to fix, when a lease under the name that this host does
 * not hold is renewed twice at one epoch while this host watches, or when a lease this host held turns up
 * under its name at an epoch it never wrote (suspect: left alone until it expires, a dead process's late
 * write, or is renewed under the name at that epoch). From then on every lease under the name that this
 * host does not hold is left alone until it expires.
 *
 * @internal
 */
export class NameGuard {
  /** Per lease id, the highest epoch this host wrote or was given. */
  readonly #epochs = new Map<string, number>();
  readonly #suspects = new Map<string, Suspect>();
  /** Leases under the name this host does not hold: how they were first seen, and renewals seen since. */
  readonly #unheld = new Map<string, { readonly epoch: number; timestampMs: number; renewals: number }>();
  #shared = false;

  constructor(
    private readonly owner: string,
    private readonly expirationMs: number,
  ) {}

  /** Whether another live process was found under this host's name. */
  get shared(): boolean {
    return this.#shared;
  }

  /** Notes that this host wrote (or is about to write, or was given) lease `id` at `epoch`. */
  wrote(id: string, epoch: number): void {
    if (epoch > (this.#epochs.get(id) ?? 0)) this.#epochs.set(id, epoch);
  }

  /** A lease this host held at `heldEpoch` is stored as `stored` now; returns whether that makes it suspect. */
  lost(stored: Lease, heldEpoch: number): boolean {
    if (stored.owner !== this.owner || stored.epoch <= (this.#epochs.get(stored.id) ?? 0)) return false;
    this.#suspects.set(stored.id, { epoch: stored.epoch, timestampMs: stored.timestampMs, heldEpoch });
    return true;
  }

  /**
   * Reviews the suspects against a listing: the first renewed under this name shows another live process
   * (returned, once); those that expired or moved on are dropped.
   */
  review(leases: readonly Lease[], held: ReadonlyMap<string, unknown>, nowMs: number): SharedName | undefined {
    let found = this.#renewedUnheld(leases, held);
    if (this.#suspects.size === 0) return found;
    for (const lease of leases) {
      const suspect = this.#suspects.get(lease.id);
      if (!suspect) continue;
      if (lease.owner !== this.owner || lease.epoch !== suspect.epoch || isLeaseExpired(lease, nowMs, this.expirationMs)) {
        this.#suspects.delete(lease.id);
      } else if (lease.timestampMs > suspect.timestampMs && !this.#shared) {
        this.#shared = true;
        found = { leaseToken: lease.leaseToken, heldEpoch: suspect.heldEpoch, epoch: lease.epoch };
      }
    }
    return found;
  }

  /** The first lease under the name that this host does not hold and that another process renews (once). */
  #renewedUnheld(leases: readonly Lease[], held: ReadonlyMap<string, unknown>): SharedName | undefined {
    if (this.#shared) return undefined;
    const seen = new Set<string>();
    let found: SharedName | undefined;
    for (const lease of leases) {
      if (lease.owner !== this.owner || held.has(lease.id) || isUntaken(lease)) continue;
      seen.add(lease.id);
      const unheld = this.#unheld.get(lease.id);
      if (!unheld || unheld.epoch !== lease.epoch) {
        this.#unheld.set(lease.id, { epoch: lease.epoch, timestampMs: lease.timestampMs, renewals: 0 });
      } else if (lease.timestampMs > unheld.timestampMs) {
        unheld.timestampMs = lease.timestampMs;
        // Twice: one write landing late (a dead process's last renewal) is no live process.
        if (++unheld.renewals >= 2 && !found) found = { leaseToken: lease.leaseToken, heldEpoch: 0, epoch: lease.epoch };
      }
    }
    for (const id of this.#unheld.keys()) if (!seen.has(id)) this.#unheld.delete(id);
    if (found) this.#shared = true;
    return found;
  }

  /**
   * The leases to balance: those under this name that this host does not hold are left out while they are
   * suspect, or, once the name is known to be shared, until they expire.
   */
  balanced(leases: readonly Lease[], held: ReadonlyMap<string, unknown>, nowMs: number): readonly Lease[] {
    if (!this.#shared && this.#suspects.size === 0) return leases;
    return leases.filter(
      (l) =>
        l.owner !== this.owner ||
        held.has(l.id) ||
        isLeaseExpired(l, nowMs, this.expirationMs) ||
        (!this.#shared && !this.#suspects.has(l.id)),
    );
  }
}
