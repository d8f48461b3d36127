import { changeFeedCharge } from '../charges.js';
import { ALL_VERSIONS_AND_DELETES, allVersionsItem, LATEST_VERSION, latestVersionItem, lsnEtag, parseStart, readChanges } from '../feedReader.js';
import { CosmosHttpError } from '../errors.js';
import { effectivePartitionKey } from '../hash.js';
import { header, maxItems, partitionKeyOf, type Headers, type Reply } from '../http.js';
import { inRange, partitionKeyMatcher, type ContainerState, type LogEntry, type RangeState } from '../store/Store.js';
import type { HandlerContext, RoutedRequest } from './context.js';

/** What the service answers to an AllVersionsAndDeletes read from the beginning or from a point in time. */
export const RETENTION_MESSAGE = 'You must read the change feed from within the retention period.';

/**
 * The range a change feed request reads and which of its entries it wants: the range id (plus EPK bounds
 * when the SDK reads a sub-range), or the partition key alone, routed to whichever live range holds it now.
 */
function scope(ctx: HandlerContext, c: ContainerState, h: Headers): { range: RangeState; accept: (e: LogEntry) => boolean } {
  const rangeId = header(h, 'x-ms-documentdb-partitionkeyrangeid');
  const pk = partitionKeyOf(h);
  let range: RangeState;
  if (rangeId !== undefined) range = ctx.store.range(c, rangeId);
  else if (pk !== undefined) {
    if (pk.length !== c.partitionKey.paths.length) {
      throw new CosmosHttpError(400, 'a partition-key change feed needs the full key; read a key prefix by feed range');
    }
    range = ctx.store.rangeOf(c, effectivePartitionKey(pk, c.partitionKey));
  } else if (c.ranges.length === 1) range = c.ranges[0]!;
  else throw new CosmosHttpError(400, 'a change feed request needs x-ms-documentdb-partitionkeyrangeid or x-ms-documentdb-partitionkey');
  const filters: ((e: LogEntry) => boolean)[] = [];
  const start = header(h, 'x-ms-start-epk');
  const end = header(h, 'x-ms-end-epk');
  if (start !== undefined || end !== undefined) {
    const [min, max] = [start ?? range.min, end ?? range.max];
    filters.push((e) => inRange(e.epk, min, max));
  }
  if (pk !== undefined) {
    const keyMatches = partitionKeyMatcher(pk);
    filters.push((e) => keyMatches(e.pk));
  }
  return { range, accept: filters.length === 0 ? () => true : (e) => filters.every((f) => f(e)) };
}

/**
 * `GET …/docs` with `A-IM`: one page of a range's change feed. Like the service, the answer names the range
 * that served it (`x-ms-documentdb-partitionkeyrangeid`) and the served copies carry `_lsn`.
 */
export function readChangeFeed(ctx: HandlerContext, req: RoutedRequest): Reply {
  const h = req.headers;
  const c = ctx.store.container(req.params['db']!, req.params['coll']!);
  ctx.store.expire(c);
  const mode = header(h, 'a-im');
  if (mode !== LATEST_VERSION && mode !== ALL_VERSIONS_AND_DELETES) {
    throw new CosmosHttpError(400, `A-IM must be "${LATEST_VERSION}" or "${ALL_VERSIONS_AND_DELETES}", not "${mode}"`);
  }
  const allVersions = mode === ALL_VERSIONS_AND_DELETES;
  const start = parseStart(header(h, 'if-none-match'), header(h, 'if-modified-since'));
  if (start === 'invalid') throw new CosmosHttpError(400, 'If-None-Match must be *, empty or an etag this emulator returned');
  if (allVersions && ctx.strictAllVersionsStart && (start.kind === 'beginning' || start.kind === 'time')) {
    throw new CosmosHttpError(400, RETENTION_MESSAGE);
  }
  const { range, accept } = scope(ctx, c, h);
  const page = readChanges(range, start, allVersions, maxItems(h, ctx.changeFeedPageSize), accept);
  const headers: Record<string, string> = {
    etag: lsnEtag(page.continuationLsn),
    lsn: String(range.lsn),
    'x-ms-session-token': `${range.id}:-1#${range.lsn}`,
    'x-ms-documentdb-partitionkeyrangeid': range.id,
  };
  if (page.entries.length === 0) return { status: 304, headers, charge: changeFeedCharge(0) };
  const docs = page.entries.map((e) => (allVersions ? allVersionsItem(e, c.partitionKey) : latestVersionItem(e)));
  headers['x-ms-item-count'] = String(docs.length);
  return { status: 200, body: { _rid: c.rid, Documents: docs, _count: docs.length }, headers, charge: changeFeedCharge };
}
