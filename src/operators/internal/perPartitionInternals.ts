import { concat, defer, from, ignoreElements, Observable, of, type ObservableInput, type OperatorFunction, type Subscription } from 'rxjs';
import { asBatches, ChangeBatch, type BatchOrBatches } from '../../core/ChangeBatch.js';
import { InvalidOptionsError } from '../../errors/index.js';
import type { AnyBatches, DocumentOf } from '../types.js';
import { inBatchContext } from '../../telemetry/inBatchContext.js';

/*
 * The machinery behind every rxfeed operator that does asynchronous work per batch (eachBatch, eachChange,
 * and the view/index sinks): serial within a partition, concurrent across partitions, bounded.
 *
 * Scheduling. Each partition has a FIFO of batches waiting for work. A partition with waiting batches and
 * nothing running sits in a FIFO of ready partitions; at most `concurrency` partitions run at once. When a
 * batch's work finishes, its partition goes to the back of the ready line if it has more batches, so a busy
 * partition cannot starve the others.
 *
 * Emission. Values (a batch, or an array of batches as bufferTime gives) are emitted whole, once the work of
 * all their batches is done, and never ahead of an earlier value that shares a partition with them: that is
 * what keeps the order of each partition's batches at the checkpoint. Values of unrelated partitions may
 * overtake each other; that is the point.
 *
 * Memory is bounded by the reader's credit: batches waiting here have not reached the checkpoint yet.
 */

/**
 * Work to run for one batch. Resolve (or complete) when the batch's work is done; `signal` aborts when the
 * subscriber unsubscribes, so promise-based work can stop early (Observables are simply unsubscribed).
 */
export type BatchWork<T> = (batch: ChangeBatch<T>, signal: AbortSignal) => ObservableInput<unknown> | void;

/**
 * What a projection yields for a batch that left the pipeline (handed back to its reader with
 * `tracker.drop` or `tracker.halt`): it is not emitted, alone or in its array.
 */
export const DROPPED: unique symbol = Symbol('rxfeed.dropped');

/**
 * Work that turns one batch into another (its last emitted value is the result), or {@link DROPPED}; work
 * done synchronously may return the result itself.
 */
export type BatchProjection<T, R> = (
  batch: ChangeBatch<T>,
  signal: AbortSignal,
) => ObservableInput<ChangeBatch<R> | typeof DROPPED> | ChangeBatch<R> | typeof DROPPED;

/** Checks a `concurrency` value: a positive integer or Infinity. */
export function checkConcurrency(concurrency: number, option = 'concurrency'): number {
  if (!(concurrency === Infinity || (Number.isInteger(concurrency) && concurrency > 0))) {
    throw new InvalidOptionsError(option, `must be a positive integer or Infinity (got ${String(concurrency)})`);
  }
  return concurrency;
}

/**
 * Runs `work` for every batch, one batch at a time per partition and up to `concurrency` partitions at once,
 * and re-emits each value it got (the same batch or array) once the work of all its batches is done, in
 * per-partition order. A failing `work` (rejected promise, erroring Observable, thrown error) errors the
 * stream; catch inside `work` to do otherwise.
 *
 * @example
 * ```ts
 * const write = perPartition((batch, signal) => view.write(batch.changes, { signal }), 4);
 * feed$.pipe(bufferTime(500), write, checkpointEvery(1000));
 * ```
 *
 * @param work The side effect for one batch.
 * @param concurrency How many partitions may have work in flight at once (positive integer or Infinity).
 */
export function perPartition<B extends AnyBatches>(
  work: BatchWork<DocumentOf<B>>,
  concurrency: number,
): OperatorFunction<B, B> {
  checkConcurrency(concurrency);
  const project = (batch: ChangeBatch<DocumentOf<B>>, signal: AbortSignal) =>
    concat(defer(() => work(batch, signal) ?? []).pipe(ignoreElements()), of(batch));
  return mapPerPartition(project, concurrency, true) as unknown as OperatorFunction<B, B>;
}

/**
 * Like {@link perPartition}, but the work of each batch yields the batch to emit in its place (its last
 * value). Arrays come out as new arrays holding the results in the same places.
 *
 * @param project Turns one batch into its replacement.
 * @param concurrency How many partitions may have work in flight at once (positive integer or Infinity).
 * @param keepValues Emit the values received instead of rebuilt ones (set by {@link perPartition}).
 * @param synchronous `project` does its work when called (a per-change map or filter), returning its batch
 *   then, or a promise only when something failed. A lone batch arriving while nothing is in flight or
 *   waiting is then projected and emitted at once, without queues: the fast lane of `mapChanges` and kin.
 */
export function mapPerPartition<T, R>(
  project: BatchProjection<T, R>,
  concurrency: number,
  keepValues = false,
  synchronous = false,
): OperatorFunction<BatchOrBatches<T>, BatchOrBatches<R>> {
  checkConcurrency(concurrency);
  return (source) =>
    new Observable<BatchOrBatches<R>>((subscriber) => {
      interface Unit {
        readonly value: BatchOrBatches<T>;
        readonly batches: readonly ChangeBatch<T>[];
        readonly results: (ChangeBatch<R> | typeof DROPPED | undefined)[];
        remaining: number;
        dropped: boolean;
      }
      interface Job {
        readonly unit: Unit;
        readonly index: number;
      }

      const waiting = new Map<string, Job[]>(); // partition → batches not started yet
      const ready: string[] = []; // partitions with waiting batches and nothing running
      const running = new Map<string, Subscription>(); // partition → its in-flight work
      const units: Unit[] = []; // received, not emitted yet, in arrival order
      const abort = new AbortController();
      let sourceDone = false;
      let pumping = false;
      let flushing = false;

      const emit = (unit: Unit): void => {
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
      };

      // Emits every finished unit that no earlier pending unit shares a partition with.
      const flush = (): void => {
        if (flushing) return;
        flushing = true;
        try {
          // Repeat until a pass emits nothing: emitting can finish earlier units synchronously.
          let progressed = true;
          while (progressed && !subscriber.closed) {
            progressed = false;
            const blocked = new Set<string>();
            let i = 0;
            while (i < units.length && !subscriber.closed) {
              const unit = units[i] as Unit;
              if (unit.remaining === 0 && unit.batches.every((b) => !blocked.has(b.partition))) {
                units.splice(i, 1);
                emit(unit);
                progressed = true;
              } else {
                for (const b of unit.batches) blocked.add(b.partition);
                i++;
              }
            }
          }
          if (sourceDone && units.length === 0 && !subscriber.closed) subscriber.complete();
        } finally {
          flushing = false;
        }
      };

      const start = (partition: string, job: Job, projected?: ObservableInput<ChangeBatch<R> | typeof DROPPED>): void => {
        const batch = job.unit.batches[job.index] as ChangeBatch<T>;
        let result: ChangeBatch<R> | typeof DROPPED | undefined;
        let finished = false;
        const done = (): void => {
          finished = true;
          running.delete(partition);
          if (result === undefined) {
            subscriber.error(new Error(`rxfeed: work for a batch of partition ${partition} produced no batch`));
            return;
          }
          job.unit.results[job.index] = result;
          if (result === DROPPED) job.unit.dropped = true;
          job.unit.remaining--;
          if (waiting.has(partition)) ready.push(partition);
          flush();
          pump();
        };
        // A batch whose ownership ended while it waited is not run: the next owner reads it again, so running
        // it here would only do its work twice. It goes back to its reader (credit returned, not checkpointed).
        const origin = batch.origin;
        if (projected === undefined && origin?.tracker.signal.aborted) {
          origin.tracker.drop(origin.sequence);
          result = DROPPED;
          return done();
        }
        // The user's work runs with the batch's telemetry span active (its own spans nest under it), from
        // the call through whatever it starts when subscribed.
        const start = (): Subscription | undefined => {
          let produced: ReturnType<BatchProjection<T, R>>;
          try {
            produced = projected ?? project(batch, abort.signal);
          } catch (error) {
            subscriber.error(error);
            return undefined;
          }
          // Synchronous work (a map, a filter) gives its batch directly: no Observable per batch.
          if (produced === DROPPED || produced instanceof ChangeBatch) {
            result = produced;
            done();
            return undefined;
          }
          // A promise (eachBatch's common case) is awaited without an Observable around it.
          if (produced instanceof Promise) {
            const handle = { closed: false, unsubscribe: () => void (handle.closed = true) };
            (produced as Promise<ChangeBatch<R> | typeof DROPPED>).then(
              (value) => {
                if (handle.closed) return;
                handle.closed = true;
                result = value;
                done();
              },
              (error: unknown) => {
                if (handle.closed) return;
                handle.closed = true;
                subscriber.error(error);
              },
            );
            return handle as unknown as Subscription;
          }
          return from(produced).subscribe({
            next: (value) => {
              result = value;
            },
            error: (error: unknown) => subscriber.error(error),
            complete: done,
          });
        };
        const subscription = inBatchContext(batch as ChangeBatch<unknown>, start);
        if (!subscription) return;
        // Work that finished synchronously has already cleaned up after itself.
        if (!finished && !subscription.closed) running.set(partition, subscription);
      };

      const pump = (): void => {
        if (pumping) return;
        pumping = true;
        try {
          while (running.size < concurrency && ready.length > 0 && !subscriber.closed) {
            const partition = ready.shift() as string;
            const queue = waiting.get(partition) as Job[];
            const job = queue.shift() as Job;
            if (queue.length === 0) waiting.delete(partition);
            // Marks the partition busy before starting, so work that finishes synchronously sees it.
            running.set(partition, EMPTY_SUBSCRIPTION);
            start(partition, job);
          }
        } finally {
          pumping = false;
        }
      };

      /**
       * The fast lane (synchronous projections only): a lone batch while no unit is pending (so none is in
       * flight or waiting, and no earlier value can be overtaken) is projected here and emitted at once.
       * Returns `true` when the batch is done with, or what its projection gave when that went asynchronous
       * (a failure being retried): the batch then takes the queues with it, so `project` is not called twice.
       */
      const fastLane = (batch: ChangeBatch<T>): true | ObservableInput<ChangeBatch<R> | typeof DROPPED> => {
        const origin = batch.origin;
        if (origin?.tracker.signal.aborted) {
          origin.tracker.drop(origin.sequence);
          return true;
        }
        let produced: ReturnType<BatchProjection<T, R>>;
        try {
          produced = origin?.tracker.activate ? inBatchContext(batch as ChangeBatch<unknown>, () => project(batch, abort.signal)) : project(batch, abort.signal);
        } catch (error) {
          subscriber.error(error);
          return true;
        }
        if (produced === DROPPED) return true;
        if (produced instanceof ChangeBatch) {
          subscriber.next(keepValues ? (batch as unknown as ChangeBatch<R>) : produced);
          return true;
        }
        return produced;
      };

      const upstream = source.subscribe({
        next: (value) => {
          let projected: ObservableInput<ChangeBatch<R> | typeof DROPPED> | undefined;
          if (synchronous && units.length === 0 && value instanceof ChangeBatch) {
            const lane = fastLane(value);
            if (lane === true) return;
            projected = lane;
          }
          const batches = asBatches(value);
          const unit: Unit = { value, batches, results: new Array(batches.length), remaining: batches.length, dropped: false };
          units.push(unit);
          batches.forEach((batch, index) => {
            const queue = waiting.get(batch.partition);
            if (queue) {
              queue.push({ unit, index });
            } else {
              waiting.set(batch.partition, [{ unit, index }]);
              if (!running.has(batch.partition)) ready.push(batch.partition);
            }
          });
          if (batches.length === 0) flush();
          if (projected !== undefined) {
            // The fast lane's batch went asynchronous: it runs now, with what its projection already gave.
            const partition = (value as ChangeBatch<T>).partition;
            ready.length = 0;
            waiting.delete(partition);
            running.set(partition, EMPTY_SUBSCRIPTION);
            start(partition, { unit, index: 0 }, projected);
            return;
          }
          pump();
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          sourceDone = true;
          flush();
        },
      });

      return () => {
        upstream.unsubscribe();
        abort.abort();
        for (const subscription of running.values()) subscription.unsubscribe();
        running.clear();
        waiting.clear();
        units.length = 0;
      };
    });
}

const EMPTY_SUBSCRIPTION: Subscription = { closed: true, unsubscribe: () => undefined } as Subscription;
