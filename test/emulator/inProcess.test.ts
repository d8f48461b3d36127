import { ChangeFeedStartFrom, CosmosClient, type Container } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosEmulator, type FaultAction, type RequestInfo } from '../../src/emulator/index.js';
import { freshContainer as freshContainerIn } from '../support/cosmos.js';

// The real, unmodified @azure/cosmos client against an emulator that does not listen: every request goes
// through `emulator.httpClient()`, in this process.

let emulator: CosmosEmulator;
let client: CosmosClient;

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ listen: false, initialRangeCount: 2 });
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
    httpClient: emulator.httpClient(),
    connectionPolicy: { requestTimeout, retryOptions: { maxRetryAttemptCount: 5, fixedRetryIntervalInMilliseconds: 0, maxWaitTimeInSeconds: 5 } },
  });
}

function freshContainer(): Promise<Container> {
  return freshContainerIn(client);
}

describe('emulator.httpClient(): the SDK without a socket', () => {
  it('serves documents, queries and the change feed of every range, and nothing listens', async () => {
    expect(emulator.endpoint).toBe('http://127.0.0.1:0/');
    const c = await freshContainer();
    for (let i = 0; i < 20; i++) await c.items.upsert({ id: `d${i}`, pk: `k${i}`, n: i });
    const { resource } = await c.item('d3', 'k3').read<{ n: number }>();
    expect(resource?.n).toBe(3);
    const { resources } = await c.items.query<{ id: string }>('SELECT c.id FROM c WHERE c.n >= 18').fetchAll();
    expect(resources.map((r) => r.id).sort()).toEqual(['d18', 'd19']);
    const iterator = c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 100 });
    const seen: string[] = [];
    for (let pages = 0; pages < 10; pages++) {
      const page = await iterator.readNext();
      if (page.statusCode === 304) break;
      seen.push(...(page.result as { id: string }[]).map((d) => d.id));
    }
    expect(seen.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `d${i}`).sort());
    expect(emulator.partitionKeyRanges('db', c.id)).toHaveLength(2);
  });

  it('meets injected throttling the way the SDK meets the service: retried after the retry-after', async () => {
    const c = await freshContainer();
    emulator.injectFault({ match: { kind: 'create', containerId: c.id }, action: { status: 429, substatus: 3200, retryAfterMs: 5 }, times: 2 });
    expect((await c.items.create({ id: 'a', pk: 'x' })).statusCode).toBe(201);
    expect(emulator.requests().filter((r) => r.containerId === c.id && r.kind === 'create').map((r) => r.status)).toEqual([429, 429, 201]);
  });

  it('holds a hung request until the SDK times out, then the SDK retries the read', async () => {
    const c = await freshContainer();
    await c.items.create({ id: 'a', pk: 'x' });
    const impatient = newClient(50);
    emulator.injectFault({ match: { kind: 'read', containerId: c.id }, action: { hang: true }, times: 1 });
    const { resource } = await impatient.database('db').container(c.id).item('a', 'x').read();
    expect(resource?.id).toBe('a');
    expect(emulator.requests().filter((r) => r.containerId === c.id && r.kind === 'read').map((r) => r.status)).toEqual([0, 200]);
    impatient.dispose();
  });

  it('loses the reply of a write that landed: the SDK reports ECONNRESET, the document is there', async () => {
    const c = await freshContainer();
    emulator.injectFault({ match: { kind: 'upsert', containerId: c.id }, action: { lostReply: true }, times: 1 });
    await expect(c.items.upsert({ id: 'a', pk: 'x', v: 1 })).rejects.toMatchObject({ code: 'ECONNRESET' });
    const { resource } = await c.item('a', 'x').read<{ v: number }>();
    expect(resource?.v).toBe(1);
  });

  it('resets a write before it is served: nothing lands', async () => {
    const c = await freshContainer();
    emulator.injectFault({ match: { kind: 'create', containerId: c.id }, action: { reset: true }, times: 1 });
    await expect(c.items.create({ id: 'a', pk: 'x' })).rejects.toMatchObject({ code: 'ECONNRESET' });
    const { statusCode } = await c.item('a', 'x').read();
    expect(statusCode).toBe(404);
  });

  it('takes a fault decided per request by a function; undefined lets the request through uncounted', async () => {
    const c = await freshContainer();
    const asked: RequestInfo[] = [];
    const fault = emulator.injectFault({
      match: { containerId: c.id },
      action: (request): FaultAction | undefined => {
        asked.push(request);
        return request.kind === 'create' && asked.length === 1 ? { status: 503 } : undefined;
      },
    });
    await expect(c.items.create({ id: 'a', pk: 'x' })).rejects.toMatchObject({ code: 503 });
    expect((await c.items.create({ id: 'a', pk: 'x' })).statusCode).toBe(201);
    expect(fault.hits).toBe(1);
    expect(asked.map((r) => r.kind)).toEqual(['create', 'create']);
    fault.remove();
  });

  it('fails a request still hung when the emulator stops as a dropped connection', async () => {
    const other = await CosmosEmulator.start({ listen: false });
    const patient = new CosmosClient({ endpoint: other.endpoint, key: other.key, httpClient: other.httpClient(), connectionPolicy: { requestTimeout: 60_000 } });
    other.injectFault({ match: { kind: 'database' }, action: { hang: true } });
    const pending = patient.databases.create({ id: 'db' });
    await new Promise((resolve) => setImmediate(resolve));
    await other.stop();
    await expect(pending).rejects.toMatchObject({ code: 'ECONNRESET' });
    patient.dispose();
  });
});
