// Role: the timing policies of the coordinator's loops, as pure functions — when the next balancing round runs,
// where a renewal falls on the renewal grid, the phase of a lease's first renewal — and the cooldown of leases
// this host let go. No I/O, no timers: the Balancer and the Renewer apply them.
import type { Timings } from '../protocol/timings.js';

/** First delay (ms) of the quick rounds a host makes while leases it asked for are being handed over; doubles up to the acquire interval. */
export const HANDOVER_LOOK_MS = 1_000;

/** @internal What {@link nextScanDelay} decides from. */
export interface ScanOutcome {
  /** Earliest moment (scheduler time) a lease another host holds could expire; `undefined` if others hold none. */
  readonly nextExpiryMs: number | undefined;
  /** Leases this host asked for and still waits for, including requests just written. */
  readonly awaiting: number;
  /** Nothing left for anyone to do (see `BalancePlan.settled`). */
  readonly settled: boolean;
  /** The round worked on leases this host just created (no listing): others will ask for their share soon. */
  readonly justCreated: boolean;
}

/**
 * When the next balancing round runs, and the new delay of the quick rounds while waiting for a handover.
 *
 * Never later than the moment a lease owned elsewhere could expire, so a crashed host's leases are taken over
 * one expiration after its last write. Otherwise: every acquire interval while the share is moving; once
 * settled, every half expiration (to pick up released leases). A host that just created the leases took them
 * all: it looks again soon, for hosts that ask for their share. While leases it asked for are being handed
 * over, it looks again after 1 s, 2 s, 4 s, … (up to the acquire interval): a busy owner hands over at its next
 * checkpoint, and the lease is read as soon as this host sees it is its own. A few extra rounds per join; none
 * once settled.
 *
 * @param lookMs the delay of the previous quick round (0 when not waiting).
 * @internal
 */
export function nextScanDelay(
  outcome: ScanOutcome,
  nowMs: number,
  lookMs: number,
  t: Pick<Timings, 'acquireMs' | 'expirationMs'>,
): { readonly delayMs: number; readonly lookMs: number } {
  const untilExpiry = outcome.nextExpiryMs === undefined ? Infinity : Math.max(1, outcome.nextExpiryMs - nowMs + 1);
  const awaiting = outcome.awaiting > 0;
  const look = awaiting ? Math.min(t.acquireMs, lookMs * 2 || HANDOVER_LOOK_MS) : 0;
  const next = awaiting ? look : outcome.settled && !outcome.justCreated ? t.expirationMs / 2 : t.acquireMs;
  return { delayMs: Math.min(next, untilExpiry), lookMs: look };
}

/**
 * `delayMs`, shortened so the renewal falls on the renewal grid (multiples of `gridMs`, scheduler time):
 * renewals due close together then go out in the same turn, which a lease store that groups writes sends as
 * one request. Short delays (retries in tests' timings) are left alone.
 *
 * @internal
 */
export function onRenewalGrid(nowMs: number, delayMs: number, gridMs: number): number {
  if (delayMs < 2 * gridMs) return delayMs;
  return Math.floor((nowMs + delayMs) / gridMs) * gridMs - nowMs;
}

/** The golden ratio's fractional part: successive multiples of it spread evenly over [0, 1). */
const GOLDEN = (Math.sqrt(5) - 1) / 2;

/**
 * When the leases a host acquires first renew: at a spread fraction of the renew interval (successive
 * golden-ratio steps), so the leases a host takes together do not all renew in the same instant. Their
 * renewals stay spread over the interval afterwards, which keeps the request rate even and gives a release
 * notice a lease that its owner writes soon. Costs at most one early renewal per acquisition.
 *
 * @internal
 */
export class RenewalPhases {
  #phase = 0;

  constructor(private readonly renewMs: number) {}

  /** The delay (ms) of the next acquired lease's first renewal. */
  next(): number {
    const phase = this.#phase;
    this.#phase = (phase + GOLDEN) % 1;
    return Math.max(this.renewMs / 10, this.renewMs * (1 - phase));
  }
}

/**
 * Leases this host let go because it could not use them, or released to nobody while rebalancing, and until
 * when (scheduler time) it leaves them to others instead of taking them back at its next round.
 *
 * @internal
 */
export class Cooldown {
  readonly #until = new Map<string, number>();

  /** Leaves lease `id` to others until `untilMs`. */
  leave(id: string, untilMs: number): void {
    this.#until.set(id, untilMs);
  }

  /** Whether lease `id` is still left to others at `nowMs`. */
  holds(id: string, nowMs: number): boolean {
    const until = this.#until.get(id);
    if (until === undefined) return false;
    if (nowMs < until) return true;
    this.#until.delete(id);
    return false;
  }
}
