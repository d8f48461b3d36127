import { RxfeedError } from './RxfeedError.js';

/**
 * A conditional lease write failed: the document changed since it was read (HTTP 412) or no longer
 * exists (404). Callers re-read and decide; the coordinator turns it into {@link LeaseLostError} when the
 * lease now belongs to someone else.
 *
 * @example
 * ```ts
 * import { LeaseConflictError } from 'rxfeed';
 * try { await store.replace(lease); } catch (e) { if (e instanceof LeaseConflictError) lease = await store.read(lease.id); }
 * ```
 */
export class LeaseConflictError extends RxfeedError {
  constructor(
    /** Document id of the lease. */
    readonly leaseId: string,
    /** `'changed'` (etag mismatch) or `'missing'` (deleted). */
    readonly kind: 'changed' | 'missing',
  ) {
    super(`lease ${leaseId} ${kind === 'changed' ? 'was changed by someone else' : 'does not exist'}`);
  }
}
