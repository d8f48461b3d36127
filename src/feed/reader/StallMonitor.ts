import type { SchedulerLike, Subscription } from 'rxjs';

/** @internal What a {@link StallMonitor} watches. */
export interface StallWatch {
  /** Batches read and not yet acknowledged or dropped. */
  pending(): number;
  /** When the oldest of them was read (scheduler time). */
  oldestReadAt(): number | undefined;
  /** When any partition of the processor last acknowledged or dropped a batch (scheduler time). */
  lastProgressAt(): number;
  /** The message of a stall that began at `since`. */
  describe(sinceMs: number): string;
  report(message: string): void;
}

/**
 * Notices a partition whose batches stop reaching the checkpoint: it has batches out, and for
 * `stallTimeoutMs` nothing at all (no partition of the processor) was acknowledged or dropped. That is what
 * a pipeline that loses batches (a plain `filter`, a `take`), a stuck sink, or a buffer that never fills
 * looks like. While other partitions keep reaching the checkpoint the pipeline is moving, and a slow
 * partition is not reported. Reports once per episode; progress re-arms it.
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
