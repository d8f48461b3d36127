import { RxfeedError } from './RxfeedError.js';

/**
 * This host no longer owns the lease: it expired, another host took it, or it was deleted. A checkpoint or
 * renewal under it was rejected (fencing), and the partition feed closes with reason `LeaseLost`.
 *
 * @example
 * ```ts
 * import { LeaseLostError } from 'rxfeed';
 * if (err instanceof LeaseLostError) console.warn(`lost ${err.leaseToken} to ${err.currentOwner}`);
 * ```
 * @see {@link CloseReason}
 */
export class LeaseLostError extends RxfeedError {
  constructor(
    /** Lease token (partition id) of the lost lease. */
    readonly leaseToken: string,
    /** The owner this host expected to be. */
    readonly owner: string,
    /** The owner found in the store, when known (`null` = released, `undefined` = unknown/deleted). */
    readonly currentOwner?: string | null,
    options?: { cause?: unknown },
  ) {
    super(
      `lease ${leaseToken} is no longer owned by ${owner}` +
        (currentOwner === undefined ? '' : currentOwner === null ? ' (released)' : ` (now owned by ${currentOwner})`),
      options,
    );
  }
}
