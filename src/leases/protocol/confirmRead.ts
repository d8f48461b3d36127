// Protocol: confirming a read of the lease store by a write. Reads may lag other hosts' writes; writes are never
// stale. See docs/lease-protocol.md.
import type { Lease, NewLease } from '../Lease.js';
import type { LeaseStore } from '../LeaseStore.js';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';

/** An etag no stored document has: a replace with it answers only whether the document exists (`missing` or `changed`). */
const NO_ETAG = 'rxfeed:absent';

/** How {@link confirmRead} writes where nothing was read, and reads again. */
export interface ConfirmReadOptions {
  /** The document whose replace, with an etag no document has, can only answer "missing" (made for each try). */
  readonly absent: () => NewLease;
  /** Reads the document again after a conflict. */
  readonly readAgain: () => Promise<Lease | undefined>;
  /** A read this accepts needs no confirmation: it is returned as read, and nothing is written. Default: none. */
  readonly settles?: (read: Lease) => boolean;
  /** How many writes to try before the conflict is thrown. Default 3. */
  readonly attempts?: number;
}

/**
 * Confirms `read` (a document as read, `undefined` for none) by a write that leaves no document behind: the
 * document replaced as read (conditional on its etag), or, where none was read, a replace of `absent()` with an
 * etag no document has, which can only answer "missing". A conflict means the read lagged: read again, at most
 * `attempts` writes in all, then the conflict is thrown.
 *
 * @returns the document as it stands: the replace's answer, or as read when `settles` accepted it, or
 * `undefined` when there is none.
 * @internal
 */
export async function confirmRead(store: LeaseStore, read: Lease | undefined, options: ConfirmReadOptions): Promise<Lease | undefined> {
  const { absent, readAgain, settles, attempts = 3 } = options;
  let stored = read;
  for (let attempt = 1; ; attempt++) {
    if (stored !== undefined && settles?.(stored)) return stored;
    try {
      if (stored) return await store.replace(stored);
      await store.replace({ ...absent(), etag: NO_ETAG });
    } catch (error) {
      if (!(error instanceof LeaseConflictError)) throw error;
      if (stored === undefined && error.kind === 'missing') return undefined;
      if (attempt >= attempts) throw error;
    }
    stored = await readAgain();
  }
}
