import type { SchedulerLike } from 'rxjs';
import { hashString } from '../../internal/random.js';
import { sleep } from '../../internal/wait.js';

/** What a full page waits for before the next read: nothing. */
const NO_WAIT: Promise<void> = Promise.resolve();

/** A backed-off wait is shortened by up to this share, differently for each partition. */
const BACKOFF_JITTER = 0.25;

/** @internal The timings a {@link PollSchedule} follows, in ms. */
export interface PollTimings {
  readonly pollIntervalMs: number;
  /** Longest wait after reads that found nothing (they double from `pollIntervalMs`); default `pollIntervalMs`. */
  readonly idlePollIntervalMs?: number;
  /** Emit an empty batch after this long with nothing emitted; `undefined` = never. */
  readonly maxWaitTimeMs?: number;
}

/**
 * When a partition reader reads next, and when a quiet partition gets an idle batch.
 *
 * Adaptive polling: a full page is followed by another read at once; a partial page by `pollIntervalMs`;
 * an empty one by a wait that doubles with every empty read in a row, up to `idlePollIntervalMs`, and is back
 * to `pollIntervalMs` once a read finds changes. Each partition shortens its doubled waits by its own share
 * (0–25%, from a hash of its id; never below `pollIntervalMs`): partitions that fell quiet together (a host
 * starts all its readers at once) would otherwise poll together, in one burst of requests per
 * `idlePollIntervalMs`; with periods of their own their polls spread over the interval. While it waits,
 * `idle()` is called whenever `maxWaitTimeMs` passed with nothing emitted (time-driven work downstream runs
 * on quiet partitions too).
 *
 * @internal
 */
export class PollSchedule {
  readonly #idlePollMs: number;
  /** How much shorter than nominal this partition's doubled waits are (a share of them). */
  readonly #jitter: number;
  #emptyWaitMs: number;
  #lastEmitAt: number;

  /** @param partitionId - the partition polled: its doubled waits are shortened by a share of their own. */
  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly timings: PollTimings,
    partitionId: string,
  ) {
    this.#idlePollMs = Math.max(timings.pollIntervalMs, timings.idlePollIntervalMs ?? timings.pollIntervalMs);
    this.#jitter = (BACKOFF_JITTER * hashString(partitionId)) / 2 ** 32;
    this.#emptyWaitMs = timings.pollIntervalMs;
    this.#lastEmitAt = scheduler.now();
  }

  /** A batch (of changes or idle) was emitted: the `maxWaitTimeMs` clock starts again. */
  emitted(): void {
    this.#lastEmitAt = this.scheduler.now();
  }

  /**
   * Waits as the page just read (`count` changes of `credit` asked for) calls for; `idle` emits an idle batch.
   * Without idle batches the wait is the timer's own promise (no promise of its own per poll).
   */
  afterRead(count: number, credit: number, signal: AbortSignal, idle: (() => void) | undefined): Promise<void> {
    if (count > 0) {
      this.#emptyWaitMs = this.timings.pollIntervalMs;
      return count < credit ? this.#wait(this.timings.pollIntervalMs, signal, idle) : NO_WAIT;
    }
    const ms = this.#emptyWaitMs;
    this.#emptyWaitMs = Math.min(this.#idlePollMs, Math.max(1, ms * 2));
    const pollMs = this.timings.pollIntervalMs;
    return this.#wait(ms > pollMs ? Math.max(pollMs, Math.round(ms * (1 - this.#jitter))) : ms, signal, idle);
  }

  #wait(ms: number, signal: AbortSignal, idle: (() => void) | undefined): Promise<void> {
    return idle && this.timings.maxWaitTimeMs !== undefined ? this.#waitEmittingIdle(ms, signal, idle) : sleep(ms, this.scheduler, signal);
  }

  async #waitEmittingIdle(ms: number, signal: AbortSignal, idle: () => void): Promise<void> {
    const idleMs = this.timings.maxWaitTimeMs;
    let left = ms;
    while (idleMs !== undefined && !signal.aborted) {
      const dueIn = Math.max(0, this.#lastEmitAt + idleMs - this.scheduler.now());
      if (dueIn > left) break;
      await sleep(dueIn, this.scheduler, signal);
      left -= dueIn;
      if (signal.aborted) return;
      idle();
    }
    await sleep(left, this.scheduler, signal);
  }
}
