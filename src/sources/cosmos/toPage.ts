import type { ChangeFeedIteratorResponse } from '@azure/cosmos';
import type { Change } from '../../core/Change.js';
import type { FeedMode, Partition } from '../../core/Partition.js';
import { PartitionGoneError, TransientError } from '../../errors/index.js';
import { logger } from '../../internal/log.js';
import type { Page } from '../Source.js';
import { etagOfShape, lsnOfPosition, lsnOfSessionToken, parseToken, rangeIdOfSessionToken, tokenShape, type TokenShape } from './continuation.js';
import { allVersionsChange, latestVersionChange, type PartitionKeyPaths } from './mapChange.js';
import { whyGone } from './whyGone.js';

const log = logger('cosmos');

/**
 * What {@link toPage} remembers on the iterator that read a reply, so that the next reply of the same
 * iterator, when it is alike, is not parsed or checked again.
 *
 * @internal
 */
export interface ReplyMemo {
  /**
   * The last reply found to belong to this partition: its continuation token and the range that answered.
   * An idle partition answers the same again and again, so a reply equal to it needs no parsing or checks;
   * a busy one answers the same token with the next etag, read through `shape` (no parse, same checks).
   */
  checked: { readonly token: string; readonly answeredBy: string | undefined; readonly etag: string; readonly shape: TokenShape | undefined } | undefined;
  /** The last session token seen and the LSN read from it. */
  session: { readonly token: string; readonly lsn: number | undefined } | undefined;
}

/** A response header as text, `undefined` when missing. @internal */
export function headerText(headers: Record<string, unknown> | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return value === undefined || value === null ? undefined : String(value);
}

/**
 * The page of an SDK reply, after checking that it still belongs to `partition`: throws a
 * {@link PartitionGoneError} when the SDK now reads another range (the partition split or merged), and a
 * {@link TransientError} for a reply the caller should retry from a fresh iterator (a status other than
 * 200/304, or no etag). A reply with the same continuation token, from the same range, as the last one
 * checked for this iterator (an idle partition's every poll) passes the same checks, so they are not run
 * again; nor is a session token parsed twice.
 *
 * @param entry - what the iterator that read the reply remembers of its last one (updated here).
 * @param info - the container's partition key paths, for the changes' keys.
 * @param mode - the source's mode, which says how documents read as changes.
 * @param description - the source's name, for errors.
 * @internal
 */
export function toPage<T>(
  partition: Partition,
  response: ChangeFeedIteratorResponse<unknown>,
  entry: ReplyMemo,
  info: { readonly keyPaths: PartitionKeyPaths | undefined },
  mode: FeedMode,
  description: string,
): Page<T> {
  const status = response.statusCode;
  const headers = response.headers as Record<string, unknown>;
  if (status !== 200 && status !== 304) {
    // The SDK returns (not throws) a 410 that is not a split (e.g. 1008, partition migration) and then forgets
    // the range's position; the caller's position is still right, so this is a retry from a fresh iterator.
    throw new TransientError(`${description}: HTTP ${status} reading partition ${partition.id}`, { statusCode: status });
  }
  const sessionToken = headerText(headers, 'x-ms-session-token');
  const answeredBy = rangeIdOfSessionToken(sessionToken);
  const tokenText = response.continuationToken;
  const etag = knownEtag(entry, tokenText, answeredBy) ?? checkReply(partition, tokenText, answeredBy, status, entry, description);
  let latestLsn: number | undefined;
  if (sessionToken !== undefined && entry.session?.token === sessionToken) latestLsn = entry.session.lsn;
  else {
    latestLsn = lsnOfSessionToken(sessionToken);
    if (sessionToken !== undefined) entry.session = { token: sessionToken, lsn: latestLsn };
  }
  latestLsn ??= lsnOfPosition(headerText(headers, 'lsn'));
  const charge = response.requestCharge;
  const docs = status === 200 && Array.isArray(response.result) ? (response.result as unknown[]) : [];
  let changes: Change<T>[] = [];
  if (docs.length > 0) {
    const fallbackLsn = lsnOfPosition(etag) ?? 0;
    const keyPaths = info.keyPaths;
    changes =
      mode === 'allVersionsAndDeletes'
        ? docs.map((d) => allVersionsChange<T>(d, keyPaths, fallbackLsn))
        : docs.map((d) => latestVersionChange<T>(d, keyPaths, fallbackLsn));
  }
  // A reply carries both as a rule: one literal with every property, so pages keep one shape, whose map
  // this literal's site keeps alive (V8 drops optimized code whose maps were collected, e.g. between feeds).
  if (latestLsn !== undefined && Number.isFinite(charge)) return { changes, position: etag, latestLsn, requestCharge: charge };
  const page: { -readonly [K in keyof Page<T>]: Page<T>[K] } = { changes, position: etag };
  if (latestLsn !== undefined) page.latestLsn = latestLsn;
  if (Number.isFinite(charge)) page.requestCharge = charge;
  return page;
}

/**
 * The etag of a reply that the last checked one vouches for: the same token from the same range (an idle
 * partition's poll), or the same token with another etag (a busy partition's next page: same container,
 * same one range, so the same checks would pass). `undefined`: check it in full.
 */
function knownEtag(entry: ReplyMemo, tokenText: string | undefined, answeredBy: string | undefined): string | undefined {
  const checked = entry.checked;
  if (!checked || tokenText === undefined || checked.answeredBy !== answeredBy) return undefined;
  if (checked.token === tokenText) return checked.etag;
  const etag = checked.shape && etagOfShape(tokenText, checked.shape);
  if (!etag || etag === '*') return undefined;
  entry.checked = { token: tokenText, answeredBy, etag, shape: checked.shape };
  return etag;
}

/**
 * Checks that a reply's continuation token still covers exactly `partition` (else it split or merged, see
 * {@link whyGone}) and carries an etag, remembers it as checked on `entry`, and returns the etag.
 */
function checkReply(
  partition: Partition,
  tokenText: string | undefined,
  answeredBy: string | undefined,
  status: number,
  entry: ReplyMemo,
  description: string,
): string {
  const token = parseToken(tokenText);
  const entries = token?.Continuation ?? [];
  const gone = whyGone(partition, entries, answeredBy);
  if (gone !== undefined) {
    // The SDK followed a split or merge on its own and now reads the children: the partition is gone. The
    // page (from a child) is dropped; child leases start at this partition's last position and read it again.
    log(`[lease=${partition.id}] partition split or merged (${gone})`);
    throw new PartitionGoneError(partition.id);
  }
  const etag = entries[0]!.continuationToken;
  if (!etag || etag === '*') {
    // No etag: the SDK lost the position (a reply without one). Keep the caller's and rebuild next time.
    throw new TransientError(`${description}: reply without an etag for partition ${partition.id}`, { statusCode: status });
  }
  entry.checked = { token: tokenText!, answeredBy, etag, shape: tokenShape(tokenText!) };
  return etag;
}
