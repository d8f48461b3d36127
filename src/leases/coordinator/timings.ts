import { InvalidOptionsError } from '../../errors/index.js';

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

/** Default prefix of a processor's lease ids. */
export const DEFAULT_LEASE_PREFIX = 'rxfeed.';

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
 * @internal Checks a lease prefix: non-empty, so one processor never takes another's leases. A processor must
 * name its own (`required`): two apps that both left it out would silently split one set of leases between
 * them. Tools that only read leases (admin, estimator) fall back to `'rxfeed.'`, the default of earlier versions.
 */
export function checkLeasePrefix(name: string, prefix: unknown, required = false): string {
  if (prefix === undefined && required) {
    throw new InvalidOptionsError(
      name,
      "is required: name this processor, e.g. 'orders-view.' (the prefix of its lease ids). Processors sharing a lease " +
        `container need distinct names; leases written by earlier versions without one are under '${DEFAULT_LEASE_PREFIX}'`,
    );
  }
  if (prefix === undefined) return DEFAULT_LEASE_PREFIX;
  if (typeof prefix !== 'string') throw new InvalidOptionsError(name, `must be a string, e.g. 'orders-view.' (got ${typeof prefix})`);
  if (prefix === '') {
    throw new InvalidOptionsError(
      name,
      "must not be empty: an empty prefix matches every other processor's leases and markers in the store; " +
        "use a name ending with a separator, e.g. 'orders-view.'",
    );
  }
  return prefix;
}
