import { HostClock } from '../support/faults/index.js';
import { TIMINGS } from './config.js';
import type { Sim } from './context.js';

/** Most a host's clock is off at start under the `clock` fault set: three lease expirations either way. */
export const MAX_SKEW_MS = 3 * TIMINGS.leaseExpirationMs;
/** Most a host's clock drifts under the `clock` fault set (±2%: 20 ms a second). */
export const MAX_DRIFT = 0.02;
/** Most a slow event loop runs a timer late (a fifth of the lease expiration). */
export const MAX_LATE_MS = TIMINGS.leaseExpirationMs / 5;

/**
 * The `clock` fault set: each host gets clocks of its own, as a machine has two. Its wall clock (the lease
 * documents' timestamps) is off by up to {@link MAX_SKEW_MS} for half of the hosts, by up to 50 ms for the
 * rest, and stepped now and then by up to two expirations either way (NTP corrections). Its monotonic clock
 * (the scheduler's: timers and every duration of lease time) reads an arbitrary time at start and is never
 * stepped. Both drift by up to {@link MAX_DRIFT}, and event loops turn slow for a while (timers up to
 * {@link MAX_LATE_MS} late). Draws come from PRNGs of their own; without the set every host shares the run's
 * clock, as before.
 */
export class HostClocks {
  readonly #random: () => number;
  /** Draws of the monotonic clocks' readings at start: a stream of its own, so the `clock` draws stay as they were. */
  readonly #uptime: () => number;
  readonly #on: boolean;

  constructor(private readonly sim: Sim) {
    this.#on = sim.faults.has('clock');
    this.#random = sim.randomFor('clock');
    this.#uptime = sim.randomFor('clock:uptime');
  }

  /** The clock of a host that joins now. */
  create(): HostClock {
    const { clock } = this.sim;
    if (!this.#on) return new HostClock(clock);
    const r = this.#random;
    const far = r() < 0.5;
    const skewMs = Math.round((r() * 2 - 1) * (far ? MAX_SKEW_MS : 50));
    const drift = (r() * 2 - 1) * MAX_DRIFT;
    if (far) this.sim.tally('clock.skewed');
    // A process's monotonic clock counts from its own start (performance.now()): unrelated to other hosts'.
    const uptimeMs = Math.floor(this.#uptime() * 10 * MAX_SKEW_MS);
    return new HostClock(clock, { skewMs, drift, uptimeMs, random: this.sim.randomFor(`late:${r()}`) });
  }

  /** One tick of the chaos script: now and then a wall clock steps, or an event loop turns slow for 1–5 s. */
  tick(running: readonly { readonly clock: HostClock }[]): void {
    if (!this.#on || running.length === 0) return;
    const r = this.#random;
    if (r() < 0.005) {
      const victim = running[Math.floor(r() * running.length)]!;
      victim.clock.step(Math.round((r() * 2 - 1) * TIMINGS.leaseExpirationMs * 2));
      this.sim.tally('clock.step');
    }
    if (r() < 0.01) {
      const victim = running[Math.floor(r() * running.length)]!;
      if (victim.clock.lateMs > 0) return;
      victim.clock.slow(20 + Math.floor(r() * MAX_LATE_MS));
      this.sim.tally('clock.slowLoop');
      this.sim.clock.schedule(() => victim.clock.slow(0), 1_000 + Math.floor(r() * 4_000));
    }
  }

  /** Quiescence: every event loop prompt again (clocks stay as they are: skew does not go away). */
  calm(all: readonly { readonly clock: HostClock }[]): void {
    for (const h of all) h.clock.slow(0);
  }
}
