import { LeaseLostError } from './LeaseLostError.js';

/**
 * A view or index write was rejected because it was read under a lease epoch lower than one the store has
 * already seen for that partition: another host owns the partition now (fencing). Nothing was written.
 * It is a `LeaseLostError`, so the feed closes the partition with reason `LeaseLost`.
 *
 * @example
 * ```ts
 * import { ViewFencedError } from 'rxfeed';
 * if (err instanceof ViewFencedError) console.warn(`deposed on ${err.leaseToken}: epoch ${err.epoch} < ${err.currentEpoch}`);
 * ```
 */
export class ViewFencedError extends LeaseLostError {
  constructor(
    partition: string,
    /** The epoch the rejected write carried. */
    readonly epoch: number,
    /** The highest epoch the store has seen for the partition. */
    readonly currentEpoch: number,
  ) {
    super(partition, `epoch ${epoch}`);
    this.message =
      `view write for partition ${partition} rejected: it was read under lease epoch ${epoch}, ` +
      `but the view has already seen epoch ${currentEpoch} (another host owns the partition now; if the lease ` +
      `container was reset instead, call clearPositions() on the view)`;
  }
}
