import { from, type Subscription } from 'rxjs';
import { ChangeBatch } from '../../../core/ChangeBatch.js';
import { inBatchContext } from '../../../telemetry/inBatchContext.js';
import { DROPPED, type BatchProjection, type BatchResult, type PendingProjection } from './types.js';

/**
 * Runs the work of one batch and reports its result: `done` with the result (`undefined` when the work gave
 * none), or `fail` with the error the work threw, rejected with or emitted. A batch whose ownership ended
 * while it waited is not run: the next owner reads it again, so running it here would only do its work twice;
 * it goes back to its reader (credit returned, not checkpointed) and its result is {@link DROPPED}. The
 * user's work runs with the batch's telemetry span active (its own spans nest under it), from the call
 * through whatever it starts when subscribed. Synchronous work (a map, a filter) gives its batch directly and
 * a promise (eachBatch's common case) is awaited as it is: neither costs an Observable per batch.
 *
 * `projected` is what the fast lane's call of `project` already gave, when that went asynchronous: it is
 * waited for instead of calling `project` again. Returns what to unsubscribe to stop the work, or
 * `undefined` when it already finished or failed.
 */
export function runBatchWork<T, R>(
  batch: ChangeBatch<T>,
  project: BatchProjection<T, R>,
  signal: AbortSignal,
  projected: PendingProjection<R> | undefined,
  done: (result: BatchResult<R> | undefined) => void,
  fail: (error: unknown) => void,
): Subscription | undefined {
  const origin = batch.origin;
  if (projected === undefined && origin?.tracker.signal.aborted) {
    origin.tracker.drop(origin.sequence);
    done(DROPPED);
    return undefined;
  }
  return inBatchContext(batch as ChangeBatch<unknown>, () => {
    let produced: ReturnType<BatchProjection<T, R>>;
    try {
      produced = projected ?? project(batch, signal);
    } catch (error) {
      fail(error);
      return undefined;
    }
    if (produced === DROPPED || produced instanceof ChangeBatch) {
      done(produced);
      return undefined;
    }
    if (produced instanceof Promise) return awaitPromise(produced as Promise<BatchResult<R>>, done, fail);
    let result: BatchResult<R> | undefined;
    return from(produced).subscribe({
      next: (value) => {
        result = value;
      },
      error: fail,
      complete: () => done(result),
    });
  });
}

/** Waits for a promise without an Observable around it; unsubscribing ignores how it settles. */
function awaitPromise<R>(promise: Promise<BatchResult<R>>, done: (result: BatchResult<R>) => void, fail: (error: unknown) => void): Subscription {
  const handle = { closed: false, unsubscribe: () => void (handle.closed = true) };
  promise.then(
    (value) => {
      if (handle.closed) return;
      handle.closed = true;
      done(value);
    },
    (error: unknown) => {
      if (handle.closed) return;
      handle.closed = true;
      fail(error);
    },
  );
  return handle as unknown as Subscription;
}
