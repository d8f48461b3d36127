import { LeaseConflictError } from '../../errors/LeaseConflictError.js';
import { HANDOFF_AT, HANDOFF_TO, handoffRequest, withoutHandoff } from '../balancing.js';
import type { Lease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';

/**
 * Asks the owner of a live lease to hand it over: writes this host's name and the time into the lease's
 * properties; the owner honours it at its next scan, after draining. Returns false when the lease changed
 * meanwhile (the next scan sees how).
 *
 * @internal
 */
export async function askForLease(store: LeaseStore, lease: Lease, requester: string, nowMs: number): Promise<boolean> {
  try {
    await store.replace({ ...lease, properties: { ...lease.properties, [HANDOFF_TO]: requester, [HANDOFF_AT]: String(nowMs) } });
    return true;
  } catch (error) {
    if (error instanceof LeaseConflictError) return false;
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
   * A handoff request younger than this (ms) is honoured by writing the requester as the owner; an older
   * one (its host may have died since) releases the lease to nobody, for whichever live host scans first.
   */
  readonly freshRequestMs: number;
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
    const to = handoffRequest(current, now, ctx.freshRequestMs) ?? null;
    try {
      await ctx.store.replace({ ...current, owner: to, properties: withoutHandoff(current.properties), timestampMs: now });
      return to;
    } catch (error) {
      if (!(error instanceof LeaseConflictError) || error.kind === 'missing' || attempt >= 5) throw error;
      const fresh = await ctx.store.read(current.id);
      if (!fresh || fresh.owner !== ctx.owner || fresh.epoch !== ctx.epoch) return undefined;
      current = fresh;
    }
  }
}
