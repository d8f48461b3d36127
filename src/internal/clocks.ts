import { asyncScheduler, type SchedulerLike } from 'rxjs';

/**
 * `asyncScheduler`'s timers with a monotonic clock: `now()` is `performance.now()` (ms since the process
 * started), which an NTP step or a manual change of the system time does not move. RxJS's own
 * `asyncScheduler.now()` is the wall clock (`Date.now()`): a step moves it, so a duration measured on it
 * (how long since a lease version was first seen, a local deadline) can come out seconds too long or short.
 * Its timers are relative delays (`setInterval`), not affected by a step either.
 *
 * @internal
 */
export const monotonicScheduler: SchedulerLike = {
  now: () => performance.now(),
  schedule: asyncScheduler.schedule.bind(asyncScheduler),
};

/**
 * The scheduler to measure durations on: `scheduler` as given (a virtual clock in tests), except that none,
 * or RxJS's `asyncScheduler` (a wall clock), gives {@link monotonicScheduler}.
 *
 * @internal
 */
export function monotonicOf(scheduler: SchedulerLike | undefined): SchedulerLike {
  return scheduler === undefined || scheduler === asyncScheduler ? monotonicScheduler : scheduler;
}

/**
 * The wall clock (ms since the epoch) for timestamps written where other processes read them: `now` as
 * given, else `Date.now` when `scheduler` is none or `asyncScheduler`, else `scheduler.now()` (a virtual
 * clock in tests stands for both clocks).
 *
 * @internal
 */
export function wallClockOf(now: (() => number) | undefined, scheduler: SchedulerLike | undefined): () => number {
  if (now) return now;
  if (scheduler === undefined || scheduler === asyncScheduler) return () => Date.now();
  return () => scheduler.now();
}
