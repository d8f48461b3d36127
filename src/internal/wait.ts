import type { SchedulerLike } from 'rxjs';
import { onAbort } from './abortWatch.js';

/**
 * Resolves after `ms` on `scheduler`, or as soon as `signal` aborts (never rejects: callers check the
 * signal). Using the scheduler, not `setTimeout`, lets fake timers and virtual time drive every wait.
 *
 * @internal
 */
export function sleep(ms: number, scheduler: SchedulerLike, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    // The timer's task ends by running (nothing to cancel then); an abort cancels it.
    const stopWatching = onAbort(signal, () => {
      task.unsubscribe();
      resolve();
    });
    const task = scheduler.schedule(() => {
      stopWatching();
      resolve();
    }, Math.max(0, ms));
  });
}

/**
 * Resolves when `signal` aborts.
 *
 * @internal
 */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    onAbort(signal, resolve);
  });
}
