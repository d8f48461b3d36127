import {
  ChangeFeedMode,
  ChangeFeedStartFrom,
  CosmosClient,
  PartitionKeyKind,
  type ChangeFeedIteratorOptions,
  type Container,
  type ItemDefinition,
  type PartitionKeyDefinition,
} from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosEmulator, EMULATOR_KEY } from '../../src/emulator/index.js';
import { runEmulatorCli } from '../../src/emulator/main.js';
import { freshContainer as freshContainerIn } from '../support/cosmos.js';

// Integration tests: the real, unmodified @azure/cosmos client against the emulator over HTTP.

let emulator: CosmosEmulator;
let client: CosmosClient;
let counter = 0;

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ initialRangeCount: (_db, coll) => (coll.startsWith('multi') ? 4 : 1) });
  client = newClient();
});

afterAll(async () => {
  client.dispose();
  await emulator.stop();
});

function newClient(requestTimeout = 5_000): CosmosClient {
  return new CosmosClient({
    endpoint: emulator.endpoint,
    key: emulator.key,
    connectionPolicy: { requestTimeout, retryOptions: { maxRetryAttemptCount: 5, fixedRetryIntervalInMilliseconds: 0, maxWaitTimeInSeconds: 5 } },
  });
}

function freshContainer(prefix = 'c', partitionKey: PartitionKeyDefinition = { paths: ['/pk'] }): Promise<Container> {
  return freshContainerIn(client, prefix, partitionKey);
}

/** Reads a change feed until it answers 304 (or `maxPolls`), returning every document it delivered. */
async function drain(container: Container, options: ChangeFeedIteratorOptions, maxPolls = 100): Promise<ItemDefinition[]> {
  const it = container.items.getChangeFeedIterator(options);
  const out: ItemDefinition[] = [];
  for (let i = 0; i < maxPolls; i++) {
    const res = await it.readNext();
    if (res.statusCode === 304) break;
    out.push(...res.result);
  }
  return out;
}

const ids = (docs: ItemDefinition[]) => docs.map((d) => d.id as string).sort();

describe('emulator with the SDK: resources and items', () => {
  it('echoes the partition key definition with a version and lists the initial ranges', async () => {
    const c = await freshContainer('multi');
    const { resource } = await c.read();
    expect(resource?.partitionKey).toMatchObject({ paths: ['/pk'], kind: 'Hash', version: 2 });
    expect(await c.getFeedRanges()).toHaveLength(4);
  });

  it('keeps the throughput a container was created with as its offer, which can be replaced', async () => {
    const { database } = await client.databases.createIfNotExists({ id: 'db' });
    const { container } = await database.containers.createIfNotExists({ id: `offered-${++counter}`, partitionKey: '/pk', throughput: 1000 });
    const { resource, offer } = await container.readOffer();
    expect(resource?.content?.offerThroughput).toBe(1000);
    await offer!.replace({ ...resource!, content: { offerThroughput: 2000, offerIsRUPerMinuteThroughputEnabled: false } });
    expect((await offer!.read()).resource?.content?.offerThroughput).toBe(2000);
  });

  it('answers item operations with the status codes the service uses', async () => {
    const c = await freshContainer();
    const created = await c.items.create({ id: 'a', pk: 'x', n: 1 });
    expect(created.statusCode).toBe(201);
    expect(created.etag).toBe(created.resource?._etag);
    await expect(c.items.create({ id: 'a', pk: 'x' })).rejects.toMatchObject({ code: 409 });
    expect((await c.item('missing', 'x').read()).statusCode).toBe(404);
    expect((await c.items.upsert({ id: 'b', pk: 'x' })).statusCode).toBe(201);
    expect((await c.items.upsert({ id: 'b', pk: 'x', n: 2 })).statusCode).toBe(200);
    const stale = { type: 'IfMatch', condition: '"stale"' };
    await expect(c.item('a', 'x').replace({ id: 'a', pk: 'x', n: 2 }, { accessCondition: stale })).rejects.toMatchObject({ code: 412 });
    await expect(c.item('a', 'x').delete({ accessCondition: stale })).rejects.toMatchObject({ code: 412 });
    const replaced = await c.item('a', 'x').replace({ id: 'a', pk: 'x', n: 2 }, { accessCondition: { type: 'IfMatch', condition: created.etag } });
    expect(replaced.resource?.n).toBe(2);
    expect(replaced.resource?._etag).not.toBe(created.etag);
    expect((await c.item('a', 'x').delete()).statusCode).toBe(204);
    await expect(c.item('a', 'x').delete()).rejects.toMatchObject({ code: 404 });
  });

  it('keeps ids and names with spaces and non-ASCII characters intact', async () => {
    const c = await freshContainer('name with space');
    await c.items.create({ id: 'id é 1', pk: 'café' });
    const { resource } = await c.item('id é 1', 'café').read();
    expect(resource?.pk).toBe('café');
  });

  it('patches with operations and a condition', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'a', pk: 'x', n: 1 });
    const { resource } = await c.item('a', 'x').patch([
      { op: 'incr', path: '/n', value: 4 },
      { op: 'set', path: '/owner', value: 'h1' },
    ]);
    expect(resource).toMatchObject({ n: 5, owner: 'h1' });
    await expect(
      c.item('a', 'x').patch({ condition: 'FROM c WHERE c.owner = "h2"', operations: [{ op: 'set', path: '/owner', value: 'h3' }] }),
    ).rejects.toMatchObject({ code: 412 });
  });

  it('runs parameterised SQL queries across ranges and pages them', async () => {
    const c = await freshContainer('multi');
    for (let i = 0; i < 25; i++) await c.items.create({ id: `lease-${i}`, pk: `p${i % 5}`, n: i });
    await c.items.create({ id: 'other', pk: 'p0', n: 99 });
    const query = { query: 'SELECT * FROM c WHERE STARTSWITH(c.id, @prefix) ORDER BY c.n', parameters: [{ name: '@prefix', value: 'lease-' }] };
    const { resources } = await c.items.query(query).fetchAll();
    expect(resources.map((d) => d.n)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    const pages = c.items.query(query, { maxItemCount: 10 });
    let pageCount = 0;
    let total = 0;
    while (pages.hasMoreResults()) {
      const page = await pages.fetchNext();
      if (page.resources.length > 0) pageCount++;
      total += page.resources.length;
    }
    expect([pageCount, total]).toEqual([3, 25]);
    const scoped = await c.items.query('SELECT VALUE COUNT(1) FROM c', { partitionKey: 'p0' }).fetchAll();
    expect(scoped.resources).toEqual([6]);
    expect((await c.items.readAll().fetchAll()).resources).toHaveLength(26);
  });
});

describe('emulator with the SDK: batch and bulk', () => {
  it('commits a transactional batch as a whole', async () => {
    const c = await freshContainer();
    const res = await c.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'a', pk: 'x' } },
        { operationType: 'Upsert', resourceBody: { id: 'b', pk: 'x', n: 1 } },
        { operationType: 'Patch', id: 'b', resourceBody: { operations: [{ op: 'incr', path: '/n', value: 1 }] } },
        { operationType: 'Read', id: 'a' },
      ],
      'x',
    );
    expect(res.result?.map((r) => r.statusCode)).toEqual([201, 201, 200, 200]);
    expect((await c.item('b', 'x').read()).resource?.n).toBe(2);
  });

  it('rolls a failed transactional batch back, change feed included', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'taken', pk: 'x' });
    const res = await c.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'new', pk: 'x' } },
        { operationType: 'Create', resourceBody: { id: 'taken', pk: 'x' } },
        { operationType: 'Delete', id: 'taken' },
      ],
      'x',
    );
    expect(res.code).toBe(207);
    expect(res.result?.map((r) => r.statusCode)).toEqual([424, 409, 424]);
    expect((await c.item('new', 'x').read()).statusCode).toBe(404);
    expect(ids(await drain(c, { changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }))).toEqual(['taken']);
  });

  it('fails the operations a fault names: a bulk lands the others, a transactional batch none', async () => {
    const c = await freshContainer();
    const fault = emulator.injectFault({ match: { kind: 'batch' }, action: { operations: (i) => (i === 1 ? { status: 429, substatus: 3200, retryAfterMs: 7 } : undefined) } });
    try {
      const bulk = await c.items.bulk(
        ['a', 'b', 'c'].map((id) => ({ operationType: 'Create' as const, partitionKey: 'x', resourceBody: { id, pk: 'x' } })),
        { continueOnError: true },
      );
      expect(bulk.map((r) => r.statusCode)).toEqual([201, 429, 201]);
      expect(bulk[1]).toMatchObject({ subStatusCode: 3200, retryAfterMilliseconds: 7 });
      expect((await c.item('b', 'x').read()).statusCode).toBe(404);
      expect((await c.item('c', 'x').read()).statusCode).toBe(200);
      const atomic = await c.items.batch(
        [
          { operationType: 'Create', resourceBody: { id: 'd', pk: 'x' } },
          { operationType: 'Create', resourceBody: { id: 'e', pk: 'x' } },
        ],
        'x',
      );
      expect(atomic.code).toBe(207);
      expect(atomic.result?.map((r) => r.statusCode)).toEqual([424, 429]);
      expect((await c.item('d', 'x').read()).statusCode).toBe(404);
    } finally {
      fault.remove();
    }
  });

  it('runs bulk operations across ranges, each on its own', async () => {
    const c = await freshContainer('multi');
    await c.items.create({ id: 'dup', pk: 'p0' });
    const ops = Array.from({ length: 20 }, (_, i) => ({
      operationType: 'Create' as const,
      partitionKey: `p${i}`,
      resourceBody: { id: `d${i}`, pk: `p${i}` },
    }));
    const res = await c.items.executeBulkOperations([...ops, { operationType: 'Create', partitionKey: 'p0', resourceBody: { id: 'dup', pk: 'p0' } }]);
    expect(res.filter((r) => r.response?.statusCode === 201)).toHaveLength(20);
    expect(res.filter((r) => r.error?.code === 409)).toHaveLength(1);
    expect((await c.items.readAll().fetchAll()).resources).toHaveLength(21);
  });
});

describe('emulator with the SDK: change feed', () => {
  it('delivers every document once from the beginning, across ranges and small pages', async () => {
    const c = await freshContainer('multi');
    for (let i = 0; i < 40; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    for (let i = 0; i < 40; i += 4) await c.items.upsert({ id: `d${i}`, pk: `p${i}`, v: 2 });
    const docs = await drain(c, { changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 3 });
    expect(docs).toHaveLength(40);
    expect(new Set(ids(docs)).size).toBe(40);
    expect(docs.filter((d) => d.v === 2)).toHaveLength(10);
  });

  it('starts from now, then sees only later writes; idle polls answer 304 with a position', async () => {
    const c = await freshContainer('multi');
    await c.items.create({ id: 'before', pk: 'a' });
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now() });
    expect((await it.readNext()).statusCode).toBe(304);
    await c.items.create({ id: 'after', pk: 'b' });
    const seen: string[] = [];
    for (let i = 0; i < 8 && seen.length === 0; i++) seen.push(...(await it.readNext()).result.map((d: ItemDefinition) => d.id as string));
    expect(seen).toEqual(['after']);
  });

  it('starts from a time, by the emulator clock', async () => {
    let clockMs = Date.UTC(2026, 0, 1);
    const timed = await CosmosEmulator.start({ now: () => clockMs });
    const timedClient = new CosmosClient({ endpoint: timed.endpoint, key: timed.key });
    try {
      const { database } = await timedClient.databases.createIfNotExists({ id: 'db' });
      const { container: c } = await database.containers.createIfNotExists({ id: 'c', partitionKey: { paths: ['/pk'] } });
      await c.items.create({ id: 'old', pk: 'a' });
      clockMs += 10_000;
      const { resource } = await c.items.create({ id: 'new', pk: 'a' });
      expect(resource?._ts).toBe(clockMs / 1000);
      const since = new Date(clockMs - 5_000);
      expect(ids(await drain(c, { changeFeedStartFrom: ChangeFeedStartFrom.Time(since) }))).toEqual(['new']);
    } finally {
      timedClient.dispose();
      await timed.stop();
    }
  });

  it('resumes from a continuation token in a new client', async () => {
    const c = await freshContainer('multi');
    for (let i = 0; i < 10; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
    let token = '';
    for (let i = 0; i < 6; i++) token = (await it.readNext()).continuationToken;
    for (let i = 10; i < 15; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    const other = newClient();
    const again = other.database('db').container(c.id);
    expect(ids(await drain(again, { changeFeedStartFrom: ChangeFeedStartFrom.Continuation(token) }))).toEqual(ids(
      Array.from({ length: 5 }, (_, i) => ({ id: `d${i + 10}` })),
    ));
    other.dispose();
  });

  it('scopes a feed to one partition key', async () => {
    const c = await freshContainer('multi');
    for (let i = 0; i < 12; i++) await c.items.create({ id: `d${i}`, pk: `p${i % 3}` });
    const docs = await drain(c, { changeFeedStartFrom: ChangeFeedStartFrom.Beginning('p1') });
    expect(ids(docs)).toEqual(['d1', 'd10', 'd4', 'd7']);
  });

  it('follows a split transparently: the parent answers 410/1002 and nothing is lost or repeated', async () => {
    const c = await freshContainer();
    for (let i = 0; i < 30; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 7 });
    const seen: string[] = [];
    seen.push(...(await it.readNext()).result.map((d: ItemDefinition) => d.id as string));
    const [left, right] = emulator.split('db', c.id, '0');
    for (let i = 30; i < 40; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    for (let i = 0; i < 30; i++) {
      const res = await it.readNext();
      if (res.statusCode === 304) break;
      seen.push(...res.result.map((d: ItemDefinition) => d.id as string));
    }
    expect(seen).toHaveLength(40);
    expect(new Set(seen).size).toBe(40);
    expect(emulator.partitionKeyRanges('db', c.id).map((r) => r.id)).toEqual([left.id, right.id]);
    const gone = emulator.requests().filter((r) => r.containerId === c.id && r.kind === 'changeFeed' && r.status === 410);
    expect(gone.map((r) => r.rangeId)).toEqual(['0']);
  });

  it('keeps a partition-key feed going through a split without an error', async () => {
    const c = await freshContainer();
    for (let i = 0; i < 10; i++) await c.items.create({ id: `d${i}`, pk: `p${i % 2}` });
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning('p0') });
    const first = (await it.readNext()).result.length;
    emulator.split('db', c.id, '0');
    await c.items.create({ id: 'late', pk: 'p0' });
    const next = await it.readNext();
    expect([first, next.result.map((d: ItemDefinition) => d.id)]).toEqual([5, ['late']]);
  });

  it('follows a merge: the SDK reads the old range as an EPK sub-range of the merged one', async () => {
    const c = await freshContainer('multi');
    for (let i = 0; i < 20; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) seen.push(...(await it.readNext()).result.map((d: ItemDefinition) => d.id as string));
    expect(seen).toHaveLength(20);
    emulator.merge('db', c.id, '0', '1');
    for (let i = 20; i < 30; i++) await c.items.create({ id: `d${i}`, pk: `p${i}` });
    for (let i = 0; i < 12; i++) seen.push(...(await it.readNext()).result.map((d: ItemDefinition) => d.id as string));
    expect(seen).toHaveLength(30);
    expect(new Set(seen).size).toBe(30);
  });

  it('reads a hierarchical key prefix through EPK sub-range headers', async () => {
    const c = await freshContainer('multi', { paths: ['/tenant', '/user'], kind: PartitionKeyKind.MultiHash, version: 2 });
    for (let i = 0; i < 12; i++) await c.items.create({ id: `d${i}`, tenant: `t${i % 3}`, user: `u${i}` });
    const docs = await drain(c, { changeFeedStartFrom: ChangeFeedStartFrom.Beginning(['t1']) });
    expect(ids(docs)).toEqual(['d1', 'd10', 'd4', 'd7']);
  });

  it('serves AllVersionsAndDeletes from now with creates, replaces and deletes', async () => {
    const c = await freshContainer();
    const it = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now(), changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes });
    expect((await it.readNext()).statusCode).toBe(304);
    await c.items.create({ id: 'a', pk: 'x', v: 1 });
    await c.items.upsert({ id: 'a', pk: 'x', v: 2 });
    await c.item('a', 'x').delete();
    const res = await it.readNext();
    const changes = res.result as unknown as { metadata: { operationType: string } }[];
    expect(changes.map((r) => r.metadata.operationType)).toEqual(['create', 'replace', 'delete']);
    expect(res.result[2]).toMatchObject({ current: {}, previous: { id: 'a', v: 2 }, metadata: { id: 'a', partitionKey: { pk: 'x' } } });
  });

  it('rejects AllVersionsAndDeletes from the beginning with 400, as the service does', async () => {
    const c = await freshContainer();
    const it = c.items.getChangeFeedIterator({
      changeFeedStartFrom: ChangeFeedStartFrom.Beginning(),
      changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes,
    });
    await expect(it.readNext()).rejects.toMatchObject({ code: 400 });
  });
});

describe('emulator with the SDK: faults', () => {
  it('throttles with retry-after; the SDK retries and the read succeeds', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'a', pk: 'x' });
    const fault = emulator.injectFault({ match: { kind: 'changeFeed', containerId: c.id }, action: { status: 429, substatus: 3200, retryAfterMs: 5 }, times: 3 });
    const res = await c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }).readNext();
    expect(res.result.map((d: ItemDefinition) => d.id)).toEqual(['a']);
    expect(fault.hits).toBe(3);
  });

  it('rides over an injected 410/1007 (completing split): the SDK refreshes its ranges and retries', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'a', pk: 'x' });
    const fault = emulator.injectFault({ match: { kind: 'changeFeed', containerId: c.id }, action: { status: 410, substatus: 1007 }, times: 1 });
    const res = await c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }).readNext();
    expect([fault.hits, res.result.map((d: ItemDefinition) => d.id)]).toEqual([1, ['a']]);
  });

  it('fails writes with an injected 503 and lets them through once the fault is used up', async () => {
    const c = await freshContainer();
    emulator.injectFault({ match: { kind: 'create', containerId: c.id }, action: { status: 503 }, times: 1 });
    await expect(c.items.create({ id: 'a', pk: 'x' })).rejects.toMatchObject({ code: 503 });
    expect((await c.items.create({ id: 'a', pk: 'x' })).statusCode).toBe(201);
  });

  it('hangs a request until the client times out; the SDK retries the read', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'a', pk: 'x' });
    const impatient = newClient(300);
    emulator.injectFault({ match: { kind: 'read', containerId: c.id }, action: { hang: true }, times: 1 });
    const { resource } = await impatient.database('db').container(c.id).item('a', 'x').read();
    expect(resource?.id).toBe('a');
    expect(emulator.requests().filter((r) => r.containerId === c.id && r.kind === 'read').map((r) => r.status)).toEqual([0, 200]);
    impatient.dispose();
  });

  it('resets the socket of a write, which the SDK surfaces', async () => {
    const c = await freshContainer();
    emulator.injectFault({ match: { kind: 'upsert', containerId: c.id }, action: { reset: true }, times: 1 });
    await expect(c.items.upsert({ id: 'a', pk: 'x' })).rejects.toMatchObject({ code: 'ECONNRESET' });
  });

  it('adds latency without changing the answer', async () => {
    const c = await freshContainer();
    const fault = emulator.injectFault({ match: { kind: 'create', containerId: c.id }, action: { delayMs: 20 }, times: 1 });
    expect((await c.items.create({ id: 'a', pk: 'x' })).statusCode).toBe(201);
    expect(fault.hits).toBe(1);
  });
});

describe('emulator admin over HTTP', () => {
  it('splits, lists ranges, injects and clears faults, dumps state', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'a', pk: 'x' });
    const post = (path: string, body: unknown) =>
      fetch(new URL(`_emulator/${path}`, emulator.endpoint), { method: 'POST', body: JSON.stringify(body) });
    const split = await post('split', { databaseId: 'db', containerId: c.id, rangeId: '0' });
    expect(split.status).toBe(200);
    const ranges = (await (await fetch(new URL(`_emulator/ranges/db/${encodeURIComponent(c.id)}`, emulator.endpoint))).json()) as unknown[];
    expect(ranges).toHaveLength(2);
    expect((await post('faults', { match: { kind: 'read', containerId: c.id }, action: { status: 500 } })).status).toBe(201);
    await expect(c.item('a', 'x').read()).rejects.toMatchObject({ code: 500 });
    expect((await fetch(new URL('_emulator/faults', emulator.endpoint), { method: 'DELETE' })).status).toBe(204);
    expect((await c.item('a', 'x').read()).statusCode).toBe(200);
    const dump = (await (await fetch(new URL('_emulator/dump', emulator.endpoint))).json()) as { databases: { containers: { id: string }[] }[] };
    expect(dump.databases[0]!.containers.some((x) => x.id === c.id)).toBe(true);
    expect((await post('split', { databaseId: 'db' })).status).toBe(400);
  });
});

describe('emulator with a master key', () => {
  it('accepts requests the SDK signs with the key and answers others with 401', async () => {
    const masterKey = Buffer.from('a test key that is not the emulator key').toString('base64');
    const secured = await CosmosEmulator.start({ masterKey, initialRangeCount: 2 });
    const good = new CosmosClient({ endpoint: secured.endpoint, key: secured.key });
    const bad = new CosmosClient({ endpoint: secured.endpoint, key: Buffer.from('wrong').toString('base64') });
    try {
      expect(secured.key).toBe(masterKey);
      const { database } = await good.databases.createIfNotExists({ id: 'db é' });
      const { container } = await database.containers.createIfNotExists({ id: 'c 1', partitionKey: { paths: ['/pk'] } });
      await container.items.create({ id: 'id é', pk: 'x' });
      expect((await container.item('id é', 'x').read()).resource?.id).toBe('id é');
      expect((await container.items.query('SELECT * FROM c').fetchAll()).resources).toHaveLength(1);
      expect(await drain(container, { changeFeedStartFrom: ChangeFeedStartFrom.Beginning() })).toHaveLength(1);
      const { offer } = await container.readOffer();
      expect((await offer!.read()).resource?.content?.offerThroughput).toBe(400);
      await expect(bad.database('db é').container('c 1').item('id é', 'x').read()).rejects.toMatchObject({ code: 401 });
      const unsigned = await fetch(new URL('dbs', secured.endpoint));
      expect(unsigned.status).toBe(401);
    } finally {
      good.dispose();
      bad.dispose();
      await secured.stop();
    }
  });
});

describe('CosmosEmulator options', () => {
  it('rejects invalid options at start with a message that names them', async () => {
    await expect(CosmosEmulator.start({ initialRangeCount: 0 })).rejects.toThrow(/initialRangeCount/);
    await expect(CosmosEmulator.start({ port: -1 })).rejects.toThrow(/port/);
    await expect(CosmosEmulator.start({ changeFeedPageSize: 1.5 })).rejects.toThrow(/changeFeedPageSize/);
    await expect(CosmosEmulator.start({ masterKey: '' })).rejects.toThrow(/masterKey/);
  });

  it('checks signatures with the well-known emulator key by default, and not with checkAuth: false', async () => {
    const strict = await CosmosEmulator.start();
    const lax = await CosmosEmulator.start({ checkAuth: false });
    const wrongKey = Buffer.from('not the emulator key').toString('base64');
    try {
      expect(strict.key).toBe(EMULATOR_KEY);
      const good = new CosmosClient({ endpoint: strict.endpoint, key: strict.key });
      await good.databases.createIfNotExists({ id: 'db' });
      const bad = new CosmosClient({ endpoint: strict.endpoint, key: wrongKey });
      await expect(bad.databases.createIfNotExists({ id: 'db2' })).rejects.toMatchObject({ code: 401 });
      const anyKey = new CosmosClient({ endpoint: lax.endpoint, key: wrongKey });
      await anyKey.databases.createIfNotExists({ id: 'db' });
      for (const c of [good, bad, anyKey]) c.dispose();
    } finally {
      await strict.stop();
      await lax.stop();
    }
  });

  it('starts from command-line arguments', async () => {
    const lines: string[] = [];
    const cli = await runEmulatorCli(['--port', '0', '--partitions', '3', '--no-auth'], (line) => lines.push(line));
    try {
      expect(lines[0]).toBe(`rxfeed Cosmos DB emulator listening on ${cli!.endpoint}`);
      expect(lines).toContain(`endpoint: ${cli!.endpoint}`);
      expect(lines.some((l) => l.startsWith('key:') && l.includes('--no-auth'))).toBe(true);
      const other = new CosmosClient({ endpoint: cli!.endpoint, key: 'any key works with --no-auth' });
      const { database } = await other.databases.createIfNotExists({ id: 'db' });
      const { container } = await database.containers.createIfNotExists({ id: 'c', partitionKey: { paths: ['/pk'] } });
      expect(await container.getFeedRanges()).toHaveLength(3);
      other.dispose();
    } finally {
      await cli?.stop();
    }
    await expect(runEmulatorCli(['--ranges', 'many'])).rejects.toThrow(/--ranges/);
  });

  it('prints the endpoint and the key a client must pass, and that key works', async () => {
    const lines: string[] = [];
    const cli = await runEmulatorCli(['--port', '0'], (line) => lines.push(line));
    try {
      expect(lines).toContain(`endpoint: ${cli!.endpoint}`);
      expect(lines).toContain(`key:      ${EMULATOR_KEY}`);
      expect(lines).toContain(`export COSMOS_ENDPOINT=${cli!.endpoint} COSMOS_KEY='${EMULATOR_KEY}'`);
      const user = new CosmosClient({ endpoint: cli!.endpoint, key: EMULATOR_KEY });
      expect((await user.databases.createIfNotExists({ id: 'db' })).statusCode).toBe(201);
      user.dispose();
    } finally {
      await cli?.stop();
    }
    const chosen: string[] = [];
    const own = await runEmulatorCli(['--port', '0', '--master-key', Buffer.from('secret key').toString('base64')], (line) => chosen.push(line));
    await own?.stop();
    expect(chosen.join('\n')).not.toContain(Buffer.from('secret key').toString('base64'));
    expect(chosen).toContain('key:      the --master-key you passed');
  });
});
