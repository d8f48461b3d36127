import { Constants, CosmosClient, type CosmosClientOptions, type PluginConfig } from '@azure/cosmos';
import { afterEach, describe, expect, it } from 'vitest';
import { CosmosEmulator, type CosmosEmulatorOptions } from '../../src/emulator/index.js';

// The scenario of the SDK's own split test (split.spec.ts, "handles one split part way through iteration"):
// `SELECT * FROM root r`, maxItemCount 2, maxDegreeOfParallelism 1, a 25,100 RU/s container on /id holding 20
// documents, and one 410/1002 thrown by a client plugin the second time a request names the same range.

interface Seen {
  method: string;
  resource: string;
  rangeId: string | undefined;
  startEpk: string | undefined;
  continuation: string | undefined;
  outcome: string;
}

let emulator: CosmosEmulator | undefined;
let client: CosmosClient | undefined;

afterEach(async () => {
  client?.dispose();
  await emulator?.stop();
  client = undefined;
  emulator = undefined;
});

/** The container of the SDK test, and a client whose plugin injects the 410 and records what the client sent and got. */
async function splitTestClient(options: CosmosEmulatorOptions): Promise<{ seen: Seen[]; injected: () => boolean; client: CosmosClient }> {
  emulator = await CosmosEmulator.start({ onWarning: () => {}, ...options });
  const setup = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
  const { database } = await setup.databases.createIfNotExists({ id: 'sdk' });
  const { container } = await database.containers.createIfNotExists({ id: 'partitionSplits', partitionKey: { paths: ['/id'] } }, { offerThroughput: 25_100 });
  for (let i = 0; i < 20; i++) await container.items.create({ id: String(i) });
  setup.dispose();

  const seen: Seen[] = [];
  const ranges = new Set<string>();
  let hasSplit = false;
  const plugins: PluginConfig[] = [
    {
      on: 'request',
      plugin: async (context, _diagnostics, next) => {
        const h = context.headers ?? {};
        const rangeId = h[Constants.HttpHeaders.PartitionKeyRangeID] as string | undefined;
        const entry: Seen = {
          method: context.method,
          resource: context.resourceType ?? '',
          rangeId,
          startEpk: h[Constants.HttpHeaders.StartEpk] as string | undefined,
          continuation: h[Constants.HttpHeaders.Continuation] as string | undefined,
          outcome: '',
        };
        seen.push(entry);
        if (rangeId !== undefined && ranges.has(rangeId) && !hasSplit) {
          hasSplit = true;
          entry.outcome = 'injected 410/1002';
          throw Object.assign(new Error('Fake Partition Split'), { code: 410, substatus: 1002 });
        }
        if (rangeId !== undefined) ranges.add(rangeId);
        try {
          const response = await next(context);
          entry.outcome = `${String(response.headers[Constants.HttpHeaders.Continuation] ?? 'end')}`;
          return response;
        } catch (error) {
          entry.outcome = `error ${String((error as { code?: unknown }).code)}`;
          throw error;
        }
      },
    },
  ];
  // `plugins` is a hidden client option; the SDK's own tests pass it the same way.
  client = new CosmosClient({
    endpoint: emulator.endpoint,
    key: emulator.key,
    plugins,
    connectionPolicy: { enableBackgroundEndpointRefreshing: false },
  } as CosmosClientOptions);
  return { seen, injected: () => hasSplit, client };
}

describe("the SDK's split test", () => {
  it('passes: the query is served whole, as the service gateway serves it, so no request names a range', async () => {
    const { seen, injected, client } = await splitTestClient({});
    const { resources } = await client
      .database('sdk')
      .container('partitionSplits')
      .items.query<{ id: string }>('SELECT * FROM root r', { maxItemCount: 2, maxDegreeOfParallelism: 1 })
      .fetchAll();
    expect(resources.map((d) => d.id).sort()).toEqual(Array.from({ length: 20 }, (_, i) => String(i)).sort());
    const queries = seen.filter((s) => s.resource === 'docs' && s.method === 'POST');
    expect(queries.every((s) => s.rangeId === undefined)).toBe(true);
    expect(injected()).toBe(false);
    expect(emulator!.partitionKeyRanges('sdk', 'partitionSplits')).toHaveLength(3);
  });

  it('on the SDK\'s per-range path, @azure/cosmos 4.9.3 never acts on the 410: it finishes the range, then asks nothing and never ends', async () => {
    const { seen, injected, client } = await splitTestClient({ crossPartitionQueries: 'client' });
    const query = client
      .database('sdk')
      .container('partitionSplits')
      .items.query<{ id: string }>('SELECT * FROM root r', { maxItemCount: 2, maxDegreeOfParallelism: 1 });
    const got: string[] = [];
    // fetchAll() would loop here for ever without yielding to timers; fetchNext() lets the test count.
    for (let i = 0; i < 10; i++) got.push(...((await query.fetchNext()).resources ?? []).map((d) => d.id));
    expect(injected()).toBe(true);
    const requestsAfter10 = seen.length;
    for (let i = 0; i < 50; i++) got.push(...((await query.fetchNext()).resources ?? []).map((d) => d.id));
    expect(seen.length).toBe(requestsAfter10); // 50 more pages, not one request
    expect(query.hasMoreResults()).toBe(true);
    expect(got).toHaveLength(2); // only the page before the 410; what the range gave after it stays buffered behind it

    const ranged = seen.filter((s) => s.rangeId !== undefined);
    const at410 = ranged.findIndex((s) => s.outcome === 'injected 410/1002');
    // Before: range 0, first page. The 410 on its second page. After it: the same range id, the same
    // continuation, no EPK headers, no pkranges read; range 0 to its end and nothing else.
    expect(ranged.slice(0, at410 + 1).map((s) => [s.rangeId, s.continuation])).toEqual([
      ['0', undefined],
      ['0', ranged[1]!.continuation],
    ]);
    const after = ranged.slice(at410 + 1);
    expect(after[0]!.continuation).toBe(ranged[at410]!.continuation);
    expect(after.every((s) => s.rangeId === '0' && s.startEpk === undefined)).toBe(true);
    expect(after.at(-1)!.outcome).toBe('end');
    expect(seen.slice(seen.indexOf(ranged[at410]!)).some((s) => s.resource === 'pkranges')).toBe(false);
  });
});
