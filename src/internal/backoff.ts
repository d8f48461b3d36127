/**
 * A capped exponential backoff: the first wait, the bound of one wait, the growth per attempt and a jitter.
 * The one backoff of rxfeed: partition reads, retry policies (user code, sinks) and broker relays use it.
 *
 * @internal
 */
export interface Backoff {
  /** The first wait, in ms. */
  readonly initialMs: number;
  /** Upper bound of one wait, in ms (jitter included). */
  readonly maxMs: number;
  /** Each wait is this many times the previous one. Default 2. */
  readonly factor?: number;
  /** Random spread of each wait, as a fraction (`0.2` = ±20 %). Default 0. */
  readonly jitter?: number;
}

/**
 * The wait before attempt `attempt + 1` (after `attempt` failures, from 1), in whole ms: `initialMs ·
 * factor^(attempt − 1)`, capped at `maxMs`, spread by ±`jitter` with one draw of `random` (a number in [0, 1);
 * drawn whenever given, so a seeded stream advances the same whatever the jitter), never above `maxMs`.
 *
 * @internal
 */
export function backoffMs(backoff: Backoff, attempt: number, random?: () => number): number {
  const grown = backoff.initialMs === 0 ? 0 : backoff.initialMs * (backoff.factor ?? 2) ** (attempt - 1);
  const base = Math.min(backoff.maxMs, grown);
  const spread = random ? base * (backoff.jitter ?? 0) * (2 * random() - 1) : 0;
  return Math.max(0, Math.min(backoff.maxMs, Math.round(base + spread)));
}
