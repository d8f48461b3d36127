import type { SchedulerLike } from 'rxjs';
import { seededRandom } from '../../../src/internal/random.js';

/**
 * One fault rule of a plan: which fault, and when it strikes. Give `count` (the next N matching calls) or
 * `probability` (each matching call, drawn from the plan's seeded PRNG); `count` rules are used up first.
 */
export interface FaultRule<K extends string = string> {
  /** The fault (the wrapper documents its kinds). */
  readonly kind: K;
  /** Chance per call, 0 to 1. Default 0 (only `count`). */
  readonly probability?: number;
  /** Strike exactly the next `count` matching calls. */
  readonly count?: number;
  /**
   * Let the first `after` calls that reach this rule pass untouched before it applies (e.g. `{ after: 5,
   * count: 1 }` strikes the 6th call). Default 0.
   */
  readonly after?: number;
  /** Delay of `slow`, `timeout` and `hang` kinds, in virtual ms. Default 1 000. */
  readonly ms?: number;
  /** Retry-after of a `throttle`, in ms. Default 500. */
  readonly retryAfterMs?: number;
  /** Only calls about this key (partition id, lease id). Default: any. */
  readonly key?: string;
  /** Only while this condition is on (see {@link FaultEnv.turnOn}), e.g. a throttling storm. Default: always. */
  readonly during?: string;
}

/** A plan for one seam: rules per operation name, e.g. `{ read: [{ kind: 'throttle', probability: 0.1 }] }`. */
export type FaultPlan<Op extends string = string, K extends string = string> = {
  readonly [op in Op]?: readonly FaultRule<K>[];
};

/** A fault that struck, as recorded by {@link FaultEnv}. */
export interface InjectedFault {
  readonly atMs: number;
  readonly seam: string;
  readonly op: string;
  readonly kind: string;
  readonly key: string | undefined;
}

/**
 * What fault wrappers share: one seeded PRNG, the clock for delays, an on/off switch (faults stop for
 * quiescence), named conditions (storms) and a tally of every fault injected, by kind.
 *
 * @example
 * ```ts
 * const env = new FaultEnv({ seed: 42, scheduler: clock });
 * const source = faultySource(memory, { read: [{ kind: 'transient', probability: 0.05 }] }, env);
 * env.enabled = false; // quiescence
 * ```
 */
export class FaultEnv {
  readonly random: () => number;
  readonly scheduler: SchedulerLike;
  readonly #switch: { enabled: boolean };
  readonly #conditions: Set<string>;
  readonly #counts: Map<string, number>;
  readonly #used: WeakMap<FaultRule, number>;
  readonly #passed: WeakMap<FaultRule, number>;
  /** Every fault injected, in order (bounded to the last 10 000). */
  readonly log: InjectedFault[];

  constructor(options: { seed?: number; random?: () => number; scheduler: SchedulerLike }, shared?: FaultEnv) {
    this.random = options.random ?? shared?.random ?? seededRandom(options.seed ?? 1);
    this.scheduler = options.scheduler;
    this.#conditions = (shared ? shared.#conditions : undefined) ?? new Set();
    this.#counts = (shared ? shared.#counts : undefined) ?? new Map();
    this.#used = (shared ? shared.#used : undefined) ?? new WeakMap();
    this.#passed = (shared ? shared.#passed : undefined) ?? new WeakMap();
    this.log = shared?.log ?? [];
    this.#switch = (shared ? shared.#switch : undefined) ?? { enabled: true };
  }

  /** Faults strike only while true (shared by every env made with {@link FaultEnv.withScheduler}). */
  get enabled(): boolean {
    return this.#switch.enabled;
  }

  set enabled(value: boolean) {
    this.#switch.enabled = value;
  }

  /** The same PRNG, switch, conditions and tally, with another clock (e.g. one host's {@link HostClock}). */
  withScheduler(scheduler: SchedulerLike): FaultEnv {
    return new FaultEnv({ scheduler }, this);
  }

  /**
   * The same clock, switch, conditions and tally, with a PRNG of its own: a seam added later draws from it,
   * so the draws of the others (and so old seeds) stay as they were.
   */
  withRandom(random: () => number): FaultEnv {
    return new FaultEnv({ scheduler: this.scheduler, random }, this);
  }

  /** Turns a condition on (rules with `during: name` apply). */
  turnOn(name: string): void {
    this.#conditions.add(name);
  }

  turnOff(name: string): void {
    this.#conditions.delete(name);
  }

  /** Faults injected so far, by `seam.kind`. */
  counts(): ReadonlyMap<string, number> {
    return this.#counts;
  }

  /** Picks the fault for one call of `seam.op` about `key`, or `undefined`; records what struck. */
  pick<K extends string>(seam: string, plan: FaultPlan<string, K>, op: string, key?: string): FaultRule<K> | undefined {
    if (!this.enabled) return undefined;
    const rules = plan[op];
    if (!rules) return undefined;
    let chosen: FaultRule<K> | undefined;
    for (const rule of rules) {
      if (rule.key !== undefined && rule.key !== key) continue;
      if (rule.during !== undefined && !this.#conditions.has(rule.during)) continue;
      if (rule.after !== undefined) {
        const passed = this.#passed.get(rule) ?? 0;
        if (passed < rule.after) {
          this.#passed.set(rule, passed + 1);
          continue;
        }
      }
      const used = this.#used.get(rule) ?? 0;
      if (rule.count !== undefined && used < rule.count) {
        this.#used.set(rule, used + 1);
        chosen = rule;
        break;
      }
      // One draw per probabilistic rule per call, hit or miss, so the sequence depends only on the calls.
      if (rule.probability !== undefined && rule.probability > 0 && this.random() < rule.probability) {
        chosen = rule;
        break;
      }
    }
    if (!chosen) return undefined;
    const name = `${seam}.${chosen.kind}`;
    this.#counts.set(name, (this.#counts.get(name) ?? 0) + 1);
    this.log.push({ atMs: this.scheduler.now(), seam, op, kind: chosen.kind, key });
    if (this.log.length > 10_000) this.log.shift();
    return chosen;
  }

  /** Waits `ms` on this env's clock; rejects with the signal's reason when it is aborted first. */
  delay(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortReason(signal));
      const onAbort = () => {
        task.unsubscribe();
        reject(abortReason(signal!));
      };
      const task = this.scheduler.schedule(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** The reason of an aborted signal, or a DOM-style AbortError. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

/** A promise that settles only when `signal` aborts (never without one): a hung call. */
export function hang(signal?: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (!signal) return;
    if (signal.aborted) return reject(abortReason(signal));
    signal.addEventListener('abort', () => reject(abortReason(signal)), { once: true });
  });
}
