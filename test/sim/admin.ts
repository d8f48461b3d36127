import { releaseLeases, resetLeases, rewindLeases } from '../../src/admin/index.js';
import { EPOCH_MS, leaseNaming, TIMINGS } from './config.js';
import type { Sim } from './context.js';
import type { ObservedStores } from './observedStores.js';
import type { World } from './world.js';

/**
 * The `admin` fault set: an operator runs the lease administration functions against the shared lease store
 * while the hosts run (always with `force`: the owners are live): `rewindLeases` (to the beginning or a past
 * time: the changes since are delivered again; a lease whose checkpoint lags that time moves forward, and the
 * changes it skips need not arrive: `World.skippedByOperator`), `releaseLeases` (owners deposed, leases free) and, rarely,
 * `resetLeases` (every lease deleted: the processor bootstraps again from its `startFrom`). Draws come from
 * a PRNG of their own; one operation at a time; an operation that fails (e.g. a rewind meeting a partition
 * that just split) is counted, not a violation. A reset that fails has deleted some leases and left the
 * markers (the processor does not bootstrap again): the operator sees the error and runs it again, once the
 * chaos is over and until it succeeds ({@link AdminOps.finish}; run again amid the faults, it fails as the
 * first did). A halted partition's lease, taken and given back again and again, makes a forced delete meet a
 * conflict often.
 *
 * What each promises is checked by the invariants: after a rewind or reset nothing is lost
 * (`change-never-delivered`; under a start other than `'beginning'`, what a reset skips is the changes not yet
 * delivered when it ran), epochs never go back (`epoch-went-back`; views and dead letters fence by them), and
 * the deposed owner stops within one lease expiration (`two-live-owners`, `write-after-takeover-accepted`).
 */
export class AdminOps {
  readonly #random: () => number;
  #busy = false;
  #resets = 0;
  /** A reset failed and is to be run again (the operator saw its error). */
  #resetFailed = false;
  /** A reset is in flight. */
  #resetting = false;

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
    private readonly stores: ObservedStores,
  ) {
    this.#random = sim.randomFor('admin');
  }

  /** One tick of the chaos script: now and then, an operation. */
  tick(): void {
    const r = this.#random();
    if (this.#busy || r >= 0.006) return;
    void this.#run();
  }

  /**
   * Before quiescence: a reset that failed is run again until it succeeds (up to 10 times, 1 s apart), as an
   * operator would; a processor left half reset is the failed operation's doing, not the hosts'. The faults
   * stop first, as quiescence stops them (nothing changes for a run without a failed reset).
   */
  async finish(advance: (ms: number) => Promise<void>): Promise<void> {
    if (!this.#resetting && !this.#resetFailed) return;
    this.sim.env.enabled = false;
    for (let attempt = 0; attempt < 10 && (this.#resetting || this.#resetFailed); attempt++) {
      if (!this.#busy) void this.#run();
      await advance(1_000);
    }
  }

  #run(): Promise<void> {
    const { config, clock } = this.sim;
    const naming = leaseNaming(config);
    const options = {
      leases: this.stores.admin,
      leasePrefix: naming.prefix,
      ...(config.leaseScheme ? { leaseScheme: config.leaseScheme } : {}),
      leaseExpirationMs: TIMINGS.leaseExpirationMs,
      now: () => clock.now(),
      force: true,
    };
    // Run again, a reset that failed draws nothing.
    const kind = this.#resetFailed ? 1 : this.#random();
    let op: Promise<unknown>;
    let name: string;
    if (kind < 0.45) {
      // Back to the beginning, or to a time between the run's start and now.
      const to = this.#random() < 0.3 ? ('beginning' as const) : new Date(EPOCH_MS + Math.floor(this.#random() * (clock.now() - EPOCH_MS)));
      name = 'rewind';
      op = rewindLeases({ ...options, to, source: this.world.source });
    } else if ((kind < 0.85 || this.#resets >= 2) && !this.#resetFailed) {
      name = 'release';
      op = releaseLeases(options);
    } else {
      name = this.#resetFailed ? 'reset.again' : 'reset';
      if (!this.#resetFailed) this.#resets++;
      // A reset starts over from `startFrom`: under a start other than 'beginning', what was not delivered yet
      // need not be. Nor what lay before the start until now: the leases the bootstrap creates again may start
      // at an earlier "now" (that of the run that creates them: a host running since before the first leases'
      // creator started), and re-read a change from before the old start, which an `exactlyOnce` view, its
      // positions kept, skips as a replay below the LSN it applied up to. Such a change may count as delivered
      // already (a rewind re-read it, and the view skipped it then too): seed 534, `--start now --view exactlyOnce`.
      if (config.start !== undefined && config.start !== 'beginning') {
        const skipsReplays = config.view === 'exactlyOnce';
        for (const key of this.world.written) {
          if (!this.world.delivered.has(key) || (skipsReplays && this.world.isBeforeStart(key))) this.world.beforeStart.add(key);
        }
      }
      op = resetLeases(options);
    }
    this.#busy = true;
    this.sim.tally(`admin.${name}`);
    const reset = name !== 'rewind' && name !== 'release';
    this.#resetting = reset;
    return op
      .then(
        () => {
          if (reset) this.#resetFailed = false;
        },
        () => {
          this.sim.tally(`admin.${name}.failed`);
          if (reset) this.#resetFailed = true;
        },
      )
      .finally(() => {
        this.#busy = false;
        this.#resetting = false;
      });
  }
}
