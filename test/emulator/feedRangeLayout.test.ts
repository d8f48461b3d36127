import { ChangeFeedStartFrom, CosmosClient, PartitionKeyDefinitionVersion, StatusCodes, type Container } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosEmulator } from '../../src/emulator/index.js';

// How a new container's hash space is cut into feed ranges, seen through the client as the SDK's feed-range
// tests (changeFeedIterator.spec.ts, "test changefeed for feed range") see it: a V1 container on /name at
// 21,000 RU/s holding 10 documents for each of sample1..sample4. The service cuts V1 containers at multiples
// of floor(0xFFFFFFFF / n) (its published pkranges for 2 and 9 ranges); the SDK test's own EPK
// "05C1DFFFFFFFF8" is that cut for n = 4, its second boundary.

let emulator: CosmosEmulator;
let client: CosmosClient;

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ initialRangeCount: (_db, id) => (id === 'four' ? 4 : id === 'three' ? 3 : 1) });
  client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
});

afterAll(async () => {
  client.dispose();
  await emulator.stop();
});

async function samples(id: string): Promise<Container> {
  const { database } = await client.databases.createIfNotExists({ id: 'layout' });
  const { container } = await database.containers.createIfNotExists(
    { id, partitionKey: { paths: ['/name'], version: PartitionKeyDefinitionVersion.V1 } },
    { offerThroughput: 21_000 },
  );
  for (let key = 1; key <= 10; key++) for (const name of ['sample1', 'sample2', 'sample3', 'sample4']) await container.items.create({ name, key });
  return container;
}

/** The names in the first feed range, read from its beginning through the change feed. */
async function namesInFirstFeedRange(c: Container): Promise<Map<string, number>> {
  const [first] = await c.getFeedRanges();
  const feed = c.items.getChangeFeedIterator<{ name: string }>({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(first) });
  const names = new Map<string, number>();
  for (;;) {
    const page = await feed.readNext();
    if (page.statusCode === StatusCodes.NotModified) return names;
    for (const d of page.result) names.set(d.name, (names.get(d.name) ?? 0) + 1);
  }
}

describe('feed-range layout of a new V1 container', () => {
  it('with four ranges: the cuts of the service, the first holding sample3 alone, as the SDK test expects', async () => {
    const c = await samples('four');
    expect(emulator.partitionKeyRanges('layout', 'four').map((r) => r.maxExclusive)).toEqual(['05C1CFFFFFFFF8', '05C1DFFFFFFFF8', '05C1E7FFFFFFFA', 'FF']);
    expect(await namesInFirstFeedRange(c)).toEqual(new Map([['sample3', 10]]));
  });

  it('with three ranges (the emulator\'s count for 21,000 RU/s): thirds, the first holding sample2 and sample3', async () => {
    const c = await samples('three');
    expect(emulator.partitionKeyRanges('layout', 'three').map((r) => r.maxExclusive)).toEqual(['05C1D5AB55AB54', '05C1E5AB55AB54', 'FF']);
    expect(await namesInFirstFeedRange(c)).toEqual(new Map([['sample2', 10], ['sample3', 10]]));
  });
});
