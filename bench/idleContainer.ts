/**
 * @summary A real SDK `Container` over `count` idle ranges, answered from memory (no request is ever sent): every
 * change feed read answers "not modified" at one LSN, as an idle range does; the bare loops over them and the options
 * of the idle feed read over them. For bench/idleOverhead.ts, bench/idleHeap.ts and bench/idleAlloc.ts.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { CosmosClient, type Container } from '@azure/cosmos';
import type { FeedEvent } from '../src/core/events.js';
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
  /**
   * Bare SDK loops, one per range (`readNext`, then a timer of `pollMs`), their first reads spread over one poll
   * interval; `onPoll` is told of each read. The returned function stops them and waits for their last waits.
   */
  const bareLoops = (pollMs: number, onPoll: () => void): (() => Promise<void>) => {
    let stopped = false;
    const loops = ranges.map(async (_, r) => {
      await delay((r * pollMs) / count);
      const it = iterator(r);
      while (!stopped) {
        onPoll();
        await it.readNext();
        await delay(pollMs);
      }
    });
    return async () => {
      stopped = true;
      await Promise.all(loops);
    };
  };
  return { ranges, iterator, container, bareLoops };
}

/** The idle feed's options but its source and lease store: every lease from the beginning, polled every `pollMs`. */
export function idleFeedOptions(pollMs: number, onAcquired: () => void) {
  return {
    instanceName: 'idle',
    leasePrefix: 'idle.',
    startFrom: 'beginning' as const,
    pollIntervalMs: pollMs,
    events: (e: FeedEvent) => {
      if (e.type === 'leaseAcquired') onAcquired();
    },
  };
}
