import type { SchedulerLike } from 'rxjs';
import type { Partition, Position, StartFrom } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import type { Source } from '../sources/Source.js';
import { isStartFrom } from './options.js';
import { ReadDeadline } from './reader/ReadDeadline.js';

/** A `startFrom` option: one start for every partition, or a function of the partition. */
export type StartOption = StartFrom | ((partition: Partition) => StartFrom);

/**
 * The start `option` gives `partition`, checked like the `startFrom` option (a function's answer is checked
 * when it is asked, and the source refuses a start it cannot read from).
 *
 * @internal
 */
export function startOf(option: StartOption, source: Source<unknown>, partition: Partition): StartFrom {
  if (typeof option !== 'function') return option;
  let start: unknown;
  try {
    start = option(partition);
  } catch (error) {
    throw new InvalidOptionsError('startFrom', `the startFrom function threw for partition ${partition.id}: ${(error as Error)?.message ?? String(error)}`);
  }
  if (!isStartFrom(start)) {
    throw new InvalidOptionsError('startFrom', `the startFrom function returned ${JSON.stringify(start)} for partition ${partition.id}; expected 'beginning', 'now', a valid Date or { position }`);
  }
  source.checkStart?.(start);
  return start;
}

/** How much faster or slower than real time this host's clock may run, at most, while the first answer is awaited (5%). */
const MAX_RATE_ERROR = 0.05;

/**
 * The source's time at the start of a run, reckoned without trusting this host's clock: the time the source
 * tells ({@link Source.currentTime}), less how long this host waited for that answer since the run started.
 * Only a duration is measured here (counted 5% long, for a clock that runs slow), so a host whose clock is
 * off (by any amount) pins the same start as one whose clock is right; a slow, failed or retried first
 * request does not move the start later either. A clock stepped forward during that wait makes the start
 * earlier (changes come twice); one stepped back can make it later by at most the wait.
 *
 * The question is asked when the run starts, and again at the next {@link RunStart.time} after a failure.
 *
 * @internal
 */
export class RunStart {
  /** This host's scheduler time when the run started: only durations are measured from it. */
  readonly #startedAt: number;
  #time: Promise<Date | undefined> | undefined;

  constructor(
    private readonly source: Source<unknown>,
    private readonly scheduler: SchedulerLike,
    /** Most an answer is waited for before it is given up (and asked again by the next pin). */
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal,
  ) {
    this.#startedAt = scheduler.now();
    // Asked at once: the sooner the source answers, the less the measured wait can be off.
    this.time().catch(() => undefined);
  }

  /** The source's time when the run started, `undefined` when the source cannot tell; rejects when it failed. */
  time(): Promise<Date | undefined> {
    this.#time ??= this.#ask().catch((error: unknown) => {
      this.#time = undefined;
      throw error;
    });
    return this.#time;
  }

  async #ask(): Promise<Date | undefined> {
    const ask = this.source.currentTime?.bind(this.source);
    if (!ask) return undefined;
    const deadline = new ReadDeadline(this.scheduler, this.timeoutMs, this.signal);
    try {
      const sourceTime = await deadline.run((signal) => ask(signal), "the source's current time");
      if (sourceTime === undefined) return undefined;
      // Counted long, so that a clock that runs slow errs towards an earlier start (changes twice), not a later one.
      const waited = Math.max(0, this.scheduler.now() - this.#startedAt) * (1 + MAX_RATE_ERROR);
      return new Date(sourceTime.getTime() - Math.ceil(waited));
    } finally {
      deadline.dispose();
    }
  }
}

/**
 * Whether `option` can give a partition `'now'` (so the source's time at the start of the run matters).
 *
 * @internal
 */
export function mayStartNow(option: StartOption): boolean {
  return option === 'now' || typeof option === 'function';
}

/**
 * Pins a start to a concrete position of `partition`, so that "now" (and a time) means the start of the run,
 * whenever the partition is first read: the position is stored in the lease when it is created.
 *
 * - `'beginning'` → `null` (the lease starts empty, the reader starts at the beginning);
 * - `{ position }` → that position;
 * - `'now'` → where the source can start from a time and tells its own ({@link RunStart}): the position
 *   before the first change made at or after the source's time when the run started (Cosmos DB tells and
 *   resolves times to the second, so a change made up to a second, and the wait, earlier may come along);
 *   otherwise (Cosmos DB's AllVersionsAndDeletes mode starts only from "now" or a position; a source that
 *   cannot tell its time) the partition's position at this call, made before the lease exists. Never this
 *   host's clock: it may be off.
 * - a `Date` → the position before the first change made at or after it, by the source's clock.
 *
 * A source without `positionAt` cannot pin: `null`, and the reader starts from `start` at its first read.
 *
 * @internal
 */
export async function pinStart(source: Source<unknown>, start: StartFrom, partition: Partition, runStart: RunStart | undefined): Promise<Position | null> {
  if (start === 'beginning') return null;
  if (typeof start === 'object' && !(start instanceof Date)) return start.position;
  if (!source.positionAt) return null;
  if (start !== 'now') return source.positionAt(partition, start);
  const startedAt = runStart && startsFromTimes(source) ? await runStart.time() : undefined;
  return source.positionAt(partition, startedAt ?? 'now');
}

/**
 * Whether `source` can start from a point in time (it has no `checkStart`, or that accepts one).
 *
 * @internal
 */
export function startsFromTimes(source: Source<unknown>): boolean {
  try {
    source.checkStart?.(new Date(0));
    return true;
  } catch {
    return false;
  }
}
