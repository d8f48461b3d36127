import { EMPTY, type Observable, type Subscription } from 'rxjs';
import type { FeedEvent } from '../../core/events.js';
import type { ChangeHandlers, PartitionContext } from '../types.js';
import type { HandlerCalls } from './handlerCalls.js';

/**
 * @internal Hands every `error` event to `processError`, with the context of the lease it names. Subscribes only
 * when there is a `processError`: with no listener at all, important events become process warnings.
 * `reported` holds the errors handed over (a fatal one is not handed twice).
 */
export function forwardErrorEvents<T>(
  events$: Observable<FeedEvent>,
  handlers: ChangeHandlers<T>,
  calls: HandlerCalls,
  contexts: ReadonlyMap<string, PartitionContext>,
): { readonly subscription: Subscription; readonly reported: WeakSet<Error> } {
  const reported = new WeakSet<Error>();
  const subscription = (handlers.processError ? events$ : EMPTY).subscribe((event) => {
    if (event.type !== 'error' || !handlers.processError) return;
    reported.add(event.error);
    const context = event.lease === undefined ? undefined : contexts.get(event.lease);
    void calls.reportError(event.error, context);
  });
  return { subscription, reported };
}
