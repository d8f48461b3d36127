import { RxfeedError } from './RxfeedError.js';

/**
 * A document under the lease prefix is not a lease rxfeed can read (missing fields, wrong types). It is
 * reported on the events stream and skipped; nothing crashes and nothing overwrites it.
 *
 * @example
 * ```ts
 * import { CorruptLeaseError } from 'rxfeed';
 * if (e.error instanceof CorruptLeaseError) console.warn(`fix or delete lease document ${e.error.documentId}`);
 * ```
 */
export class CorruptLeaseError extends RxfeedError {
  constructor(
    /** The id of the offending document. */
    readonly documentId: string,
    /** What is wrong with it. */
    readonly problem: string,
  ) {
    super(`lease document ${documentId} is unreadable (${problem}); skipping it`);
  }
}
