import { backoffMs as capped } from '../../internal/backoff.js';

/** A failed read without a retry-after waits 100 ms, doubling per failure up to 10 s (no jitter). */
const READ_BACKOFF = { initialMs: 100, maxMs: 10_000 } as const;

/** @internal Delay before retry number `failures` (1-based) of a read that failed without retry-after. */
export function backoffMs(failures: number): number {
  return capped(READ_BACKOFF, failures);
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
  /** Since when no read has been answered at all (throttling is an answer); `undefined` while answered. */
  #unansweredSince: number | undefined;

  constructor(
    private readonly now: () => number,
    private readonly unreadableMs: number,
  ) {}

  get attempts(): number {
    return this.#attempts;
  }

  /**
   * One more failed read (started at `startedAt`). A throttled read (`throttled`: the service answered 429)
   * is retried after `retryAfterMs` but never counts towards giving the lease up: the partition is readable,
   * and another host would be throttled the same (the budget is the account's, not the host's), so handing
   * the lease around during a long throttling storm would only leave it unowned.
   */
  failed(retryAfterMs: number | undefined, startedAt = this.now(), throttled = false): RetryDecision {
    const attempts = ++this.#attempts;
    if (throttled) this.#unansweredSince = undefined;
    else this.#unansweredSince ??= startedAt;
    return {
      attempts,
      delayMs: retryAfterMs ?? backoffMs(attempts),
      giveUp: this.#unansweredSince !== undefined && this.now() - this.#unansweredSince >= this.unreadableMs,
    };
  }

  succeeded(): void {
    this.#attempts = 0;
    this.#unansweredSince = undefined;
  }
}
