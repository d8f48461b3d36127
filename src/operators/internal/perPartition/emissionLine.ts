import type { Subscriber } from 'rxjs';
import { asBatches, ChangeBatch, type BatchOrBatches } from '../../../core/ChangeBatch.js';
import { DROPPED, type Unit } from './types.js';

/**
 * The emission line: every value received (a batch, or an array of batches as bufferTime gives), in arrival
 * order, until it goes out whole. A value goes out once the work of all its batches is done and no earlier
 * pending value shares a partition with it: that is what keeps each partition's order at the checkpoint,
 * while values of unrelated partitions overtake each other. A value some of whose batches left the pipeline
 * goes out without them (a lone batch not at all). Once the source is done and nothing is pending, the line
 * completes the subscriber.
 */
export class EmissionLine<T, R> {
  /** Received, not emitted yet, in arrival order. */
  private readonly units: Unit<T, R>[] = [];
  private readonly subscriber: Subscriber<BatchOrBatches<R>>;
  private readonly keepValues: boolean;
  private sourceDone = false;
  private flushing = false;

  constructor(subscriber: Subscriber<BatchOrBatches<R>>, keepValues: boolean) {
    this.subscriber = subscriber;
    this.keepValues = keepValues;
  }

  /** Nothing is pending: no value waits for its work, or behind another's. */
  get idle(): boolean {
    return this.units.length === 0;
  }

  /** Takes a value in at the back of the line; its batches' work is still to be scheduled. */
  add(value: BatchOrBatches<T>): Unit<T, R> {
    const batches = asBatches(value);
    const unit: Unit<T, R> = { value, batches, results: new Array(batches.length), remaining: batches.length, dropped: false };
    this.units.push(unit);
    return unit;
  }

  /** The source completed: the subscriber completes once every pending value went out. */
  end(): void {
    this.sourceDone = true;
    this.flush();
  }

  /** Emits every finished unit that no earlier pending unit shares a partition with. */
  flush(): void {
    if (this.flushing) return;
    this.flushing = true;
    const { units, subscriber } = this;
    try {
      // Repeat until a pass emits nothing: emitting can finish earlier units synchronously.
      let progressed = true;
      while (progressed && !subscriber.closed) {
        progressed = false;
        const blocked = new Set<string>();
        let i = 0;
        while (i < units.length && !subscriber.closed) {
          const unit = units[i] as Unit<T, R>;
          if (unit.remaining === 0 && unit.batches.every((b) => !blocked.has(b.partition))) {
            units.splice(i, 1);
            this.emit(unit);
            progressed = true;
          } else {
            for (const b of unit.batches) blocked.add(b.partition);
            i++;
          }
        }
      }
      if (this.sourceDone && units.length === 0 && !subscriber.closed) subscriber.complete();
    } finally {
      this.flushing = false;
    }
  }

  /** Forgets every pending value (the subscriber unsubscribed). */
  clear(): void {
    this.units.length = 0;
  }

  private emit(unit: Unit<T, R>): void {
    const { subscriber, keepValues } = this;
    if (unit.dropped) {
      // Some batches left the pipeline: a lone batch is not emitted, an array goes on without them.
      if (unit.value instanceof ChangeBatch) return;
      const kept = unit.results.flatMap((r, i) => (r === DROPPED ? [] : [keepValues ? (unit.batches[i] as unknown as ChangeBatch<R>) : (r as ChangeBatch<R>)]));
      subscriber.next(kept);
      return;
    }
    if (keepValues) {
      subscriber.next(unit.value as unknown as BatchOrBatches<R>);
    } else {
      const results = unit.results as ChangeBatch<R>[];
      subscriber.next(unit.value instanceof ChangeBatch ? (results[0] as ChangeBatch<R>) : results);
    }
  }
}
