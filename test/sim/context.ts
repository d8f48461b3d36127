import type { FaultEnv, VirtualClock } from '../support/faults/index.js';
import { EPOCH_MS, type FaultSet, type SimConfig, type Violation } from './config.js';

/** Collects invariant violations, each reported once (by `once`, default invariant + detail). */
export class Violations {
  readonly list: Violation[] = [];
  readonly #reported = new Set<string>();

  constructor(private readonly clock: VirtualClock) {}

  report(invariant: string, detail: string, once = `${invariant}:${detail}`): void {
    if (this.#reported.has(once)) return;
    this.#reported.add(once);
    this.list.push({ invariant, atMs: this.clock.now() - EPOCH_MS, detail });
  }
}

/** What every part of one run shares: its config, seeded randomness, clock, fault switch and findings. */
export interface Sim {
  readonly config: SimConfig;
  readonly faults: ReadonlySet<FaultSet>;
  /** The run's main PRNG: the order of its draws is part of every seed's replay. */
  readonly random: () => number;
  /** An integer in `[0, n)` from {@link Sim.random}. */
  readonly int: (n: number) => number;
  /**
   * A PRNG of its own for one feature (seeded from the run's seed and `name`), so that adding a fault set
   * to a seed leaves the draws of the others, and so the rest of the run, as they were.
   */
  readonly randomFor: (name: string) => () => number;
  readonly clock: VirtualClock;
  readonly env: FaultEnv;
  readonly violations: Violations;
  /**
   * Counts one event of the chaos script (`host.crash`, `source.split`, ...) for the run's stats, or adds
   * `n` (a quantity, e.g. milliseconds). A summary over many seeds adds the counts up, but keeps the largest
   * of those named `*.max`.
   */
  readonly tally: (name: string, n?: number) => void;
  readonly events: ReadonlyMap<string, number>;
}
