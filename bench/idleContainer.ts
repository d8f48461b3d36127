/**
 * @summary A real SDK `Container` over `count` idle ranges, answered from memory (no request is ever sent): every
 * change feed read answers "not modified" at one LSN, as an idle range does. For bench/idleOverhead.ts and
 * bench/idleHeap.ts.
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';

const RID = 'benchRID=';
const LSN = 42;

/** `count` idle ranges: their `container` and, for bare loops, the iterator of range `r`. */
export function idleRanges(count: number) {
  const bound = (i: number): string => (i === 0 ? '' : i === count ? 'FF' : Math.floor((i * 0xffff) / count).toString(16).padStart(4, '0').toUpperCase());
  const ranges = Array.from({ length: count }, (_, i) => ({ id: String(i), minInclusive: bound(i), maxExclusive: bound(i + 1), parents: [] as string[] }));
  /** The one reply of range `r` to every read: "not modified", as an idle range answers. */
  const idle = ranges.map((range) => ({
    statusCode: 304,
    result: [],
    continuationToken: JSON.stringify({ rid: RID, Continuation: [{ minInclusive: range.minInclusive, maxExclusive: range.maxExclusive, continuationToken: `"${LSN}"` }] }),
    requestCharge: 1,
    headers: { 'x-ms-session-token': `${range.id}:-1#${LSN}`, etag: `"${LSN}"` },
  }));
  const rangeOf = (token: string): number => {
    const { Continuation } = JSON.parse(token) as { Continuation: { minInclusive: string }[] };
    return ranges.findIndex((x) => x.minInclusive === Continuation[0]!.minInclusive);
  };
  const iterator = (r: number) => ({ hasMoreResults: true, readNext: async () => idle[r]! });
  /** A real SDK Container whose change feed, read and range listing answer from memory. */
  const container = (): Container => {
    const client = new CosmosClient({ endpoint: 'http://127.0.0.1:1/', key: EMULATOR_KEY });
    const c = client.database('bench').container('orders');
    (c.items as unknown as Record<string, unknown>).getChangeFeedIterator = (options: { changeFeedStartFrom: unknown }) => {
      const from = options.changeFeedStartFrom as Record<string, unknown>;
      return iterator(rangeOf((from.continuationToken ?? from.continuation) as string));
    };
    (c as unknown as Record<string, unknown>).read = async () => ({ resource: { id: 'orders', _rid: RID, partitionKey: { paths: ['/pk'] } }, headers: { date: new Date().toUTCString() } });
    (c as unknown as Record<string, unknown>).readPartitionKeyRanges = () => ({ fetchAll: async () => ({ resources: ranges }) });
    return c;
  };
  return { ranges, iterator, container };
}
