// Protocol: the writes that carry signals between hosts — asking an owner for its lease, handing a lease back
// (to its asker, marked untaken, or to nobody), and leaving release notices when a host stops. See
// docs/lease-protocol.md, "Signals" and "Ownership".
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import { withHalt } from './haltBackoff.js';
import { HANDOFF_AT, HANDOFF_TO, RELEASED_AT, RELEASED_BY, UNTAKEN_AT_EPOCH, withoutSignals } from './signals.js';
import { isLeaseExpired } from './timings.js';
import type { Lease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';

/**
 * Asks the owner of a live lease to hand it over: writes this host's name and the time into the lease's
 * properties; the owner honours it at its next scan, after draining. Returns `undefined` when the lease changed
 * meanwhile (the next scan sees how); else the lease as stored with the request.
 *
 * @internal
 */
export async function askForLease(store: LeaseStore, lease: Lease, requester: string, nowMs: number): Promise<Lease | undefined> {
  try {
    return await store.replace({ ...lease, properties: { ...lease.properties, [HANDOFF_TO]: requester, [HANDOFF_AT]: String(nowMs) } });
  } catch (error) {
    if (error instanceof LeaseConflictError) return undefined;
    throw error;
  }
}

/** @internal What {@link handBack} needs. */
export interface HandBackContext {
  readonly store: LeaseStore;
  readonly owner: string;
  readonly epoch: number;
  readonly now: () => number;
  /**
   * The host a fresh handoff request in `lease` names, which the lease is handed to; `undefined` releases
   * it to nobody, for whichever live host scans first (e.g. for an old request: its host may have died since).
   */
  readonly requester: (lease: Lease) => string | undefined;
  /**
   * The ownership ends because its partition halted (close reason `Halted`): the release to nobody carries
   * the halt signal (haltBackoff.ts), which every host honours with a backoff. Default false.
   */
  readonly halted?: boolean;
}

/**
 * Writes the release of a lease this host owns (`current` is its latest stored version): to the host that
 * asked for it, if the request is fresh, else to nobody. A conflict with a concurrent write that leaves
 * this host the owner (e.g. a new handoff request) is re-read and retried. Returns the new owner, or
 * `undefined` when the lease is not ours any more.
 *
 * @internal
 */
export async function handBack(ctx: HandBackContext, current: Lease): Promise<string | null | undefined> {
  for (let attempt = 0; ; attempt++) {
    const now = ctx.now();
    const to = ctx.requester(current) ?? null;
    try {
      // Handed over, the lease says so until its new owner takes it: nobody reads it meanwhile.
      const kept = withoutSignals(current.properties);
      const properties = to !== null ? { ...kept, [UNTAKEN_AT_EPOCH]: String(current.epoch) } : ctx.halted ? withHalt(kept, current.epoch) : kept;
      await ctx.store.replace({ ...current, owner: to, properties, timestampMs: now });
      return to;
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || error.kind === 'missing' || attempt >= 5) throw error;
      const fresh = await ctx.store.read(current.id);
      if (!fresh || fresh.owner !== ctx.owner || fresh.epoch !== ctx.epoch) return undefined;
      current = fresh;
    }
  }
}

/** How many leases of each live host a release notice is written to: the ones it will write soonest. */
const NOTICES_PER_HOST = 2;

/**
 * Tells the other live hosts that `from` released leases, without any of them polling for it: writes a
 * release notice into a few leases of each (properties only: owner, epoch and checkpoint stay). The owner
 * meets the notice at its next write of such a lease (a checkpoint or renewal conflicts, it re-reads) and
 * balances at once instead of at its next round. The leases chosen are the ones their owner writes first:
 * the least recently written (its renewal is due first) and the most recently written (a busy partition
 * checkpoints again soon). A notice that meets a concurrent write is dropped: that owner is writing now.
 * Returns how many notices landed.
 *
 * @internal
 */
export async function announceRelease(store: LeaseStore, leases: readonly Lease[], from: string, nowMs: number, expirationMs: number): Promise<number> {
  const byOwner = new Map<string, Lease[]>();
  for (const lease of leases) {
    if (lease.owner === null || lease.owner === from || isLeaseExpired(lease, nowMs, expirationMs)) continue;
    const owned = byOwner.get(lease.owner);
    if (owned) owned.push(lease);
    else byOwner.set(lease.owner, [lease]);
  }
  const targets = [...byOwner.values()].flatMap((owned) => {
    const byAge = owned.sort((a, b) => a.timestampMs - b.timestampMs);
    return [...new Set([...byAge.slice(0, NOTICES_PER_HOST), ...byAge.slice(-NOTICES_PER_HOST)])];
  });
  const notice = { [RELEASED_BY]: from, [RELEASED_AT]: String(nowMs) };
  const written = await Promise.all(
    targets.map((lease) =>
      store.replace({ ...lease, properties: { ...lease.properties, ...notice } }).then(
        () => 1,
        (error: unknown) => {
          if (error instanceof LeaseConflictError) return 0;
          throw error;
        },
      ),
    ),
  );
  return written.reduce((sum, n) => sum + n, 0);
}
