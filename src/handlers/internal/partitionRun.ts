import { catchError, concat, defer, EMPTY, finalize, ignoreElements, type MonoTypeOperatorFunction, type Observable, tap } from 'rxjs';
import type { ChangeBatch } from '../../core/ChangeBatch.js';
import type { FailurePolicy } from '../../failures/failurePolicy.js';
import type { PartitionFeed } from '../../feed/reader/readPartition.js';
import { eachBatchUnder } from '../../operators/eachBatch.js';
import type { ChangeHandlers } from '../types.js';
import type { HandlerCalls } from './handlerCalls.js';
import { OwnershipContext } from './OwnershipContext.js';

/** @internal What {@link partitionRunner} runs each ownership with. */
export interface PartitionRunOptions<T> {
  readonly owner: string;
  readonly handlers: ChangeHandlers<T>;
  readonly calls: HandlerCalls;
  /** What a failing `processChanges` call gets (retries, then halt, skip, dead-letter or throw). */
  readonly policy: FailurePolicy<T>;
  /** The ack point after each call that succeeded (see `checkpointerOf`). */
  readonly checkpointer: () => MonoTypeOperatorFunction<ChangeBatch<T>>;
  /** Whether an empty batch (an idle one, with `maxWaitTimeMs`) is handed to `processChanges`. */
  readonly callIdle: boolean;
  /** The context of each lease owned now, by lease token (kept up to date here). */
  readonly contexts: Map<string, OwnershipContext<T>>;
}

/**
 * @internal Runs one ownership of a lease through the handlers: `processInitialize`, then `processChanges` one
 * call at a time for each batch (checkpointed after it succeeded), then `processClose` with why it ended. A
 * failure of the partition's pipeline is reported, and the processor goes on.
 */
export function partitionRunner<T>(options: PartitionRunOptions<T>): (feed: PartitionFeed<T>) => Observable<never> {
  const { owner, handlers, calls, contexts } = options;
  return (feed) => {
    const context = new OwnershipContext<T>(feed, owner);
    contexts.set(feed.leaseToken, context);
    return concat(
      defer(() => calls.call('processInitialize', context, () => handlers.processInitialize?.(context))).pipe(ignoreElements()),
      feed.pipe(
        worker(context, options),
        tap((batch) => (context.last = batch)),
        options.checkpointer(),
        ignoreElements(),
        // A failure here is reported; the partition's feed ends and the processor goes on.
        catchError((error: unknown) => {
          void calls.reportError(error as Error, context);
          return EMPTY;
        }),
      ),
      defer(() => calls.call('processClose', context, () => handlers.processClose?.(context, feed.closeReason ?? 'Shutdown'))).pipe(ignoreElements()),
    ).pipe(
      finalize(() => {
        if (contexts.get(feed.leaseToken) === context) contexts.delete(feed.leaseToken);
      }),
    );
  };
}

/** The per-partition worker: one call at a time (this is one partition), failures to the policy. */
function worker<T>(context: OwnershipContext<T>, { handlers, policy, callIdle }: PartitionRunOptions<T>): MonoTypeOperatorFunction<ChangeBatch<T>> {
  return eachBatchUnder<ChangeBatch<T>>(
    async (batch) => {
      if (batch.isEmpty && !callIdle) return; // moved position only: nothing to call
      context.current = batch;
      try {
        await handlers.processChanges(batch.changes, context);
      } finally {
        context.current = undefined;
      }
    },
    1,
    policy,
  );
}
