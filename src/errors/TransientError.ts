import { RxfeedError } from './RxfeedError.js';

/**
 * A read failed in a way that is worth retrying (throttling, service unavailable, timeout). Sources throw
 * it; partition readers retry, waiting at least `retryAfterMs` when given.
 *
 * @example
 * ```ts
 * import { TransientError } from 'rxfeed';
 * throw new TransientError('throttled', { statusCode: 429, retryAfterMs: 100 });
 * ```
 */
export class TransientError extends RxfeedError {
  /** HTTP status code, when there was one (429, 503, 408, …). */
  readonly statusCode: number | undefined;
  /** How long the service asked to wait before retrying, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options?: { statusCode?: number; retryAfterMs?: number; cause?: unknown }) {
    super(message, options);
    this.statusCode = options?.statusCode;
    this.retryAfterMs = options?.retryAfterMs;
  }
}
