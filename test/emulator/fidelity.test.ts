import { ChangeFeedMode, ChangeFeedStartFrom, CosmosClient, type Container, type ItemDefinition } from '@azure/cosmos';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { CosmosEmulator } from '../../src/emulator/index.js';
import { leaseStoreConformance } from '../support/leaseStoreConformance.js';

// The differences from the service that the SDK's own change-feed tests could tell, each checked through the
// real @azure/cosmos client. Ranges come from throughput here, as in the service (no initialRangeCount).

let emulator: CosmosEmulator;
let client: CosmosClient;
let counter = 0;

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ onWarning: () => {} });
  client = new CosmosClient({
    endpoint: emulator.endpoint,
    key: emulator.key,
    connectionPolicy: { requestTimeout: 5_000, retryOptions: { maxRetryAttemptCount: 5, fixedRetryIntervalInMilliseconds: 0, maxWaitTimeInSeconds: 5 } },
  });
});

afterAll(async () => {
  client.dispose();
  await emulator.stop();
});

async function container(throughput?: number, id = `c-${++counter}`): Promise<Container> {
  const { database } = await client.databases.createIfNotExists({ id: 'fidelity' });
  const { container } = await database.containers.createIfNotExists({ id, partitionKey: { paths: ['/pk'] } }, throughput ? { offerThroughput: throughput } : {});
  return container;
}

async function fill(c: Container, n: number, prefix = 'd'): Promise<void> {
  for (let i = 0; i < n; i++) await c.items.create({ id: `${prefix}${i}`, pk: `p${i}`, n: i });
}

describe('1: change feed responses name the range that answered', () => {
  it('carries x-ms-documentdb-partitionkeyrangeid on every page, 200 and 304, one of the live ranges', async () => {
    const c = await container(40_000);
    await fill(c, 40);
    const live = new Set(emulator.partitionKeyRanges('fidelity', c.id).map((r) => r.id));
    expect(live.size).toBe(4);
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 5 });
    const seen = new Set<string>();
    let docs = 0;
    for (let i = 0; i < 50; i++) {
      const res = await it.readNext();
      const rangeId = res.headers['x-ms-documentdb-partitionkeyrangeid'] as string | undefined;
      expect(rangeId, `page ${i} (${res.statusCode})`).toBeDefined();
      expect(live.has(rangeId!)).toBe(true);
      seen.add(rangeId!);
      if (res.statusCode === 304) break;
      docs += res.result.length;
    }
    expect(docs).toBe(40);
    expect(seen).toEqual(live);
  });
});

describe('2: _lsn only on the copies the change feed serves', () => {
  it('is absent from create, read, replace, query and read-feed answers, present in both change feed modes', async () => {
    const c = await container();
    const created = await c.items.create({ id: 'a', pk: 'x', v: 1 });
    expect(created.resource).not.toHaveProperty('_lsn');
    expect(created.resource).toMatchObject({ _rid: expect.any(String), _etag: expect.any(String), _ts: expect.any(Number) });
    const read = await c.item('a', 'x').read();
    expect(read.resource).not.toHaveProperty('_lsn');
    const replaced = await c.item('a', 'x').replace({ id: 'a', pk: 'x', v: 2 });
    expect(replaced.resource).not.toHaveProperty('_lsn');
    const queried = await c.items.query('SELECT * FROM c').fetchAll();
    expect(queried.resources[0]).not.toHaveProperty('_lsn');
    const all = await c.items.readAll().fetchAll();
    expect(all.resources[0]).not.toHaveProperty('_lsn');

    const latest = await c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }).readNext();
    expect(latest.result).toEqual([expect.objectContaining({ id: 'a', v: 2, _lsn: 2 })]);

    const avad = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now(), changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes });
    await avad.readNext();
    await c.item('a', 'x').replace({ id: 'a', pk: 'x', v: 3 });
    await c.item('a', 'x').delete();
    const changes = (await avad.readNext()).result as unknown as { current: ItemDefinition; previous?: ItemDefinition; metadata: Record<string, unknown> }[];
    expect(changes.map((ch) => ch.metadata['operationType'])).toEqual(['replace', 'delete']);
    expect(changes[0]!.current).toMatchObject({ v: 3, _lsn: 3 });
    expect(changes[0]!.metadata).toMatchObject({ lsn: 3, previousImageLSN: 2 });
    expect(changes[1]!.metadata).toMatchObject({ lsn: 4, previousImageLSN: 3 });
    expect(changes[1]!.previous).toMatchObject({ v: 3, _lsn: 3 });
  });
});

describe('3: AllVersionsAndDeletes outside the retention period', () => {
  it('answers 400 with the service message from the beginning and from a time', async () => {
    const c = await container();
    await fill(c, 3);
    for (const changeFeedStartFrom of [ChangeFeedStartFrom.Beginning(), ChangeFeedStartFrom.Time(new Date(Date.now() - 60_000))]) {
      const it = c.items.getChangeFeedIterator({ changeFeedStartFrom, changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes });
      await expect(it.readNext()).rejects.toMatchObject({ code: 400, message: expect.stringContaining('You must read the change feed from within the retention period.') });
    }
  });
});

describe('4: cross-partition queries: the gateway runs streaming ones; plans for the SDK on request', () => {
  beforeEach(() => emulator.clearRequests());

  it('runs a streaming query over a multi-range container whole, as the service gateway does: no plan, no range ids', async () => {
    const c = await container(40_000);
    await fill(c, 60, 'lease.');
    await fill(c, 10, 'other.');
    emulator.clearRequests();
    const { resources } = await c.items
      .query({ query: 'SELECT * FROM c WHERE STARTSWITH(c.id, @p)', parameters: [{ name: '@p', value: 'lease.' }] }, { maxItemCount: 7 })
      .fetchAll();
    expect(resources.map((d) => d.id as string).sort()).toEqual(Array.from({ length: 60 }, (_, i) => `lease.${i}`).sort());
    const queries = emulator.requests().filter((r) => r.containerId === c.id && r.kind === 'query');
    expect(queries.every((r) => r.status === 200 && r.rangeId === undefined)).toBe(true);
    expect(queries).toHaveLength(Math.ceil(60 / 7));
  });

  it('serves the plan when asked (forceQueryPlan) and the SDK then queries each range itself', async () => {
    const c = await container(40_000);
    await fill(c, 20);
    emulator.clearRequests();
    const { resources } = await c.items.query('SELECT c.id FROM c', { forceQueryPlan: true }).fetchAll();
    expect(resources).toHaveLength(20);
    const log = emulator.requests().filter((r) => r.containerId === c.id);
    expect(log.filter((r) => r.kind === 'queryPlan').map((r) => r.status)).toEqual([200]);
    expect(new Set(log.filter((r) => r.kind === 'query').map((r) => r.rangeId))).toEqual(new Set(['0', '1', '2', '3']));
  });

  it("with crossPartitionQueries 'client', refuses plannable queries with the plan and the SDK routes by the map it reads", async () => {
    const local = await CosmosEmulator.start({ crossPartitionQueries: 'client', onWarning: () => {} });
    const sdk = new CosmosClient({ endpoint: local.endpoint, key: local.key });
    try {
      const { database } = await sdk.databases.createIfNotExists({ id: 'fidelity' });
      const { container: c } = await database.containers.createIfNotExists({ id: 'client-side', partitionKey: { paths: ['/pk'] } }, { offerThroughput: 20_000 });
      await fill(c, 80);
      const all = Array.from({ length: 80 }, (_, i) => `d${i}`).sort();
      expect((await c.items.query('SELECT c.id FROM c').fetchAll()).resources.map((d) => d.id as string).sort()).toEqual(all);
      local.split('fidelity', c.id, '1');
      local.clearRequests();
      expect((await c.items.query('SELECT c.id FROM c').fetchAll()).resources.map((d) => d.id as string).sort()).toEqual(all);
      const log = local.requests().filter((r) => r.containerId === c.id);
      // The whole-container attempt is refused with the plan, as the gateway refuses what it does not run.
      expect(log.filter((r) => r.kind === 'query' && r.rangeId === undefined).map((r) => r.status)).toEqual([400]);
      expect(log.some((r) => r.kind === 'pkranges')).toBe(true);
      const ranges = log.filter((r) => r.kind === 'query' && r.status === 200).map((r) => r.rangeId);
      expect(new Set(ranges)).toEqual(new Set(['0', '2', '3'])); // 20,000 RU/s: ranges 0 and 1; 1 split into 2 and 3
    } finally {
      sdk.dispose();
      await local.stop();
    }
  });

  it('runs ORDER BY and aggregates whole (no plan for them) and still answers them right', async () => {
    const c = await container(40_000);
    await fill(c, 12);
    const ordered = await c.items.query('SELECT VALUE c.n FROM c ORDER BY c.n DESC').fetchAll();
    expect(ordered.resources).toEqual(Array.from({ length: 12 }, (_, i) => 11 - i));
    const count = await c.items.query('SELECT VALUE COUNT(1) FROM c').fetchAll();
    expect(count.resources).toEqual([12]);
  });
});

describe('5: physical partitions from provisioned throughput', () => {
  it.each([
    [undefined, 1],
    [400, 1],
    [10_000, 1],
    [21_000, 3],
    [25_100, 3],
    [40_000, 4],
  ])('a container of %s RU/s starts with %i ranges', async (throughput, ranges) => {
    const c = await container(throughput);
    expect(await c.getFeedRanges()).toHaveLength(ranges);
  });

  it('counts the autoscale maximum, and initialRangeCount overrides the derivation', async () => {
    const { database } = await client.databases.createIfNotExists({ id: 'fidelity' });
    const { container: auto } = await database.containers.createIfNotExists({ id: `auto-${++counter}`, partitionKey: '/pk', maxThroughput: 50_000 });
    expect(await auto.getFeedRanges()).toHaveLength(5);
    const fixed = await CosmosEmulator.start({ initialRangeCount: 2 });
    const other = new CosmosClient({ endpoint: fixed.endpoint, key: fixed.key });
    try {
      const { database: db } = await other.databases.createIfNotExists({ id: 'db' });
      const { container: big } = await db.containers.createIfNotExists({ id: 'big', partitionKey: '/pk', throughput: 50_000 });
      expect(await big.getFeedRanges()).toHaveLength(2);
    } finally {
      other.dispose();
      await fixed.stop();
    }
  });
});

describe('6: request charges per operation', () => {
  it('charges reads, writes by size, queries and change feed pages differently, and logs the charge', async () => {
    const c = await container();
    const small = await c.items.create({ id: 's', pk: 'x' });
    const large = await c.items.create({ id: 'l', pk: 'x', body: 'y'.repeat(20_000) });
    const read = await c.item('s', 'x').read();
    const deleted = await c.item('l', 'x').delete();
    const query = await c.items.query('SELECT * FROM c').fetchAll();
    const feed = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
    const page = await feed.readNext();
    const empty = await feed.readNext();
    expect(empty.statusCode).toBe(304);
    expect(read.requestCharge).toBe(1);
    expect(small.requestCharge).toBeCloseTo(5.71, 2);
    expect(large.requestCharge).toBeGreaterThan(small.requestCharge + 5);
    expect(deleted.requestCharge).toBeCloseTo(large.requestCharge, 0);
    expect(query.requestCharge).toBeGreaterThan(2.3);
    expect(Number(page.headers['x-ms-request-charge'])).toBeGreaterThan(2);
    expect(Number(empty.headers['x-ms-request-charge'])).toBe(1);
    const logged = emulator.requests().filter((r) => r.containerId === c.id && r.kind === 'read');
    expect(logged.at(-1)?.requestCharge).toBe(1);
  });

  it('a transactional batch costs the sum of its operations', async () => {
    const c = await container();
    const res = await c.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'a', pk: 'x' } },
        { operationType: 'Create', resourceBody: { id: 'b', pk: 'x' } },
      ],
      'x',
    );
    expect(res.result?.map((r) => r.requestCharge)).toEqual([5.71, 5.71]);
    expect(Number(res.headers['x-ms-request-charge'])).toBeCloseTo(11.42, 2);
  });
});

describe('queries without the optional SQL package', () => {
  let builtinOnly: CosmosEmulator;
  let builtinClient: CosmosClient;
  const warnings: string[] = [];

  beforeAll(async () => {
    builtinOnly = await CosmosEmulator.start({ sqlEngine: 'builtin', onWarning: (m) => warnings.push(m) });
    builtinClient = new CosmosClient({ endpoint: builtinOnly.endpoint, key: builtinOnly.key });
  });
  afterAll(async () => {
    builtinClient.dispose();
    await builtinOnly.stop();
  });

  async function leases(id: string): Promise<Container> {
    const { database } = await builtinClient.databases.createIfNotExists({ id: 'leases' });
    return (await database.containers.createIfNotExists({ id, partitionKey: { paths: ['/id'] } })).container;
  }

  leaseStoreConformance('CosmosLeaseStore on the emulator with the built-in SQL evaluator only', async () => {
    const container = await leases('by-id');
    return {
      store: new CosmosLeaseStore({ container }),
      writeCorrupt: async (id) => {
        await container.items.create({ id, LeaseToken: 7, Owner: { not: 'a string' } });
      },
    };
  });

  it('answers an unsupported query with 400 that says what to install or change, and warns once', async () => {
    const c = await leases('joins');
    await c.items.create({ id: 'a', tags: ['x'] });
    const join = 'SELECT t FROM c JOIN t IN c.tags';
    await expect(c.items.query(join).fetchAll()).rejects.toMatchObject({
      code: 400,
      message: expect.stringMatching(/does not support JOIN.*npm i -D @zeit\/cosmosdb-query/s),
    });
    await expect(c.items.query(join).fetchAll()).rejects.toMatchObject({ code: 400 });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/@zeit\/cosmosdb-query/);
    const { resources } = await c.items.query({ query: 'SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, @t)', parameters: [{ name: '@t', value: 'x' }] }).fetchAll();
    expect(resources).toEqual(['a']);
  });
});

describe('every answer carries the service time', () => {
  it("answers with a Date header (RFC 1123) by the emulator's clock, not the host's, on success and on error", async () => {
    const at = Date.parse('2031-05-06T07:08:09.456Z');
    const local = await CosmosEmulator.start({ now: () => at, onWarning: () => {} });
    const localClient = new CosmosClient({ endpoint: local.endpoint, key: local.key });
    try {
      const { database } = await localClient.databases.createIfNotExists({ id: 'clock' });
      const { container, headers } = await database.containers.createIfNotExists({ id: 'c', partitionKey: { paths: ['/pk'] } });
      expect(headers['date']).toBe('Tue, 06 May 2031 07:08:09 GMT');
      const read = await container.read();
      expect(read.headers['date']).toBe('Tue, 06 May 2031 07:08:09 GMT');
      const missing = await container.item('nope', 'p').read();
      expect(missing.statusCode).toBe(404);
      expect(missing.headers['date']).toBe('Tue, 06 May 2031 07:08:09 GMT');
    } finally {
      localClient.dispose();
      await local.stop();
    }
  });
});
