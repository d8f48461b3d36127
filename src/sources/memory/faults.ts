import { abortError, onAbort } from '../../internal/abortWatch.js';
import type { SchedulerLike } from 'rxjs';
import { InvalidOptionsError, TransientError } from '../../errors/index.js';

/**
 * A fault to inject into reads. `count` is how many reads it affects (default 1; `Infinity` for all);
 * `partition` limits it to one partition id (default: any).
 *
 * - `throttle`: the read fails with a 429 {@link TransientError} carrying `retryAfterMs`;
 * - `transient`: the read fails with a {@link TransientError} (default status 503);
 * - `latency`: the read is delayed by `ms` (abortable through the read's signal);
 * - `error`: the read fails with `error` (e.g. a `ResourceGoneError`, or any unknown error).
 */
export type MemoryFault =
  | { readonly kind: 'throttle'; readonly retryAfterMs: number; readonly count?: number; readonly partition?: string }
  | { readonly kind: 'transient'; readonly statusCode?: number; readonly count?: number; readonly partition?: string }
  | { readonly kind: 'latency'; readonly ms: number; readonly count?: number; readonly partition?: string }
  | { readonly kind: 'error'; readonly error: Error; readonly count?: number; readonly partition?: string };

/** The fault injector of a {@link MemorySource}. */
export interface MemoryFaults {
  /** Adds a fault; faults apply in the order added. */
  add(fault: MemoryFault): void;
  /** Removes every pending fault. */
  clear(): void;
  /** Number of faults still pending. */
  readonly pending: number;
}

/**
 * The faults pending for a {@link MemorySource}'s reads: `controls` is what the source shows as `faults`,
 * `apply` is what each read goes through before it touches the log.
 */
export class ReadFaults {
  /** Add, clear and count faults (the source's public `faults`). */
  readonly controls: MemoryFaults;

  readonly #scheduler: SchedulerLike;
  readonly #pending: { fault: MemoryFault; left: number }[] = [];

  /** @param scheduler - runs the delays of `latency` faults. */
  constructor(scheduler: SchedulerLike) {
    this.#scheduler = scheduler;
    const faults = this.#pending;
    this.controls = {
      add(fault: MemoryFault): void {
        const left = fault.count ?? 1;
        if (!(left > 0)) throw new InvalidOptionsError('count', 'a fault needs a positive count (or Infinity)');
        faults.push({ fault, left });
      },
      clear(): void {
        faults.length = 0;
      },
      get pending(): number {
        return faults.length;
      },
    };
  }

  /** Applies (and uses up one count of) the first fault that matches the partition: throws or delays. */
  async apply(partitionId: string, signal: AbortSignal | undefined): Promise<void> {
    const index = this.#pending.findIndex((f) => f.fault.partition === undefined || f.fault.partition === partitionId);
    if (index < 0) return;
    const slot = this.#pending[index]!;
    if (--slot.left <= 0) this.#pending.splice(index, 1);
    const fault = slot.fault;
    switch (fault.kind) {
      case 'throttle':
        throw new TransientError('request rate is too large (injected)', {
          statusCode: 429,
          retryAfterMs: fault.retryAfterMs,
        });
      case 'transient':
        throw new TransientError('service unavailable (injected)', { statusCode: fault.statusCode ?? 503 });
      case 'error':
        throw fault.error;
      case 'latency':
        await this.#delay(fault.ms, signal);
        if (signal?.aborted) throw abortError(signal);
    }
  }

  #delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      const stopWatching = signal
        ? onAbort(signal, () => {
            task.unsubscribe();
            reject(abortError(signal));
          })
        : undefined;
      const task = this.#scheduler.schedule(() => {
        stopWatching?.();
        resolve();
      }, ms);
    });
  }
}
