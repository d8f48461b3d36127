/** First retry delay without a retry-after, in ms; doubles per failure up to {@link MAX_BACKOFF_MS}. */
const BASE_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 10_000;

/** @internal Delay before retry number `failures` (1-based) of a read that failed without retry-after. */
export function backoffMs(failures: number): number {
  return Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** Math.min(failures - 1, 20));
}

/** @internal What to do after a failed read. */
export interface RetryDecision {
  /** Consecutive failures so far, this one included. */
  readonly attempts: number;
  /** Wait this long (ms) before the next attempt. */
  readonly delayMs: number;
  /**
   * The partition has been unreadable for `unreadableMs` or longer: stop retrying and let the lease go, so
   * another host (with another client, another network path) can read it.
   */
  readonly giveUp: boolean;
}

/**
 * The retry policy of one partition reader: consecutive failures, the backoff before the next attempt
 * (the error's retry-after when it has one, else capped exponential), and the bound after which a lease
 * that cannot be read is given up.
 *
 * @internal
 */
export class ReadFailures {
  #attempts = 0;
  #since = 0;

  constructor(
    private readonly now: () => number,
    /** How long (ms) a partition may stay unreadable before its lease is given up. */
    private readonly unreadableMs: number,
  ) {}

  /** Consecutive failures so far (0 after a success). */
  get attempts(): number {
    return this.#attempts;
  }

  /**
   * Records a failed read that began at `startedAt` (scheduler time); `retryAfterMs` is the delay the
   * service asked for, if any.
   */
  failed(retryAfterMs: number | undefined, startedAt = this.now()): RetryDecision {
    if (this.#attempts === 0) this.#since = startedAt;
    const attempts = ++this.#attempts;
    return {
      attempts,
      delayMs: retryAfterMs ?? backoffMs(attempts),
      giveUp: this.now() - this.#since >= this.unreadableMs,
    };
  }

  /** Records a successful read. */
  succeeded(): void {
    this.#attempts = 0;
  }
}
