/**
 * A Cosmos DB container without HTTP for the per-page benches (bench/pageOverhead.ts, bench/readPathCost.ts):
 * a real SDK `Container` whose change feed iterators answer at once from prepared replies (the shape
 * `@azure/cosmos` 4.x returns: result, continuation token, session token, charge), `pages` full pages of
 * `page` documents over `ranges` ranges, then "not modified".
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';

/** A document of the replies. */
export interface Doc {
  id: string;
  pk: string;
  total: number;
  _lsn: number;
  _ts: number;
}

const RID = 'benchRID=';

/** The prepared replies of `pages` pages of `page` documents over `ranges` ranges, and the container reading them. */
export function pageReplies(pages: number, page: number, rangeCount: number) {
  const perRange = Math.ceil(pages / rangeCount);
  /** Range `i` of `rangeCount`, as hex bounds of the effective partition key space. */
  const bound = (i: number): string =>
    i === 0 ? '' : i === rangeCount ? 'FF' : Math.floor((i * 255) / rangeCount).toString(16).padStart(2, '0').toUpperCase();
  const ranges = Array.from({ length: rangeCount }, (_, i) => ({ id: String(i), minInclusive: bound(i), maxExclusive: bound(i + 1), parents: [] as string[] }));

  /** The replies of range `r`: perRange full pages, then "not modified". Built once, read by both sides. */
  const replies = ranges.map((range, r) =>
    Array.from({ length: perRange }, (_, p) => {
      const lsn = (p + 1) * page;
      const result: Doc[] = Array.from({ length: page }, (_, j) => ({ id: `o${r}-${p}-${j}`, pk: `k${j}`, total: j % 100, _lsn: lsn - page + j + 1, _ts: 1_700_000_000 }));
      const token = JSON.stringify({ rid: RID, Continuation: [{ minInclusive: range.minInclusive, maxExclusive: range.maxExclusive, continuationToken: `"${lsn}"` }] });
      return { statusCode: 200, result, continuationToken: token, requestCharge: 2.5, headers: { 'x-ms-session-token': `${range.id}:-1#${lsn}`, etag: `"${lsn}"` } };
    }),
  );
  const end = (r: number) => {
    const lsn = perRange * page;
    const range = ranges[r]!;
    const token = JSON.stringify({ rid: RID, Continuation: [{ minInclusive: range.minInclusive, maxExclusive: range.maxExclusive, continuationToken: `"${lsn}"` }] });
    return { statusCode: 304, result: [], continuationToken: token, requestCharge: 1, headers: { 'x-ms-session-token': `${range.id}:-1#${lsn}`, etag: `"${lsn}"` } };
  };

  /** The range a continuation token (hand-built by CosmosSource, or the start of a range) names, and the page it continues after. */
  const startOf = (token: string): { r: number; page: number } => {
    const { Continuation } = JSON.parse(token) as { Continuation: { minInclusive: string; continuationToken: string }[] };
    const r = ranges.findIndex((x) => x.minInclusive === Continuation[0]!.minInclusive);
    const etag = Continuation[0]!.continuationToken;
    return { r, page: etag === '' ? 0 : Number(etag.replace(/"/g, '')) / page };
  };

  /** An iterator over range `r`'s replies from page `from`, answering at once (a resolved promise). */
  const iterator = (r: number, from: number) => {
    let next = from;
    return { hasMoreResults: true, readNext: async () => (next < perRange ? replies[r]![next++]! : end(r)) };
  };

  /** A real SDK Container (no request is ever sent) whose change feed, read and range listing answer from memory. */
  const fakeContainer = (): Container => {
    const client = new CosmosClient({ endpoint: 'http://127.0.0.1:1/', key: EMULATOR_KEY });
    const container = client.database('bench').container('orders');
    const items = container.items as unknown as Record<string, unknown>;
    items.getChangeFeedIterator = (options: { changeFeedStartFrom: { getCont?: () => string; continuationToken?: string } }) => {
      const from = options.changeFeedStartFrom as unknown as Record<string, unknown>;
      const token = (from.continuationToken ?? from.continuation) as string;
      const start = startOf(token);
      return iterator(start.r, start.page);
    };
    (container as unknown as Record<string, unknown>).read = async () => ({ resource: { id: 'orders', _rid: RID, partitionKey: { paths: ['/pk'] } }, headers: { date: new Date().toUTCString() } });
    (container as unknown as Record<string, unknown>).readPartitionKeyRanges = () => ({ fetchAll: async () => ({ resources: ranges }) });
    return container;
  };

  return { ranges, perRange, changes: perRange * rangeCount * page, iterator, fakeContainer };
}

/** The options both page benches give their feed over `pageReplies`' container (all but source, leases and telemetry). */
export function pageFeedOptions(page: number, rangeCount: number) {
  return {
    instanceName: 'bench',
    leasePrefix: 'bench.',
    startFrom: 'beginning' as const,
    maxItemCount: page,
    maxInFlightChanges: Math.max(10_000, page * rangeCount * 2),
    leaseAcquireIntervalMs: 200,
  };
}
