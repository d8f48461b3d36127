import type { Subscriber, Subscription } from 'rxjs';
import type { BatchOrBatches, ChangeBatch } from '../../../core/ChangeBatch.js';
import { runBatchWork } from './batchWork.js';
import type { EmissionLine } from './emissionLine.js';
import { DROPPED, type BatchProjection, type BatchResult, type Job, type PendingProjection, type Unit } from './types.js';

/** Marks a partition busy before its work starts, so work that finishes synchronously sees it. */
const EMPTY_SUBSCRIPTION: Subscription = { closed: true, unsubscribe: () => undefined } as Subscription;

/**
 * The scheduler across partitions: serial within a partition, concurrent across partitions, bounded. Each
 * partition has a FIFO of jobs (one batch of a pending value each) waiting for work; a partition with waiting
 * jobs and nothing running sits in a FIFO of ready partitions, and at most `concurrency` partitions run at
 * once. When a job's work finishes, its result goes into its value's unit, its partition goes to the back of
 * the ready line if it has more jobs (so a busy partition cannot starve the others), and the emission line is
 * flushed. A failing job errors the stream.
 */
export class PartitionScheduler<T, R> {
  /** Partition → its jobs not started yet. */
  private readonly waiting = new Map<string, Job<T, R>[]>();
  /** Partitions with waiting jobs and nothing running. */
  private readonly ready: string[] = [];
  /** Partition → its in-flight work. */
  private readonly running = new Map<string, Subscription>();
  private pumping = false;

  private readonly concurrency: number;
  private readonly project: BatchProjection<T, R>;
  private readonly signal: AbortSignal;
  private readonly subscriber: Subscriber<BatchOrBatches<R>>;
  private readonly line: EmissionLine<T, R>;
  private readonly fail: (error: unknown) => void;

  constructor(concurrency: number, project: BatchProjection<T, R>, signal: AbortSignal, subscriber: Subscriber<BatchOrBatches<R>>, line: EmissionLine<T, R>) {
    this.concurrency = concurrency;
    this.project = project;
    this.signal = signal;
    this.subscriber = subscriber;
    this.line = line;
    this.fail = (error) => subscriber.error(error);
  }

  /** Queues the work of each batch of `unit` behind its partition's earlier batches. */
  enqueue(unit: Unit<T, R>): void {
    unit.batches.forEach((batch, index) => {
      const queue = this.waiting.get(batch.partition);
      if (queue) {
        queue.push({ unit, index });
      } else {
        this.waiting.set(batch.partition, [{ unit, index }]);
        if (!this.running.has(batch.partition)) this.ready.push(batch.partition);
      }
    });
  }

  /** Starts the work of ready partitions, first come first served, while fewer than `concurrency` run. */
  pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    const { waiting, ready, running, subscriber } = this;
    try {
      while (running.size < this.concurrency && ready.length > 0 && !subscriber.closed) {
        const partition = ready.shift() as string;
        const queue = waiting.get(partition) as Job<T, R>[];
        const job = queue.shift() as Job<T, R>;
        if (queue.length === 0) waiting.delete(partition);
        this.start(partition, job);
      }
    } finally {
      this.pumping = false;
    }
  }

  /**
   * Runs the fast lane's batch now, the only job (nothing else was pending), with what its projection already
   * gave asynchronously.
   */
  startAlone(job: Job<T, R>, projected: PendingProjection<R>): void {
    const partition = (job.unit.batches[job.index] as ChangeBatch<T>).partition;
    this.ready.length = 0;
    this.waiting.delete(partition);
    this.start(partition, job, projected);
  }

  /** Stops all work in flight and forgets the waiting jobs (the subscriber unsubscribed). */
  stop(): void {
    for (const subscription of this.running.values()) subscription.unsubscribe();
    this.running.clear();
    this.waiting.clear();
  }

  private start(partition: string, job: Job<T, R>, projected?: PendingProjection<R>): void {
    this.running.set(partition, EMPTY_SUBSCRIPTION);
    let finished = false;
    const done = (result: BatchResult<R> | undefined): void => {
      finished = true;
      this.finish(partition, job, result);
    };
    const subscription = runBatchWork(job.unit.batches[job.index] as ChangeBatch<T>, this.project, this.signal, projected, done, this.fail);
    if (!subscription) return;
    // Work that finished synchronously has already cleaned up after itself.
    if (!finished && !subscription.closed) this.running.set(partition, subscription);
  }

  private finish(partition: string, job: Job<T, R>, result: BatchResult<R> | undefined): void {
    this.running.delete(partition);
    if (result === undefined) {
      this.subscriber.error(new Error(`rxfeed: work for a batch of partition ${partition} produced no batch`));
      return;
    }
    job.unit.results[job.index] = result;
    if (result === DROPPED) job.unit.dropped = true;
    job.unit.remaining--;
    if (this.waiting.has(partition)) this.ready.push(partition);
    this.line.flush();
    this.pump();
  }
}
