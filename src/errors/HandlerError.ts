import type { Change } from '../core/Change.js';
import { RxfeedError } from './RxfeedError.js';

/**
 * User code failed on one change (an item failure, not a feed failure). Reported on the events stream with
 * the partition and the change, so it can be dead-lettered; the feed itself keeps running.
 *
 * @example
 * ```ts
 * import { HandlerError } from 'rxfeed';
 * events$.subscribe((e) => e.type === 'error' && e.error instanceof HandlerError && park(e.error.change));
 * ```
 */
export class HandlerError extends RxfeedError {
  constructor(
    /** Lease token of the partition the change came from. */
    readonly partition: string,
    /** The change the handler failed on (undefined when it failed on a whole batch). */
    readonly change: Change<unknown> | undefined,
    cause: unknown,
  ) {
    super(
      `handler failed on ${change ? `change ${change.id}@${change.lsn}` : 'a batch'} of partition ${partition}: ${
        cause instanceof Error ? cause.message : String(cause)
      }`,
      { cause },
    );
  }
}
