import { Subscription } from 'rxjs';
import type { SchedulerAction, SchedulerLike } from 'rxjs';

interface Entry {
  at: number;
  seq: number;
  cancelled: boolean;
  run: () => void;
}

/**
 * A virtual clock implementing RxJS `SchedulerLike` for promise-heavy code: `advance(ms)` runs due
 * actions in time order and lets every pending promise settle after each one, so async store calls
 * interleave with timers the way they would for real, without sleeping.
 */
export class VirtualScheduler implements SchedulerLike {
  #now: number;
  #seq = 0;
  #queue: Entry[] = [];

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    const subscription = new Subscription();
    const action = Object.assign(subscription, {
      schedule: (nextState?: T, nextDelay = 0) => this.schedule(work, nextDelay, nextState),
    }) as unknown as SchedulerAction<T>;
    const entry: Entry = {
      at: this.#now + Math.max(0, delay),
      seq: this.#seq++,
      cancelled: false,
      run: () => work.call(action, state),
    };
    subscription.add(() => {
      entry.cancelled = true;
    });
    this.#queue.push(entry);
    return subscription;
  }

  /** Runs everything due within the next `ms` virtual milliseconds. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    for (;;) {
      this.#queue = this.#queue.filter((e) => !e.cancelled);
      let next: Entry | undefined;
      for (const e of this.#queue) {
        if (e.at <= end && (!next || e.at < next.at || (e.at === next.at && e.seq < next.seq))) next = e;
      }
      if (!next) break;
      this.#queue.splice(this.#queue.indexOf(next), 1);
      this.#now = Math.max(this.#now, next.at);
      next.run();
      await settle();
    }
    this.#now = end;
  }

  /** Advances until `done()` holds (checked after each action) or `maxMs` passed; returns the time taken. */
  async advanceUntil(done: () => boolean, maxMs: number, stepMs = 100): Promise<number> {
    const start = this.#now;
    while (!done() && this.#now - start < maxMs) await this.advance(stepMs);
    return this.#now - start;
  }
}

/** Lets all pending promise chains (no real I/O) run to completion. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
