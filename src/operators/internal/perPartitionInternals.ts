import { concat, defer, ignoreElements, Observable, of, type OperatorFunction } from 'rxjs';
import { ChangeBatch, type BatchOrBatches } from '../../core/ChangeBatch.js';
import { InvalidOptionsError } from '../../errors/index.js';
import type { AnyBatches, DocumentOf } from '../types.js';
import { EmissionLine } from './perPartition/emissionLine.js';
import { fastLane } from './perPartition/fastLane.js';
import { PartitionScheduler } from './perPartition/partitionScheduler.js';
import type { BatchProjection, BatchWork, PendingProjection } from './perPartition/types.js';

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
 *
 * The parts, in perPartition/: the emission line (emissionLine.ts), the scheduler across partitions with its
 * per-partition queues (partitionScheduler.ts), the work of one batch with its telemetry context and drop of
 * batches whose ownership ended (batchWork.ts), and the fast lane of synchronous projections (fastLane.ts).
 * mapPerPartition wires them to the source and the subscriber.
 */

export { DROPPED, type BatchProjection, type BatchWork } from './perPartition/types.js';

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
      const abort = new AbortController();
      const line = new EmissionLine<T, R>(subscriber, keepValues);
      const scheduler = new PartitionScheduler<T, R>(concurrency, project, abort.signal, subscriber, line);
      const upstream = source.subscribe({
        next: (value) => {
          let projected: PendingProjection<R> | undefined;
          if (synchronous && line.idle && value instanceof ChangeBatch) {
            const lane = fastLane(value, project, abort.signal, subscriber, keepValues);
            if (lane === true) return;
            projected = lane;
          }
          const unit = line.add(value);
          scheduler.enqueue(unit);
          if (unit.batches.length === 0) line.flush();
          // The fast lane's batch went asynchronous: it runs now, with what its projection already gave.
          if (projected !== undefined) scheduler.startAlone({ unit, index: 0 }, projected);
          else scheduler.pump();
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => line.end(),
      });
      return () => {
        upstream.unsubscribe();
        abort.abort();
        scheduler.stop();
        line.clear();
      };
    });
}
