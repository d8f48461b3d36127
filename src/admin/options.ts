import { type CorruptLeaseError, InvalidOptionsError } from '../errors/index.js';
import { LEASE_OPTIONS } from '../leases/coordinator/options.js';
import type { Lease } from '../leases/Lease.js';
import { listProcessorLeases, type LeaseIds, type LeaseNamingOptions, resolveLeaseIds } from '../leases/protocol/index.js';
import type { LeaseStore } from '../leases/LeaseStore.js';

/**
 * Options shared by the lease administration functions ({@link listLeases}, {@link rewindLeases}, ...). Give
 * `leasePrefix` and `leaseScheme` as the processor does ({@link LeaseNamingOptions}).
 */
export interface LeaseAdminOptions extends LeaseNamingOptions {
  /** The processor's lease store. */
  readonly leases: LeaseStore;
  /**
   * How long a lease stays owned after its owner's last renewal, in milliseconds; decides whether an owner is
   * live. Use the processor's own value. Default `60000`.
   */
  readonly leaseExpirationMs?: number;
  /** Only these lease tokens (partition ids). Default: every lease under the prefix. */
  readonly leaseTokens?: readonly string[];
  /** Clock, in ms since the epoch. Default `Date.now`. */
  readonly now?: () => number;
  /** Called after each lease is handled, for a progress line: `(done, total)`. */
  readonly onProgress?: (done: number, total: number) => void;
}

/** Resolved {@link LeaseAdminOptions}. @internal */
export interface ResolvedAdminOptions {
  readonly leases: LeaseStore;
  /** Where the processor's leases and markers are. */
  readonly ids: LeaseIds;
  readonly expirationMs: number;
  readonly tokens: ReadonlySet<string> | undefined;
  readonly now: () => number;
  readonly progress: (done: number, total: number) => void;
}

/** Validates admin options; throws an `InvalidOptionsError` naming what to fix. @internal */
export function resolveAdminOptions(options: LeaseAdminOptions): ResolvedAdminOptions {
  if (!options || typeof options.leases?.list !== 'function') {
    throw new InvalidOptionsError('leases', 'expected a LeaseStore (e.g. new CosmosLeaseStore(container))');
  }
  const ids = resolveLeaseIds(options);
  LEASE_OPTIONS.leaseExpirationMs.check('leaseExpirationMs', options.leaseExpirationMs);
  const expirationMs = options.leaseExpirationMs ?? LEASE_OPTIONS.leaseExpirationMs.default;
  return {
    leases: options.leases,
    ids,
    expirationMs,
    tokens: options.leaseTokens ? new Set(options.leaseTokens) : undefined,
    now: options.now ?? Date.now,
    progress: options.onProgress ?? (() => undefined),
  };
}

/** True while `lease` has an owner whose last renewal is younger than the expiration. @internal */
export function isOwnedAndLive(lease: Lease, o: ResolvedAdminOptions): boolean {
  return lease.owner !== null && o.now() - lease.timestampMs < o.expirationMs;
}

/**
 * The leases under the prefix that the options select, in token order, and the unreadable documents (bootstrap
 * markers left out of both). @internal
 */
export async function selectLeases(o: ResolvedAdminOptions): Promise<{ leases: Lease[]; corrupt: CorruptLeaseError[] }> {
  const listing = await listProcessorLeases(o.leases, o.ids);
  const selected = listing.leases.filter((l) => !o.tokens || o.tokens.has(l.leaseToken));
  if (o.tokens) {
    const missing = [...o.tokens].filter((t) => !selected.some((l) => l.leaseToken === t));
    if (missing.length > 0) {
      throw new InvalidOptionsError('leaseTokens', `no lease under prefix '${o.ids.prefix}' for ${missing.join(', ')}`);
    }
  }
  return { leases: selected.sort((a, b) => compareTokens(a.leaseToken, b.leaseToken)), corrupt: listing.corrupt };
}

function compareTokens(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isInteger(na) && Number.isInteger(nb)) return na - nb;
  return a < b ? -1 : a > b ? 1 : 0;
}
