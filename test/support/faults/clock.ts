import { Subscription } from 'rxjs';
import type { SchedulerAction, SchedulerLike } from 'rxjs';

interface Entry {
  readonly at: number;
  readonly seq: number;
  cancelled: boolean;
  readonly run: () => void;
}

/** Lets every pending promise chain (no real I/O) run: microtasks drain completely before a macrotask. */
export function settle(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * A virtual clock implementing RxJS `SchedulerLike` for promise-heavy code, generalising
 * `test/leases/virtualScheduler.ts`: a binary heap of timers (many hosts schedule many), `advance(ms)` runs
 * due actions in (time, order of scheduling) order and lets pending promises settle after each one.
 * Actions support `this.schedule(...)` rescheduling, so periodic RxJS timers work too.
 *
 * @example
 * ```ts
 * const clock = new VirtualClock();
 * timer(1_000, clock).subscribe(() => console.log('fired at', clock.now()));
 * await clock.advance(1_000);
 * ```
 */
export class VirtualClock implements SchedulerLike {
  #now: number;
  #seq = 0;
  readonly #heap: Entry[] = [];
  /** Actions run so far (a measure of simulation work). */
  actions = 0;

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
      at: this.#now + Math.max(0, Number.isFinite(delay) ? delay : 0),
      seq: this.#seq++,
      cancelled: false,
      run: () => work.call(action, state),
    };
    subscription.add(() => {
      entry.cancelled = true;
    });
    this.#push(entry);
    return subscription;
  }

  /** Runs everything due within the next `ms` virtual milliseconds; the clock then reads `now + ms`. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    for (;;) {
      const next = this.#heap[0];
      if (!next || next.at > end) break;
      this.#pop();
      if (next.cancelled) continue;
      this.#now = Math.max(this.#now, next.at);
      this.actions++;
      next.run();
      await settle();
    }
    this.#now = end;
  }

  /** Advances in steps of `stepMs` until `done()` holds or `maxMs` passed; returns the virtual time taken. */
  async advanceUntil(done: () => boolean, maxMs: number, stepMs = 100): Promise<number> {
    const start = this.#now;
    while (!done() && this.#now - start < maxMs) await this.advance(stepMs);
    return this.#now - start;
  }

  #less(a: Entry, b: Entry): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  #push(entry: Entry): void {
    const heap = this.#heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && this.#less(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && this.#less(heap[r]!, heap[m]!)) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
  }
}

/** State of a {@link HostClock}. */
export type HostState = 'running' | 'paused' | 'dead';

/** How a {@link HostClock}'s time differs from the shared clock. */
export interface HostClockOptions {
  /** How far this host's wall clock is ahead of the shared one at creation (negative: behind), in ms. Default 0. */
  readonly skewMs?: number;
  /**
   * How much faster this host's clocks (both) run than the shared one: 0.01 gains 10 ms per second, -0.01
   * loses them; timers run by this rate (a 1 000 ms timer fires after 1 000 of this host's ms). Default 0.
   */
  readonly drift?: number;
  /**
   * What this host's monotonic clock ({@link HostClock.now}) reads at creation, in ms (as `performance.now()`
   * counts from its process's start, unrelated to other hosts'). Default: the shared clock's time then.
   */
  readonly uptimeMs?: number;
  /** Randomness for how late timers run on a slow event loop (see {@link HostClock.slow}). Default `Math.random`. */
  readonly random?: () => number;
}

const never = new Promise<never>(() => undefined);

/**
 * One process's view of a shared {@link VirtualClock}: two clocks of its own, both running `drift` faster or
 * slower, as a machine has them — a monotonic clock ({@link HostClock.now}, the scheduler's: timers and
 * durations; `performance.now()` in production), which only drifts, and a wall clock
 * ({@link HostClock.wallNow}: `Date.now()`), `skewMs` ahead or behind and stepped by {@link HostClock.step}
 * (NTP corrections) — an event loop that can run timers late
 * ({@link HostClock.slow}: slow, not frozen), `pause()` freezes it (due timers wait, calls through
 * {@link HostClock.gate} hang before and after reaching the other side) until `resume()`, when the late
 * timers fire at once, as after a long GC pause; `kill()` is a crash: no timer of this host fires again and
 * every gated call hangs for good (a dead process never sees a reply).
 *
 * @example
 * ```ts
 * const host = new HostClock(clock, { skewMs: -8_000, drift: 0.01 });
 * createLeaseCoordinator({ ...options, scheduler: host, now: () => host.wallNow(), store: gateLeaseStore(store, host) });
 * host.pause(); await clock.advance(5_000); host.resume(); // a zombie
 * ```
 */
export class HostClock implements SchedulerLike {
  #state: HostState = 'running';
  #resumed: Promise<void> | undefined;
  #resume: (() => void) | undefined;
  #offsetMs: number;
  readonly #drift: number;
  readonly #origin: number;
  readonly #uptimeMs: number;
  readonly #random: () => number;
  #lateMs = 0;
  /** When the host was last paused or killed, in virtual ms. */
  since = 0;

  constructor(
    readonly clock: VirtualClock,
    options: HostClockOptions = {},
  ) {
    this.#offsetMs = options.skewMs ?? 0;
    this.#drift = options.drift ?? 0;
    if (!(this.#drift > -0.5 && this.#drift < 0.5)) throw new RangeError(`drift must be within ±0.5, got ${this.#drift}`);
    this.#origin = clock.now();
    this.#uptimeMs = options.uptimeMs ?? this.#origin;
    this.#random = options.random ?? Math.random;
  }

  get state(): HostState {
    return this.#state;
  }

  /**
   * This host's monotonic clock (the scheduler's, what its timers run by): its reading at creation plus the
   * shared time since, drift included. Never stepped, never skewed against anything (only its rate matters).
   */
  now(): number {
    const shared = this.clock.now();
    return shared + (this.#uptimeMs - this.#origin) + this.#drift * (shared - this.#origin);
  }

  /** This host's wall clock (ms since the epoch): the shared clock's, plus its skew, its steps and what drift added since creation. */
  wallNow(): number {
    const shared = this.clock.now();
    return shared + this.#offsetMs + this.#drift * (shared - this.#origin);
  }

  /** How far this host's wall clock is ahead of the shared one now (negative: behind), in ms. */
  get skewMs(): number {
    return this.wallNow() - this.clock.now();
  }

  /** Steps this host's wall clock by `ms` (an NTP correction; negative steps it back); its monotonic clock does not move. */
  step(ms: number): void {
    this.#offsetMs += ms;
  }

  /**
   * Makes this host's event loop slow: from now on every timer runs up to `lateMs` late (uniformly drawn),
   * as under CPU starvation or a busy loop; `slow(0)` makes it prompt again. Unlike a pause, the host keeps
   * running and talking to the stores.
   */
  slow(lateMs: number): void {
    this.#lateMs = Math.max(0, lateMs);
  }

  /** Most a timer runs late now (0 when the event loop is prompt). */
  get lateMs(): number {
    return this.#lateMs;
  }

  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    const outer = new Subscription();
    const action = Object.assign(outer, {
      schedule: (nextState?: T, nextDelay = 0) => this.schedule(work, nextDelay, nextState),
    }) as unknown as SchedulerAction<T>;
    const hostDelay = Math.max(0, Number.isFinite(delay) ? delay : 0);
    const late = this.#lateMs > 0 ? Math.floor(this.#random() * this.#lateMs) : 0;
    // As a real timer, never before `hostDelay` of this host's time passed: the shared time it fires at is
    // rounded (to the precision of a number near the shared clock's time), and a caller that re-arms until
    // its own due time would otherwise spin at one shared instant.
    const due = this.now() + hostDelay;
    const fire = () => {
      const short = due - this.now();
      if (short > 0) {
        const shared = this.clock.now();
        outer.add(this.clock.schedule(fire, Math.max(short / (1 + this.#drift), 2 * Number.EPSILON * Math.abs(shared))));
        return;
      }
      if (this.#state === 'running') return work.call(action, state);
      void this.pass().then(() => {
        if (!outer.closed) work.call(action, state);
      });
    };
    outer.add(this.clock.schedule(fire, hostDelay / (1 + this.#drift) + late));
    return outer;
  }
  /** Freezes the host until {@link HostClock.resume}. */
  pause(): void {
    if (this.#state !== 'running') return;
    this.#state = 'paused';
    this.since = this.clock.now();
    this.#resumed = new Promise((resolve) => (this.#resume = resolve));
  }

  /** Lets a paused host run again: late timers and held replies arrive at once. */
  resume(): void {
    if (this.#state !== 'paused') return;
    this.#state = 'running';
    this.#resume?.();
    this.#resumed = this.#resume = undefined;
  }

  /** Crashes the host: nothing of it runs again. */
  kill(): void {
    if (this.#state === 'dead') return;
    if (this.#state === 'running') this.since = this.clock.now();
    this.#state = 'dead';
    this.#resume?.();
  }

  /** Resolves once the host runs (at once when it does); never when it is dead. */
  async pass(): Promise<void> {
    for (;;) {
      if (this.#state === 'dead') return never;
      if (this.#state === 'running') return;
      await this.#resumed;
    }
  }

  /** Runs `call` as this host: only while it runs, and its reply is seen only while it runs. */
  async gate<R>(call: () => Promise<R>): Promise<R> {
    await this.pass();
    try {
      const result = await call();
      await this.pass();
      return result;
    } catch (error) {
      await this.pass();
      throw error;
    }
  }
}
