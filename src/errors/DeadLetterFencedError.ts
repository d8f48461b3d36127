import { LeaseLostError } from './LeaseLostError.js';

/**
 * A dead-letter write was refused because it carried a lease epoch lower than one the dead-letter store has
 * seen for an overlapping key range: another host (or a split child) owns the partition now. Nothing was
 * written. It is a `LeaseLostError`: the partition closes with reason `LeaseLost`.
 *
 * @example
 * ```ts
 * import { DeadLetterFencedError } from 'rxfeed';
 * if (err instanceof DeadLetterFencedError) console.warn(`deposed on ${err.leaseToken}`);
 * ```
 */
export class DeadLetterFencedError extends LeaseLostError {
  constructor(
    leaseToken: string,
    /** The epoch the refused write carried. */
    readonly epoch: number,
    /** The highest epoch the store has seen for an overlapping range. */
    readonly currentEpoch: number,
  ) {
    super(leaseToken, `epoch ${epoch}`);
    this.message = `dead-letter write for lease ${leaseToken} refused: epoch ${epoch} is ${epoch === currentEpoch ? 'not above' : 'below'} ${currentEpoch}, which the store has seen for this range (another host owns it now)`;
  }
}
