import { asyncScheduler, catchError, defer, map, type Observable, of, retry, type SchedulerLike, throwError, timer } from 'rxjs';
import { policyBackoffMs, type ResolvedRetryPolicy } from './RetryPolicy.js';

/** How a piece of work ended under a retry policy. */
export type RetryOutcome<R> =
  | { readonly ok: true; readonly value: R; readonly attempts: number }
  | { readonly ok: false; readonly error: unknown; readonly attempts: number };

/**
 * Runs `work` and retries it by `policy` (backoff on `scheduler`), emitting one {@link RetryOutcome}: the
 * value with the number of attempts it took, or the last error once the attempts are used up or the error is
 * not retryable. Never errors; unsubscribing cancels the wait. @internal
 */
export function retryWithPolicy<R>(
  work: (attempt: number) => Promise<R> | R,
  policy: ResolvedRetryPolicy,
  options: { scheduler?: SchedulerLike; random?: () => number; onRetry?: (error: unknown, attempt: number) => void } = {},
): Observable<RetryOutcome<R>> {
  const scheduler = options.scheduler ?? asyncScheduler;
  const random = options.random ?? Math.random;
  return defer(() => {
    let attempts = 0;
    return defer(async () => work(++attempts)).pipe(
      retry({
        count: policy.attempts - 1,
        delay: (error: unknown, failures: number) => {
          if (!policy.retryable(error)) return throwError(() => error);
          options.onRetry?.(error, failures);
          return timer(policyBackoffMs(policy, failures, random), scheduler);
        },
      }),
      map((value): RetryOutcome<R> => ({ ok: true, value, attempts })),
      catchError((error: unknown) => of<RetryOutcome<R>>({ ok: false, error, attempts })),
    );
  });
}
