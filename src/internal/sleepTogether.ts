import type { SchedulerLike, Subscription } from 'rxjs';
import { onAbort } from './abortWatch.js';

/** Sleeps due at one time on one scheduler: one scheduler action wakes them all, in the order they began. */
class WakeGroup {
  readonly due: number;
  /** Each sleep's resolve, or `undefined` once it was aborted. */
  readonly #wakes: ((() => void) | undefined)[] = [];
  /** Each sleep's watch of its signal, ended when it is woken. */
  readonly #stops: (() => void)[] = [];
  #pending = 0;
  #task: Subscription | undefined;
  /** True once the timer ran (or every sleep was aborted): no more sleeps may join. */
  closed = false;

  constructor(
    private readonly scheduler: SchedulerLike,
    due: number,
    ms: number,
  ) {
    this.due = due;
    this.#task = scheduler.schedule(() => this.#fire(), ms);
  }

  /** A sleep joins; its index, for {@link WakeGroup.abort}. */
  add(wake: () => void, stop: () => void): number {
    this.#pending++;
    this.#stops.push(stop);
    return this.#wakes.push(wake) - 1;
  }

  /** Sleep `index` was aborted (its signal's watch has ended): it is not woken; the timer goes with the last one. */
  abort(index: number): void {
    const wake = this.#wakes[index];
    if (wake === undefined) return;
    this.#wakes[index] = undefined;
    if (--this.#pending > 0) return;
    this.closed = true;
    this.#task?.unsubscribe();
    this.#task = undefined;
    if (groups.get(this.scheduler) === this) groups.delete(this.scheduler);
  }

  #fire(): void {
    this.closed = true;
    this.#task = undefined;
    if (groups.get(this.scheduler) === this) groups.delete(this.scheduler);
    const wakes = this.#wakes;
    const stops = this.#stops;
    for (let i = 0; i < wakes.length; i++) {
      const wake = wakes[i];
      if (wake === undefined) continue;
      wakes[i] = undefined;
      stops[i]!();
      wake();
    }
  }
}

/** The group the last sleep of each scheduler joined: the next sleep due at the same time joins it too. */
const groups = new WeakMap<SchedulerLike, WakeGroup>();

/**
 * Resolves after `ms` on `scheduler`, or as soon as `signal` aborts (never rejects: callers check the
 * signal), like {@link sleep}; but sleeps due at the same time (`scheduler.now() + ms`) one after another share
 * one scheduler action, which wakes them in the order they began. For the polls of many idle partitions
 * that are due together (a host's readers poll in bunches: leases are acquired in rounds, and replies that
 * arrive together start their waits in the same millisecond): one timer (an rxjs action and a Node timeout)
 * instead of one per poll. Each sleep still ends exactly when it would alone; an abort ends only its own
 * sleep, and the shared timer is cancelled with the last one.
 *
 * @example
 * ```ts
 * await sleepTogether(pollIntervalMs, scheduler, signal); // as sleep(), sharing a timer with polls due then
 * ```
 * @internal
 */
export function sleepTogether(ms: number, scheduler: SchedulerLike, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const wait = Math.max(0, ms);
    const due = scheduler.now() + wait;
    let group = groups.get(scheduler);
    if (group === undefined || group.closed || group.due !== due) {
      group = new WakeGroup(scheduler, due, wait);
      // A scheduler that ran the action at once (delay 0 outside a flush): nothing left to wait for.
      if (group.closed) return resolve();
      groups.set(scheduler, group);
    }
    const joined = group;
    let index = -1;
    const stopWatching = onAbort(signal, () => {
      joined.abort(index);
      resolve();
    });
    index = joined.add(resolve, stopWatching);
  });
}
