// Protocol: time — when a lease is expired to other hosts, and what follows from the timings (the
// owner's local deadline margin, renewal retries, the renewal grid). See docs/lease-protocol.md, "Timings".
import type { Lease } from '../Lease.js';

/** @internal Validated timings of one coordinator, in ms. */
export interface Timings {
  readonly acquireMs: number;
  readonly renewMs: number;
  readonly expirationMs: number;
  /** How long a voluntary release waits for the partition's batches to be acknowledged. */
  readonly drainTimeoutMs: number;
  /** The coordinator's own bound on a drain: `drainTimeoutMs` plus room for the final checkpoint write. */
  readonly drainBoundMs: number;
  /** Delay between renewal attempts after one failed. */
  readonly renewRetryMs: number;
  /**
   * Renewals are due on multiples of this (scheduler time), each at most this much early, so those due
   * close together are written together: 1 000, or a twentieth of `renewMs` if less.
   */
  readonly renewGridMs: number;
  /**
   * How long before the lease would expire (as another host sees it) this host stops using it when it
   * could not confirm a renewal: processing stops before anyone else may take the lease.
   */
  readonly deadlineMarginMs: number;
}

/** Room left after `drainTimeoutMs` for the final checkpoint write of a drain, in ms. */
const DRAIN_WRITE_MARGIN_MS = 5_000;

/**
 * Derives a coordinator's timings from its lease options (checked by `resolveLeaseOptions`, which also holds
 * the rules relating them: renew < expiration, acquire ≤ expiration; the defaults are `LEASE_DEFAULTS`).
 *
 * `drainTimeoutMs` may exceed `leaseExpirationMs`: renewals go on while a drain runs.
 *
 * @internal
 */
export function resolveTimings(options: {
  readonly leaseAcquireIntervalMs: number;
  readonly leaseRenewIntervalMs: number;
  readonly leaseExpirationMs: number;
  readonly drainTimeoutMs: number;
}): Timings {
  const { leaseAcquireIntervalMs: acquireMs, leaseRenewIntervalMs: renewMs, leaseExpirationMs: expirationMs, drainTimeoutMs } = options;
  // Stop a little before the expiry others see (a tenth of it), leaving at least half of the time between
  // renewal and expiry for retries; the retries of a failed renewal all fall before that local deadline.
  const deadlineMarginMs = Math.min(expirationMs / 10, (expirationMs - renewMs) / 2);
  const renewRetryMs = Math.max(1, (expirationMs - deadlineMarginMs - renewMs) / 5);
  return {
    acquireMs,
    renewMs,
    expirationMs,
    drainTimeoutMs,
    drainBoundMs: drainTimeoutMs + DRAIN_WRITE_MARGIN_MS,
    renewRetryMs,
    renewGridMs: Math.min(1_000, renewMs / 20),
    deadlineMarginMs,
  };
}

/**
 * True when `lease` has no owner or its owner has not renewed it within `expirationMs`.
 *
 * @example
 * ```ts
 * const free = leases.filter((l) => isLeaseExpired(l, Date.now(), 60_000));
 * ```
 */
export function isLeaseExpired(lease: Lease, nowMs: number, expirationMs: number): boolean {
  return !lease.owner || nowMs - lease.timestampMs >= expirationMs;
}
