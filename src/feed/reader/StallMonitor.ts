import type { SchedulerLike, Subscription } from 'rxjs';

/** @internal What a {@link StallMonitor} watches. */
export interface StallWatch {
  /** Batches read and not yet acknowledged or dropped. */
  pending(): number;
  /** When the oldest of them was read (scheduler time). */
  oldestReadAt(): number | undefined;
  /** When this partition last had a batch acknowledged or dropped (scheduler time). */
  lastProgressAt(): number;
  /** The message of a stall that began at `since`. */
  describe(sinceMs: number): string;
  report(message: string): void;
}

/**
 * Notices a partition whose batches stop reaching the checkpoint: it has batches out, and for
 * `stallTimeoutMs` none of its batches was acknowledged or dropped. That is what a pipeline that loses a
 * partition's batches (a plain `filter`, a `take`), a stuck sink, or a buffer that never fills looks like.
 * Measured per partition: other partitions reaching the checkpoint do not hide it (a pipeline that drops
 * only one partition's batches would otherwise stop reading it without a word). Reports once per episode;
 * progress re-arms it.
 *
 * @internal
 */
export class StallMonitor {
  #task: Subscription | undefined;
  #reported = false;
  #stopped = false;

  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly stallTimeoutMs: number,
    private readonly watch: StallWatch,
  ) {}

  /** True while a reported stall lasts (no progress since the report). */
  get reported(): boolean {
    return this.#reported;
  }

  /** A batch was read. */
  read(): void {
    this.#arm();
  }

  /** A batch was acknowledged or dropped. */
  progress(): void {
    this.#reported = false;
    this.#task?.unsubscribe();
    this.#task = undefined;
    this.#arm();
  }

  stop(): void {
    this.#stopped = true;
    this.#task?.unsubscribe();
    this.#task = undefined;
  }

  #since(): number | undefined {
    const oldest = this.watch.oldestReadAt();
    return oldest === undefined ? undefined : Math.max(oldest, this.watch.lastProgressAt());
  }

  #arm(): void {
    if (this.#stopped || this.#task || this.#reported) return;
    const since = this.#since();
    if (since === undefined) return;
    const dueIn = Math.max(0, since + this.stallTimeoutMs - this.scheduler.now());
    this.#task = this.scheduler.schedule(() => {
      this.#task = undefined;
      const now = this.scheduler.now();
      const start = this.#since();
      if (start === undefined || this.#stopped) return;
      if (now - start < this.stallTimeoutMs) return this.#arm();
      this.#reported = true;
      this.watch.report(this.watch.describe(start));
    }, dueIn);
  }
}
