// Role: what the roles of one coordinator share — who this host is, the store, the clocks, the timings, the
// leases it owns now, and the services the Coordinator wires in (events, failure counts, fatal errors,
// background work that `stop()` waits for).
import type { SchedulerLike, Subscription } from 'rxjs';
import type { FeedEvent } from '../../core/events.js';
import type { FeedRange, Partition } from '../../core/Partition.js';
import type { Logger } from '../../internal/log.js';
import { sleep } from '../../internal/wait.js';
import type { NewLease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import type { LeaseNaming } from '../protocol/documents.js';
import type { Timings } from '../protocol/timings.js';
import type { FailureCounter } from './FailureCounter.js';
import type { NameGuard } from './NameGuard.js';
import type { Observations } from './Observations.js';
import type { Ownership } from './Ownership.js';

/** @internal The state and services every role of one coordinator works with. */
export interface CoordinatorContext {
  readonly owner: string;
  readonly store: LeaseStore;
  readonly naming: LeaseNaming;
  readonly t: Timings;
  /**
   * Timers, and the monotonic clock of every decision (when a version or request was first seen, deadlines,
   * cooldowns): a step of the system time does not move it.
   */
  readonly scheduler: SchedulerLike;
  /** The wall clock of the timestamps written to leases (ms since the epoch); never a duration. */
  readonly now: () => number;
  readonly log: Logger;
  /** Leases this host owns, by document id. */
  readonly owned: Map<string, Ownership>;
  readonly partitions: PartitionList;
  readonly names: NameGuard;
  readonly observed: Observations;
  readonly failures: FailureCounter;
  readonly emit: (event: FeedEvent) => void;
  /** Whether `stop()` was called (or a fatal error ended the coordinator). */
  readonly stopped: () => boolean;
  /** Aborts when the coordinator stops. */
  readonly stopSignal: AbortSignal;
  /** Errors no retry can fix end the coordinator; returns whether `error` was one. */
  readonly fatal: (error: unknown) => boolean;
  /** Work `stop()` waits for (voluntary releases, split replacements, a bootstrap in flight). */
  readonly track: (work: Promise<unknown>) => void;
  /** Told as a write that would make a lease this host's is sent (`LeaseCoordinatorOptions.claiming`). */
  readonly claiming?: (lease: NewLease, partition: Partition) => (() => void) | void;
}

const FULL_RANGE: FeedRange = { minInclusive: '', maxExclusive: 'FF' };

/** @internal The partitions the source listed last, with their parents' ranges kept for the leases still on them. */
export class PartitionList {
  readonly #byId = new Map<string, Partition>();

  constructor(
    private readonly list: (signal?: AbortSignal) => Promise<readonly Partition[]>,
    private readonly signal: AbortSignal,
  ) {}

  async refresh(): Promise<readonly Partition[]> {
    const partitions = await this.list(this.signal);
    for (const p of partitions) this.#byId.set(p.id, p);
    return partitions;
  }

  /** The partition a lease covers: as listed, else the range the lease names, else the whole range. */
  of(leaseToken: string, range: FeedRange | undefined): Partition {
    return this.#byId.get(leaseToken) ?? { id: leaseToken, range: range ?? FULL_RANGE };
  }
}

/** @internal Work in flight that must settle before `stop()` resolves. */
export class Tasks {
  readonly #pending = new Set<Promise<unknown>>();

  track(work: Promise<unknown>): void {
    this.#pending.add(work);
    const forget = () => this.#pending.delete(work);
    work.then(forget, forget);
  }

  /** Resolves once nothing is in flight, including work started meanwhile. */
  async settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }
}

/** @internal Waits `ms` (scheduler time), or until `ctx` stops. */
export function delay(ctx: CoordinatorContext, ms: number): Promise<void> {
  return sleep(ms, ctx.scheduler, ctx.stopSignal);
}

/** @internal `work`, or a rejection with `message` (its `%d` replaced by `ms`) if it takes longer than `ms`. */
export function withTimeout(scheduler: SchedulerLike, work: Promise<void>, ms: number, message: string): Promise<void> {
  let timer: Subscription | undefined;
  const timeout = new Promise<void>((_, reject) => {
    timer = scheduler.schedule(() => reject(new Error(message.replace('%d', String(ms)))), ms);
  });
  return Promise.race([work, timeout]).finally(() => timer?.unsubscribe());
}
