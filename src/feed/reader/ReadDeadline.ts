import type { SchedulerLike, Subscription } from 'rxjs';
import { TransientError } from '../../errors/index.js';
import { AnnouncedAbortController, onAbort } from '../../internal/abortWatch.js';

/**
 * Gives every read of one partition reader a deadline `timeoutMs` after it starts: a read still unanswered
 * then (a hung connection) is aborted and fails with a {@link TransientError}, whether or not the source
 * honours the abort. Aborting `outer` aborts the read in flight.
 *
 * Cheap per read, as most reads of an idle partition are: one timer for the reader instead of one per read
 * (armed at the deadline of the read in flight and, when it fires, re-armed for the deadline of the read in
 * flight then, if any), and one abort controller until a read times out (not one per read), whose signal the
 * source watches per read without adding an 'abort' listener to it (an {@link AnnouncedAbortController}). Each read
 * still gets its exact deadline: reads start one after another, so the timer is never due later than the
 * deadline of the read in flight.
 *
 * @internal
 */
export class ReadDeadline {
  #controller!: AnnouncedAbortController;
  /** Ends the watch of `outer` for the current controller. */
  #stopWatchingOuter: (() => void) | undefined;
  #timer: Subscription | undefined;
  /** Start time of the read in flight; `undefined` between reads. */
  #startedAt: number | undefined;
  /** Settle the promise of the read in flight. */
  #resolve: ((value: unknown) => void) | undefined;
  #fail: ((error: unknown) => void) | undefined;
  /** The read `run` starts next, for {@link #start}. */
  #read: ((signal: AbortSignal) => Promise<unknown>) | undefined;
  /**
   * What the read in flight's answer settles, one pair for all reads (no closures per read): made again when a
   * read times out, so that read's late answer settles nothing (reads run one after another, so any other
   * answer is the read in flight's).
   */
  #answered!: (value: unknown) => void;
  #failed!: (error: unknown) => void;
  #describe = '';

  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly timeoutMs: number,
    private readonly outer: AbortSignal,
  ) {
    this.#renew();
    this.#settlers();
  }

  /**
   * Runs `read` with a signal aborted at the deadline (or when `outer` aborts); rejects with a
   * {@link TransientError} at the deadline. `what` names the read in that error (e.g. `partition 0`).
   */
  run<R>(read: (signal: AbortSignal) => Promise<R>, what: string): Promise<R> {
    if (this.#controller.signal.aborted && !this.outer.aborted) this.#renew();
    const startedAt = this.scheduler.now();
    this.#startedAt = startedAt;
    this.#describe = what;
    this.#arm(startedAt + this.timeoutMs);
    this.#read = read;
    return new Promise<R>(this.#start as (resolve: (value: R) => void, reject: (error: unknown) => void) => void);
  }

  /** The executor of a read's promise: starts the read `run` was given. */
  readonly #start = (resolve: (value: unknown) => void, reject: (error: unknown) => void): void => {
    this.#resolve = resolve;
    this.#fail = reject;
    const read = this.#read!;
    this.#read = undefined;
    read(this.#controller.signal).then(this.#answered, this.#failed);
  };

  #settlers(): void {
    const answered = (value: unknown): void => {
      if (this.#answered !== answered) return;
      const resolve = this.#resolve;
      this.#done();
      resolve?.(value);
    };
    const failed = (error: unknown): void => {
      if (this.#failed !== failed) return;
      const reject = this.#fail;
      this.#done();
      reject?.(error);
    };
    this.#answered = answered;
    this.#failed = failed;
  }

  #done(): void {
    this.#startedAt = undefined;
    this.#resolve = undefined;
    this.#fail = undefined;
  }

  /** Cancels the timer and forgets `outer` (the reader is done). */
  dispose(): void {
    this.#timer?.unsubscribe();
    this.#timer = undefined;
    this.#stopWatchingOuter?.();
    this.#stopWatchingOuter = undefined;
  }

  #renew(): void {
    this.#stopWatchingOuter?.();
    const controller = new AnnouncedAbortController();
    this.#controller = controller;
    if (this.outer.aborted) controller.abort(this.outer.reason);
    else this.#stopWatchingOuter = onAbort(this.outer, () => controller.abort(this.outer.reason));
  }

  #arm(due: number): void {
    // Armed already: for the deadline of an earlier read, which is no later than `due`.
    if (this.#timer) return;
    this.#timer = this.scheduler.schedule(() => this.#fire(), Math.max(0, due - this.scheduler.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    const startedAt = this.#startedAt;
    if (startedAt === undefined) return;
    const due = startedAt + this.timeoutMs;
    if (this.scheduler.now() < due) return this.#arm(due);
    const error = new TransientError(`read of ${this.#describe} did not answer within ${this.timeoutMs} ms`);
    const fail = this.#fail;
    this.#done();
    // The timed-out read's answer, if it ever comes, must not settle the next read's promise.
    this.#settlers();
    this.#controller.abort(error);
    fail?.(error);
  }
}
