import { InvalidOptionsError } from '../errors/index.js';
import { backoffMs } from '../internal/backoff.js';
import { definedOnly } from '../options/validate.js';

/**
 * How a change (or a batch) that user code fails on is retried before it is given up: a number of attempts,
 * exponential backoff with jitter, and a classifier for errors that are never worth retrying.
 *
 * @example
 * ```ts
 * const policy: RetryPolicy = { attempts: 5, initialBackoffMs: 200, retryable: (e) => !(e instanceof SyntaxError) };
 * ```
 */
export interface RetryPolicy {
  /** Attempts in all, the first included. Default `3`. */
  readonly attempts?: number;
  /** Wait before the second attempt, in milliseconds. Default `100`. */
  readonly initialBackoffMs?: number;
  /** Upper bound of one wait, in milliseconds. Default `30000`. */
  readonly maxBackoffMs?: number;
  /** Each wait is this many times the previous one. Default `2`. */
  readonly backoffFactor?: number;
  /** Random spread of each wait, as a fraction (`0.2` = ±20 %), so retries of many partitions do not align. Default `0.2`. */
  readonly jitter?: number;
  /**
   * False for errors that no retry can fix (a validation error, a malformed document): the change is given up
   * at once. Default: every error is retried.
   */
  readonly retryable?: (error: unknown) => boolean;
}

/** A validated {@link RetryPolicy} with its defaults filled in. @internal */
export interface ResolvedRetryPolicy {
  readonly attempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly backoffFactor: number;
  readonly jitter: number;
  readonly retryable: (error: unknown) => boolean;
}

/** The defaults of {@link RetryPolicy}. @internal */
export const RETRY_DEFAULTS: ResolvedRetryPolicy = Object.freeze({
  attempts: 3,
  initialBackoffMs: 100,
  maxBackoffMs: 30_000,
  backoffFactor: 2,
  jitter: 0.2,
  retryable: () => true,
});

/** Validates a policy; throws an `InvalidOptionsError` that names the field and what to fix. @internal */
export function resolveRetryPolicy(policy: RetryPolicy | undefined, option = 'retry'): ResolvedRetryPolicy {
  const p = { ...RETRY_DEFAULTS, ...definedOnly(policy ?? {}) };
  const bad = (field: string, problem: string) => new InvalidOptionsError(`${option}.${field}`, problem);
  if (!Number.isInteger(p.attempts) || p.attempts < 1) throw bad('attempts', `must be a positive integer, got ${String(p.attempts)}`);
  for (const field of ['initialBackoffMs', 'maxBackoffMs'] as const) {
    if (!Number.isFinite(p[field]) || p[field] < 0) throw bad(field, `must be a non-negative number of milliseconds, got ${String(p[field])}`);
  }
  if (p.maxBackoffMs < p.initialBackoffMs) throw bad('maxBackoffMs', `must be at least initialBackoffMs (${p.initialBackoffMs})`);
  if (!Number.isFinite(p.backoffFactor) || p.backoffFactor < 1) throw bad('backoffFactor', `must be a number ≥ 1, got ${String(p.backoffFactor)}`);
  if (!Number.isFinite(p.jitter) || p.jitter < 0 || p.jitter > 1) throw bad('jitter', `must be between 0 and 1, got ${String(p.jitter)}`);
  if (typeof p.retryable !== 'function') throw bad('retryable', 'must be a function (error) => boolean');
  return p;
}

/**
 * The wait before attempt `attempt + 1` (after `attempt` failures, from 1) under `policy`: exponential, capped,
 * spread by jitter using `random` (a number in [0, 1)). @internal
 */
export function policyBackoffMs(policy: ResolvedRetryPolicy, attempt: number, random: () => number): number {
  return backoffMs({ initialMs: policy.initialBackoffMs, maxMs: policy.maxBackoffMs, factor: policy.backoffFactor, jitter: policy.jitter }, attempt, random);
}
