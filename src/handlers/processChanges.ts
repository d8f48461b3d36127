import { mergeMap, type Subscription } from 'rxjs';
import { resolveOnFailure } from '../failures/failurePolicy.js';
import { InvalidOptionsError } from '../errors/index.js';
import { createChangeFeed } from '../feed/createChangeFeed.js';
import { DEFAULTS } from '../feed/options.js';
import { logger } from '../internal/log.js';
import { checkpointerOf } from './internal/checkpointing.js';
import { forwardErrorEvents } from './internal/errorEvents.js';
import { handlerCalls } from './internal/handlerCalls.js';
import type { OwnershipContext } from './internal/OwnershipContext.js';
import { partitionRunner } from './internal/partitionRun.js';
import type { ChangeHandlers, ChangeProcessorHandle, ProcessChangesOptions } from './types.js';

/**
 * Runs a change feed processor that calls your handlers per partition: the shape of the .NET / Java change
 * feed processor and of Event Hubs' `subscribe`, as a thin layer over {@link partitionFeeds} and the Rx
 * operators, with the same guarantees and read-credit budget.
 *
 * In short: one `processChanges` call at a time per partition, partitions in parallel, checkpoints after
 * calls that succeeded, failing calls retried then dead-lettered (or halting their partition).
 *
 * @example
 * ```ts
 * import { processChanges, MemoryDeadLetterStore } from 'rxfeed';
 * const processor = processChanges<Order>(
 *   { source, leases, instanceName: 'host-1', onFailure: { retry: { attempts: 5 }, deadLetter: new MemoryDeadLetterStore() } },
 *   { processChanges: async (changes, ctx) => { await ship(changes, { signal: ctx.signal }); } },
 * );
 * process.on('SIGTERM', () => void processor.close());
 * ```
 *
 * @param options The feed's options ({@link ChangeFeedOptions}) plus `checkpoint` (default
 *   `{ count: 1000, ms: 5000 }`) and `onFailure` (default `'halt'`).
 * @param handlers `processChanges` (required), `processInitialize`, `processClose`, `processError`.
 * @returns A handle whose `close()` resolves after the last checkpoint.
 * @see {@link changeFeed} for the Rx form.
 */
export function processChanges<T>(options: ProcessChangesOptions<T>, handlers: ChangeHandlers<T>): ChangeProcessorHandle {
  checkHandlers(handlers);
  // Validates onFailure (default 'halt') now; backoff waits run on the feed's scheduler unless it names one.
  const policy = resolveOnFailure<T>(options, options?.scheduler);
  const { checkpoint = DEFAULTS.checkpoint, onFailure: _onFailure, ...feedOptions } = options ?? ({} as ProcessChangesOptions<T>);
  const checkpointer = checkpointerOf<T>(checkpoint, feedOptions.scheduler);

  const processor = createChangeFeed<T>(feedOptions);
  const log = logger('handlers', { owner: processor.owner });
  const calls = handlerCalls(handlers, log);
  const contexts = new Map<string, OwnershipContext<T>>();
  const errors = forwardErrorEvents(processor.events$, handlers, calls, contexts);
  const runPartition = partitionRunner<T>({ owner: processor.owner, handlers, calls, policy, checkpointer, callIdle: feedOptions.maxWaitTimeMs !== undefined, contexts });

  let failure: Error | undefined;
  let subscription: Subscription | undefined;
  const finished = new Promise<void>((resolve) => {
    subscription = processor.partitions$.pipe(mergeMap(runPartition)).subscribe({
      complete: resolve,
      error: (error: unknown) => {
        failure = error instanceof Error ? error : new Error(String(error));
        log('stopped by %s', failure.message);
        if (!errors.reported.has(failure)) void calls.reportError(failure, undefined);
        resolve();
      },
    });
  });
  let closing: Promise<void> | undefined;
  return {
    owner: processor.owner,
    events$: processor.events$,
    get inFlightChanges() {
      return processor.inFlightChanges;
    },
    close: () =>
      (closing ??= (async () => {
        await processor.stop();
        await finished;
        subscription?.unsubscribe();
        errors.subscription.unsubscribe();
        if (failure) throw failure;
      })()),
  };
}

/** Throws `InvalidOptionsError` unless `processChanges` is a function, and each other handler one when given. */
function checkHandlers<T>(handlers: ChangeHandlers<T>): void {
  if (typeof handlers?.processChanges !== 'function') {
    throw new InvalidOptionsError('handlers', 'give an object with processChanges(changes, context) (and optionally processInitialize, processClose, processError)');
  }
  for (const name of ['processInitialize', 'processClose', 'processError'] as const) {
    if (handlers[name] !== undefined && typeof handlers[name] !== 'function') throw new InvalidOptionsError(`handlers.${name}`, 'must be a function when given');
  }
}
