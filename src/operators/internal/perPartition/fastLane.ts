import type { Subscriber } from 'rxjs';
import { ChangeBatch, type BatchOrBatches } from '../../../core/ChangeBatch.js';
import { inBatchContext } from '../../../telemetry/inBatchContext.js';
import { DROPPED, type BatchProjection, type PendingProjection } from './types.js';

/**
 * The fast lane (synchronous projections only: a per-change map or filter): a lone batch arriving while no
 * value is pending (so none is in flight or waiting, and no earlier value can be overtaken) is projected here
 * and emitted at once, without units, jobs or queues. The telemetry context is entered only when the batch's
 * tracker has a span to activate; a batch whose ownership ended goes back to its reader unprojected. Returns
 * `true` when the batch is done with, or what its projection gave when that went asynchronous (a failure
 * being retried): the batch then takes the queues with it, so `project` is not called twice.
 */
export function fastLane<T, R>(
  batch: ChangeBatch<T>,
  project: BatchProjection<T, R>,
  signal: AbortSignal,
  subscriber: Subscriber<BatchOrBatches<R>>,
  keepValues: boolean,
): true | PendingProjection<R> {
  const origin = batch.origin;
  if (origin?.tracker.signal.aborted) {
    origin.tracker.drop(origin.sequence);
    return true;
  }
  let produced: ReturnType<BatchProjection<T, R>>;
  try {
    produced = origin?.tracker.activate ? inBatchContext(batch as ChangeBatch<unknown>, () => project(batch, signal)) : project(batch, signal);
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
}
