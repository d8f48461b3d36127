import { ChangeFeedStartFrom, CosmosClient, type CosmosClientOptions, type PluginConfig } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosEmulator } from '../../src/emulator/index.js';

// How often @azure/cosmos 4.9.3 reads /pkranges, through the real client. The SDK's test
// partitionKeyRangeCacheReuse.spec.ts ("fetches pkranges once and serves later cross-partition queries from
// cache") came with the SDK change that shares the routing map between queries, after 4.9.3 (released
// 2026-04-20): in 4.9.3 each client-side cross-partition query builds its own SmartRoutingMapProvider, and
// so its own empty PartitionKeyRangeCache. One read per query is the client's doing; the answers are not.

let emulator: CosmosEmulator;
let client: CosmosClient;
let pkrangeReads = 0;
/** Each /pkranges answer the client got, as JSON. */
const answers: string[] = [];

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ onWarning: () => {} });
  const plugins: PluginConfig[] = [
    {
      on: 'request',
      plugin: async (context, _diagnostics, next) => {
        const response = await next(context);
        if (context.resourceType === 'pkranges') {
          pkrangeReads++;
          answers.push(JSON.stringify(response.result));
        }
        return response;
      },
    },
  ];
  // `plugins` is a hidden client option; the SDK's own tests pass it the same way.
  client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key, plugins } as CosmosClientOptions);
});

afterAll(async () => {
  client.dispose();
  await emulator.stop();
});

describe('partition key range reads of @azure/cosmos 4.9.3', () => {
  it('one per client-side cross-partition query (forceQueryPlan), over answers that never change; none when the gateway runs the query', async () => {
    const { database } = await client.databases.createIfNotExists({ id: 'cache' });
    const { container } = await database.containers.createIfNotExists({ id: 'reuse', partitionKey: { paths: ['/pk'] } }, { offerThroughput: 12_000 });
    await Promise.all(Array.from({ length: 30 }, (_, i) => container.items.create({ id: `item-${i}`, pk: `pk-${i}` })));
    expect(emulator.partitionKeyRanges('cache', 'reuse')).toHaveLength(2);

    const before = pkrangeReads;
    for (let i = 0; i < 4; i++) {
      const { resources } = await container.items.query('SELECT * FROM c', { forceQueryPlan: true }).fetchAll();
      expect(resources).toHaveLength(30);
    }
    expect(pkrangeReads - before).toBe(4);
    expect(new Set(answers.slice(before)).size).toBe(1); // the same answer, byte for byte, each time

    const served = pkrangeReads;
    for (let i = 0; i < 3; i++) expect((await container.items.query('SELECT * FROM c').fetchAll()).resources).toHaveLength(30);
    expect(pkrangeReads).toBe(served);
  });

  it('one per client for change feed iterators, which use the client-wide cache', async () => {
    const { database } = await client.databases.createIfNotExists({ id: 'cache' });
    const { container } = await database.containers.createIfNotExists({ id: 'feeds', partitionKey: { paths: ['/pk'] } }, { offerThroughput: 12_000 });
    for (let i = 0; i < 10; i++) await container.items.create({ id: `item-${i}`, pk: `pk-${i}` });
    const before = pkrangeReads;
    for (let i = 0; i < 3; i++) {
      const feed = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
      expect((await feed.readNext()).result.length).toBeGreaterThan(0);
    }
    expect(pkrangeReads - before).toBe(1);
  });
});
