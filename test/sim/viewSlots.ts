import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { ViewWrite } from '../../src/sinks/ViewStore.js';
import type { Sim } from './context.js';

/** How long a live lease's batch may wait on a write of leases that ended before it counts (virtual ms). */
export const DEPOSED_WAIT_MS = 100;

/** One view write of a host on its way to the store, as {@link ViewSlots} follows it. */
interface Flight {
  /** The pipeline run (its start, virtual ms) that issued it: each run's sink has slots of its own. */
  readonly run: number;
  readonly at: number;
  /** The ownerships of its batches (their trackers' signals): deposed once every one aborted. */
  readonly owners: readonly AbortSignal[];
  /** When every owner had aborted (virtual ms), once they have. */
  deposedAt: number | undefined;
}

/**
 * What `materializeToView` promises about the write slots of one host's view sink (`concurrency` of them): a
 * write whose leases all ended while it was in flight gives its slot back at once and finishes in the
 * background, at most `concurrency` of them at once. Watched from the store's side (the write leaving and
 * settling) and the sink's input (each batch arriving, with its ownership's signal):
 *
 * - `live-write-behind-deposed`: a write of a live lease started in the very tick a deposed write landed (what
 *   starting in its slot looks like), its batch having arrived before that write's leases ended and
 *   {@link DEPOSED_WAIT_MS} before it started, while no live write of the sink settled then and the deposed writes
 *   were within their bound (past it, a deposed write keeps its slot by design);
 * - `view-writes-above-bound`: more than `2 × concurrency` writes of one run's sink in flight at once.
 *
 * Tallies: `view.writeOutlivedLeases` (a write settled after all its leases ended: a zombie write),
 * `view.liveBesideDeposed` (a live write left while `concurrency` others of its run were in flight, a deposed
 * one among them: it took a slot a deposed write gave back), `view.deposedAtBound` (a deposed write settled
 * while more than `concurrency` of its run's were deposed: the bound held one in its slot).
 */
export class ViewSlots {
  readonly #sim: Sim;
  readonly #host: string;
  readonly #concurrency: number;
  readonly #run: () => number;
  /** Ownership signals by `partition@epoch`, from the batches reaching the sink. */
  readonly #owners = new Map<string, AbortSignal>();
  /** Arrival times of batches not written yet, by `partition@epoch`, with their last LSN read. */
  readonly #arrivals = new Map<string, { readonly lsn: number | undefined; readonly at: number }[]>();
  readonly #flights = new Set<Flight>();
  /** The last deposed write that landed: when, and when it had been deposed. */
  #landed: { readonly at: number; readonly deposedAt: number; readonly run: number; readonly withinBound: boolean } | undefined;
  /** When a live write of each run last settled. */
  readonly #liveSettledAt = new Map<number, number>();

  constructor(sim: Sim, host: string, concurrency: number, run: () => number) {
    this.#sim = sim;
    this.#host = host;
    this.#concurrency = concurrency;
    this.#run = run;
  }

  /** A batch reached the sink (a `tap` just before it). */
  arrived(batch: ChangeBatch<unknown>): void {
    const signal = batch.origin?.tracker.signal;
    if (!signal || signal.aborted) return;
    const key = `${batch.partition}@${batch.epoch}`;
    if (this.#owners.get(key) !== signal) {
      // One listener per ownership: it marks the writes in flight it was the last live owner of.
      this.#owners.set(key, signal);
      signal.addEventListener('abort', () => this.#ended(key), { once: true });
    }
    const list = this.#arrivals.get(key) ?? [];
    list.push({ lsn: batch.readLsn, at: this.#sim.clock.now() });
    this.#arrivals.set(key, list);
  }

  #ended(key: string): void {
    this.#arrivals.delete(key);
    const now = this.#sim.clock.now();
    for (const flight of this.#flights) {
      if (flight.deposedAt === undefined && flight.owners.length > 0 && flight.owners.every((s) => s.aborted)) flight.deposedAt = now;
    }
  }

  /** A write left for the store; call the function it returns once it settled. */
  left(write: ViewWrite<unknown>): () => void {
    const now = this.#sim.clock.now();
    const run = this.#run();
    const keys = write.partitions.map((p) => `${p.partition}@${p.epoch}`);
    const owners = keys.flatMap((k) => {
      const signal = this.#owners.get(k);
      return signal ? [signal] : [];
    });
    const flight: Flight = { run, at: now, owners, deposedAt: undefined };
    const live = owners.length > 0 && owners.some((s) => !s.aborted);
    if (live) {
      const others = [...this.#flights].filter((f) => f.run === run);
      if (others.length >= this.#concurrency && others.some((f) => f.deposedAt !== undefined)) this.#sim.tally('view.liveBesideDeposed');
      this.#check(write, keys, now, run);
    }
    this.#flights.add(flight);
    const inFlight = [...this.#flights].filter((f) => f.run === run).length;
    if (inFlight > 2 * this.#concurrency) {
      this.#sim.violations.report('view-writes-above-bound', `${this.#host}: ${inFlight} view writes of one sink in flight > 2 × concurrency ${this.#concurrency}`, `slots:${this.#host}`);
    }
    return () => this.#settled(flight, live);
  }

  #settled(flight: Flight, live: boolean): void {
    this.#flights.delete(flight);
    const now = this.#sim.clock.now();
    if (flight.deposedAt === undefined) {
      if (live) this.#liveSettledAt.set(flight.run, now);
      return;
    }
    this.#sim.tally('view.writeOutlivedLeases');
    const deposed = [...this.#flights].filter((f) => f.run === flight.run && f.deposedAt !== undefined).length + 1;
    const withinBound = deposed <= this.#concurrency;
    if (!withinBound) this.#sim.tally('view.deposedAtBound');
    this.#landed = { at: now, deposedAt: flight.deposedAt, run: flight.run, withinBound };
  }

  /** A live write left at `now`: did it start in the slot a deposed write just gave back? */
  #check(write: ViewWrite<unknown>, keys: readonly string[], now: number, run: number): void {
    // Its batches' arrivals: the oldest not written yet of each partition, up to the commit's LSN.
    let arrived = Infinity;
    write.partitions.forEach((commit, i) => {
      const list = this.#arrivals.get(keys[i]!);
      while (list && list.length > 0 && (list[0]!.lsn === undefined || commit.lsn === undefined || list[0]!.lsn <= commit.lsn)) {
        arrived = Math.min(arrived, list.shift()!.at);
      }
    });
    const landed = this.#landed;
    if (!landed || landed.at !== now || landed.run !== run || !landed.withinBound) return;
    if (this.#liveSettledAt.get(run) === now) return; // a live write's slot, as likely
    if (arrived > landed.deposedAt || now - arrived <= DEPOSED_WAIT_MS) return;
    this.#sim.violations.report(
      'live-write-behind-deposed',
      `${this.#host}: a write of ${keys.join(',')} (live) started ${now - arrived} ms after its batch arrived, as a write deposed ${now - landed.deposedAt} ms before landed`,
      `behind:${this.#host}:${keys.join(',')}`,
    );
  }
}
