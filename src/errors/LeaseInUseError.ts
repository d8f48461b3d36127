import { RxfeedError } from './RxfeedError.js';

/**
 * A lease administration command (rewind, release, reset) refused to touch leases that a live host owns.
 * Stop that processor first, or pass `force`, which fences the owner (raises the lease epoch) so it can no
 * longer write an old position back.
 *
 * @example
 * ```ts
 * import { LeaseInUseError, rewindLeases } from 'rxfeed';
 * try { await rewindLeases({ leases, source, to: 'beginning' }); }
 * catch (e) { if (e instanceof LeaseInUseError) console.error(e.message); }
 * ```
 */
export class LeaseInUseError extends RxfeedError {
  constructor(
    /** The leases owned by a live host, as `{ leaseToken, owner }`. */
    readonly inUse: readonly { readonly leaseToken: string; readonly owner: string }[],
  ) {
    const list = inUse.map((l) => `${l.leaseToken} (owner ${l.owner})`).join(', ');
    super(`${inUse.length} lease(s) are owned by a live host: ${list}; stop the processor first or force (fences the owner)`);
  }
}
