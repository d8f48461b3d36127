// Protocol: time — when a lease is expired to other hosts, the default timings and what follows from them (the
// owner's local deadline margin, renewal retries, the renewal grid). See docs/lease-protocol.md, "Timings".
import { InvalidOptionsError } from '../../errors/index.js';
import type { Lease } from '../Lease.js';

/**
 * Default lease timings, in ms: acquire 13 000 (as .NET), renew 40 000 (.NET 17 000), expiration 60 000 (as
 * .NET), drain timeout 30 000. Renewing every 40 s with retries leaves 20 s for 4 retries before expiry and
 * costs under half the .NET lease-store requests when idle (bench/leaseCost.ts). The one place these
 * defaults live: the feed options use them too.
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
  drainTimeoutMs: 30_000,
});

/** The timing options a coordinator takes (each optional, in ms). */
export type TimingOptions = { readonly [K in keyof typeof LEASE_DEFAULTS]?: number };

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

function duration(options: TimingOptions, name: keyof typeof LEASE_DEFAULTS, allowZero: boolean): number {
  const value = options[name] ?? LEASE_DEFAULTS[name];
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new InvalidOptionsError(name, `must be a ${allowZero ? 'non-negative' : 'positive'} number of milliseconds, got ${String(value)}`);
  }
  return value;
}

/**
 * Validates the lease timings and derives the rest; throws {@link InvalidOptionsError} naming the option.
 *
 * `drainTimeoutMs` may exceed `leaseExpirationMs`: renewals go on while a drain runs.
 *
 * @internal
 */
export function resolveTimings(options: TimingOptions): Timings {
  const acquireMs = duration(options, 'leaseAcquireIntervalMs', false);
  const renewMs = duration(options, 'leaseRenewIntervalMs', false);
  const expirationMs = duration(options, 'leaseExpirationMs', false);
  const drainTimeoutMs = duration(options, 'drainTimeoutMs', true);
  if (renewMs >= expirationMs) {
    throw new InvalidOptionsError(
      'leaseRenewIntervalMs',
      `must be less than leaseExpirationMs (${expirationMs}), or leases expire before they are renewed`,
    );
  }
  if (acquireMs > expirationMs) {
    throw new InvalidOptionsError('leaseAcquireIntervalMs', `must not exceed leaseExpirationMs (${expirationMs})`);
  }
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
