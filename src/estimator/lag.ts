import { asyncScheduler, catchError, EMPTY, exhaustMap, Observable, timer, type SchedulerLike } from 'rxjs';
import { InvalidOptionsError, TransientError } from '../errors/index.js';
import { onAbort } from '../internal/abortWatch.js';
import { logger } from '../internal/log.js';
import { checkEstimateOptions, estimateLag, type EstimateLagOptions, type LeaseLag } from './estimateLag.js';

/** How {@link lag$} polls. */
export interface LagPollOptions {
  /** Time between estimates, in milliseconds. Default `5000` (ms). A poll still running when the next is due is not doubled. */
  readonly intervalMs?: number;
  /** Scheduler that times the polls. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

/**
 * The lag of every lease, estimated now and then every `intervalMs`, as an Observable (see
 * {@link estimateLag} for what the numbers mean). A poll that fails with a `TransientError` (throttling, a
 * timeout) is skipped and the next one runs on time; other errors (deleted container, rejected credentials)
 * end the stream with that error. Unsubscribing aborts a poll in flight.
 *
 * @example
 * ```ts
 * import { lag$ } from 'rxfeed';
 * lag$({ source, leases, leasePrefix: 'orders-view.' }, { intervalMs: 10_000 }).subscribe((lags) =>
 *   gauge.set(lags.reduce((n, l) => n + l.estimatedLag, 0)),
 * );
 * ```
 */
export function lag$(options: EstimateLagOptions, poll: LagPollOptions = {}): Observable<LeaseLag[]> {
  checkEstimateOptions(options);
  const intervalMs = poll.intervalMs ?? 5_000;
  if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
    throw new InvalidOptionsError('intervalMs', `expected a positive number of milliseconds, got ${String(intervalMs)}`);
  }
  const scheduler = poll.scheduler ?? asyncScheduler;
  const log = logger('estimator');
  const once = (): Observable<LeaseLag[]> =>
    new Observable<LeaseLag[]>((subscriber) => {
      const controller = new AbortController();
      const outer = options.signal;
      const stopWatching = outer ? onAbort(outer, () => controller.abort(outer.reason)) : undefined;
      estimateLag({ ...options, signal: controller.signal }).then(
        (lags) => {
          subscriber.next(lags);
          subscriber.complete();
        },
        (err: unknown) => subscriber.error(err),
      );
      return () => {
        stopWatching?.();
        controller.abort();
      };
    }).pipe(
      catchError((err: unknown) => {
        if (!(err instanceof TransientError)) throw err;
        log('estimate skipped: %s', err.message);
        return EMPTY;
      }),
    );
  return timer(0, intervalMs, scheduler).pipe(exhaustMap(once));
}
