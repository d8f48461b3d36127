import { asyncScheduler, type SchedulerLike, type Subscription } from 'rxjs';
import { InvalidOptionsError } from '../errors/index.js';
import { positiveMs } from '../options/validate.js';

/** Options of {@link stopOnSignals}. */
export interface StopOnSignalsOptions {
  /** Signals that stop the processor. Default `['SIGTERM', 'SIGINT']`. */
  readonly signals?: readonly NodeJS.Signals[];
  /**
   * Longest graceful stop, in ms: past it the process exits anyway. Keep it below the orchestrator's grace
   * period (Kubernetes: 30 s). Default `25000`.
   */
  readonly timeoutMs?: number;
  /**
   * What ends the process: called with 0 after a graceful stop, 1 when the stop failed or timed out, and
   * 128 + the signal number when a second signal comes during the stop. Default `process.exit`; give
   * `false` to leave the process running after the stop.
   */
  readonly exit?: ((code: number) => void) | false;
  /** Scheduler of the timeout. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGTERM: 15 };

/**
 * Makes SIGTERM and SIGINT stop a processor gracefully (drain, final checkpoints, leases released) within a
 * bound, then exit; a second signal exits at once. Returns a function that removes the handlers.
 *
 * @example
 * ```ts
 * import { createChangeFeed, stopOnSignals } from 'rxfeed';
 * const feed = createChangeFeed(options);
 * stopOnSignals(feed, { timeoutMs: 20_000 });
 * ```
 */
export function stopOnSignals(processor: { stop(): Promise<void> }, options: StopOnSignalsOptions = {}): () => void {
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  const timeoutMs = options.timeoutMs ?? 25_000;
  positiveMs('timeoutMs', timeoutMs);
  if (!Array.isArray(signals) || signals.length === 0) throw new InvalidOptionsError('signals', 'give at least one signal name, e.g. SIGTERM');
  const exit = options.exit === undefined ? (code: number) => process.exit(code) : options.exit;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      if (exit) exit(128 + (SIGNAL_NUMBERS[signal] ?? 0));
      return;
    }
    stopping = true;
    let timer: Subscription | undefined;
    const timedOut = new Promise<number>((resolve) => {
      timer = (options.scheduler ?? asyncScheduler).schedule(() => resolve(1), timeoutMs);
    });
    const stopped = processor.stop().then(
      () => 0,
      () => 1,
    );
    void Promise.race([stopped, timedOut]).then((code) => {
      timer?.unsubscribe();
      if (exit) exit(code);
    });
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}
