import type { Logger } from '../../internal/log.js';
import type { ChangeHandlers, PartitionContext } from '../types.js';

/**
 * @internal Calls the user's handlers so that none of their failures escapes: a handler that throws or rejects
 * is logged and its error handed to `processError` (whose own failure is only logged).
 */
export interface HandlerCalls {
  /** Runs `fn` (the handler named `what`); resolves once it settled, whatever it did. */
  call(what: string, context: PartitionContext | undefined, fn: () => Promise<void> | void): Promise<void>;
  /** Hands an error to `processError`, if there is one. */
  reportError(error: Error, context: PartitionContext | undefined): Promise<void>;
}

/** @internal The {@link HandlerCalls} of one processor. */
export function handlerCalls<T>(handlers: ChangeHandlers<T>, log: Logger): HandlerCalls {
  const call = (what: string, context: PartitionContext | undefined, fn: () => Promise<void> | void): Promise<void> =>
    Promise.resolve()
      .then(fn)
      .catch((error: unknown) => {
        const err = error instanceof Error ? error : new Error(String(error));
        log('%s failed%s: %s', what, context ? ` for lease ${context.leaseToken}` : '', err.message);
        if (what !== 'processError') return reportError(err, context);
      });
  const reportError = (error: Error, context: PartitionContext | undefined): Promise<void> =>
    call('processError', context, () => handlers.processError?.(error, context));
  return { call, reportError };
}
