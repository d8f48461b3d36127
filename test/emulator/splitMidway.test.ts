import { ChangeFeedStartFrom, CosmosClient, StatusCodes, type Container } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosEmulator } from '../../src/emulator/index.js';

// A real split and a real merge of a container while an items.query and a change feed iterator of the
// unmodified @azure/cosmos client are part way through: both go on over the new ranges, and every document
// comes back exactly once.

const DB = 'midway';
let emulator: CosmosEmulator;
let client: CosmosClient;
let counter = 0;

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ onWarning: () => {} });
  client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
});

afterAll(async () => {
  client.dispose();
  await emulator.stop();
});

/** A container at 21,000 RU/s (three ranges, as the service gives) holding `n` documents. */
async function filled(n: number): Promise<Container> {
  const { database } = await client.databases.createIfNotExists({ id: DB });
  const { container } = await database.containers.createIfNotExists({ id: `c${++counter}`, partitionKey: { paths: ['/pk'] } }, { offerThroughput: 21_000 });
  for (let i = 0; i < n; i++) await container.items.create({ id: `d${i}`, pk: `p${i}` });
  return container;
}

function ids(n: number, from = 0): string[] {
  return Array.from({ length: n }, (_, i) => `d${from + i}`).sort();
}

function rangeIds(c: Container): string[] {
  return emulator.partitionKeyRanges(DB, c.id).map((r) => r.id);
}

describe('a split and a merge part way through', () => {
  it('items.query goes on over the children and the merged range: each document once', async () => {
    const c = await filled(60);
    expect(rangeIds(c)).toEqual(['0', '1', '2']);
    const query = c.items.query<{ id: string }>('SELECT * FROM c', { maxItemCount: 7 });
    const seen: string[] = [];
    const page = async (): Promise<void> => {
      seen.push(...(await query.fetchNext()).resources.map((d) => d.id));
    };
    await page();
    await page(); // 14 of range 0's 20 documents read: the continuation points inside range 0
    emulator.split(DB, c.id, '0');
    await page();
    await page(); // now inside range 1
    emulator.merge(DB, c.id, '4', '1');
    while (query.hasMoreResults()) await page();
    expect(rangeIds(c)).toEqual(['3', '5', '2']);
    expect(seen).toHaveLength(60);
    expect([...seen].sort()).toEqual(ids(60));
  });

  it('a change feed iterator goes on over the children and the merged range: each change once', async () => {
    const c = await filled(45);
    const feed = c.items.getChangeFeedIterator<{ id: string }>({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 4 });
    const seen: string[] = [];
    const read = async (pages: number): Promise<void> => {
      for (let i = 0; i < pages; i++) {
        const res = await feed.readNext();
        if (res.statusCode !== StatusCodes.NotModified) seen.push(...res.result.map((d) => d.id));
      }
    };
    /** Reads until the iterator has answered "nothing new" for every range (a 304 from its whole queue). */
    const drain = async (): Promise<void> => {
      for (let i = 0; i < 200; i++) {
        const res = await feed.readNext();
        if (res.statusCode === StatusCodes.NotModified) return;
        seen.push(...res.result.map((d) => d.id));
      }
      throw new Error('the change feed did not drain in 200 pages');
    };
    await read(3);
    emulator.split(DB, c.id, '0');
    await read(3);
    emulator.merge(DB, c.id, '4', '1');
    await drain();
    expect(rangeIds(c)).toEqual(['3', '5', '2']);
    expect([...seen].sort()).toEqual(ids(45));
    for (let i = 45; i < 55; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    await drain();
    expect(seen).toHaveLength(55);
    expect([...seen].sort()).toEqual(ids(55));
  });
});
