/**
 * @internal Changes per second read from one partition, over windows of `windowMs` (default 30 s), smoothed
 * (each window weighs half): the load a host publishes for load balancing. Time is passed in, never read.
 *
 * @example
 * ```ts
 * const meter = new RateMeter(now());
 * const rate = meter.add(page.changes.length, now()); // a number once a window has closed, else undefined
 * ```
 */
export class RateMeter {
  #windowStart: number;
  #count = 0;
  #rate: number | undefined;

  constructor(
    startMs: number,
    private readonly windowMs = 30_000,
  ) {
    this.#windowStart = startMs;
  }

  /** Counts `changes` read at `nowMs`; returns the smoothed rate when a window closed with this call. */
  add(changes: number, nowMs: number): number | undefined {
    this.#count += changes;
    const elapsed = nowMs - this.#windowStart;
    if (elapsed < this.windowMs) return undefined;
    const rate = (this.#count * 1000) / elapsed;
    this.#rate = this.#rate === undefined ? rate : (this.#rate + rate) / 2;
    this.#windowStart = nowMs;
    this.#count = 0;
    return this.#rate;
  }
}
