import type { SchedulerLike, Subscription } from 'rxjs';
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

/** What a {@link Sleeper} resolves at once with (a signal aborted already). */
const AWAKE: Promise<void> = Promise.resolve();

/**
 * The waits of one loop that sleeps again and again on the same signal (a partition reader between its polls):
 * each {@link Sleeper.sleep} resolves as {@link sleep} does, after `ms` on the scheduler or as soon as the signal
 * aborts, but the sleeper watches the signal once for all its sleeps and schedules the same function each time.
 * A sleep of an idle reader lives through its whole wait (seconds), so whatever it allocates is promoted out of
 * the young generation and later marked; a sleeper's sleep allocates its promise and the scheduler's timer only,
 * not a watch of the signal and four closures. One sleep at a time; call {@link Sleeper.dispose} when the loop
 * ends without the signal aborting.
 *
 * @example
 * ```ts
 * const sleeper = new Sleeper(asyncScheduler);
 * while (!signal.aborted) { await poll(); await sleeper.sleep(5000, signal); }
 * sleeper.dispose();
 * ```
 * @internal
 */
export class Sleeper {
  readonly #scheduler: SchedulerLike;
  #resolve: (() => void) | undefined;
  #task: Subscription | undefined;
  /** The signal watched, and how to stop watching it. */
  #signal: AbortSignal | undefined;
  #stopWatching: (() => void) | undefined;
  /** The sleep's end (one function for every sleep). */
  readonly #wake = (): void => {
    this.#task = undefined;
    this.#end();
  };
  /** The signal aborted: the sleep in progress, if any, ends now and its timer is cancelled. */
  readonly #abort = (): void => {
    this.#signal = undefined;
    this.#stopWatching = undefined;
    const task = this.#task;
    this.#task = undefined;
    task?.unsubscribe();
    this.#end();
  };

  constructor(scheduler: SchedulerLike) {
    this.#scheduler = scheduler;
  }

  /** Resolves after `ms` on the scheduler, or as soon as `signal` aborts (never rejects: callers check the signal). */
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return AWAKE;
    if (signal !== this.#signal) {
      this.#stopWatching?.();
      this.#signal = signal;
      this.#stopWatching = onAbort(signal, this.#abort);
    }
    return new Promise((resolve) => {
      this.#resolve = resolve;
      this.#task = this.#scheduler.schedule(this.#wake, Math.max(0, ms));
    });
  }

  /** Stops watching the signal and ends a sleep in progress (it resolves); the sleeper may sleep again. */
  dispose(): void {
    this.#stopWatching?.();
    this.#stopWatching = undefined;
    this.#signal = undefined;
    this.#task?.unsubscribe();
    this.#task = undefined;
    this.#end();
  }

  #end(): void {
    const resolve = this.#resolve;
    this.#resolve = undefined;
    resolve?.();
  }
}
