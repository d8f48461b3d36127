import type { ChangeBatch } from '../core/ChangeBatch.js';

/**
 * Runs `fn` with the OpenTelemetry span of `batch` active, so the spans of what `fn` calls (database
 * clients, HTTP) nest under the batch's `process` span. rxfeed's own operators and handlers do this already;
 * use it in an operator of your own that starts asynchronous work later than it receives the batch. Without
 * OpenTelemetry (or for a batch of no processor) it just calls `fn`.
 *
 * @example
 * ```ts
 * import { inBatchContext } from 'rxfeed';
 * feed.changes$.pipe(mergeMap((batch) => inBatchContext(batch, () => saveAll(batch)), 4), checkpointEvery(100));
 * ```
 */
export function inBatchContext<R>(batch: ChangeBatch<unknown> | undefined, fn: () => R): R {
  const origin = batch?.origin;
  return origin?.tracker.activate ? origin.tracker.activate(origin.sequence, fn) : fn();
}
