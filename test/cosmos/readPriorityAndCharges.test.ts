/**
 * CosmosSource through the real client on the emulator: change feed reads carry the priority level and
 * throughput bucket asked for, and each batch carries the request charge of its read.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosLeaseStore, CosmosSource, InvalidOptionsError } from '../../src/index.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 1 });
});
afterAll(() => cosmos.stop());

/** The headers of every HTTP request this process sends while `work` runs. */
async function headersSent(work: () => Promise<void>): Promise<Record<string, unknown>[]> {
  const seen: Record<string, unknown>[] = [];
  const onStart = (message: unknown) => {
    const request = (message as { request: ClientRequest }).request;
    seen.push({ path: request.path, ...request.getHeaders() });
  };
  subscribe('http.client.request.start', onStart);
  try {
    await work();
  } finally {
    unsubscribe('http.client.request.start', onStart);
  }
  return seen;
}

describe('CosmosSource: priority, throughput bucket, request charges', () => {
  it('sends change feed reads at the priority and from the bucket asked for, and puts each read\'s charge on its page', async () => {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'priority' });
    const { container } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/id'] } });
    for (let i = 0; i < 5; i++) await container.items.create({ id: `o${i}` });
    const source = new CosmosSource<{ id: string }>(container, { priorityLevel: 'Low', throughputBucket: 3 });
    const [partition] = await source.listPartitions();
    let charge: number | undefined;
    const sent = await headersSent(async () => {
      const page = await source.read({ partition: partition!, from: 'beginning', maxItemCount: 100 });
      expect(page.changes).toHaveLength(5);
      charge = page.requestCharge;
    });
    const feedReads = sent.filter((h) => h['a-im'] !== undefined);
    expect(feedReads.length).toBeGreaterThan(0);
    for (const headers of feedReads) {
      expect(headers['x-ms-cosmos-priority-level']).toBe('Low');
      expect(String(headers['x-ms-cosmos-throughput-bucket'])).toBe('3');
    }
    expect(charge).toBeGreaterThan(0);
  });

  it('reports what each lease request cost', async () => {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'priority' });
    const { container } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
    const store = new CosmosLeaseStore({ container, groupWritesMs: 0 });
    const charges: [string, number][] = [];
    const stop = store.watchRequestCharges((operation, ru) => charges.push([operation, ru]));
    const created = await store.createIfAbsent({
      id: 'ru.0', leaseToken: '0', feedRange: undefined, owner: 'a', continuation: null, timestampMs: 0, epoch: 1, mode: 'latestVersion', properties: {},
    });
    const replaced = await store.replace({ ...created!, epoch: 2 });
    await store.read('ru.0');
    await store.list('ru.');
    await store.delete(replaced);
    stop();
    await store.list('ru.');
    const operations = charges.map(([operation]) => operation);
    expect(operations).toEqual(expect.arrayContaining(['lease.create', 'lease.replace', 'lease.read', 'lease.list', 'lease.delete']));
    expect(operations.filter((o) => o === 'lease.list')).toHaveLength(1); // none after stop()
    for (const [, ru] of charges) expect(ru).toBeGreaterThan(0);
  });

  it('refuses a priority or bucket that is not one', async () => {
    const container = cosmos.client.database('priority').container('orders');
    expect(() => new CosmosSource(container, { priorityLevel: 'Urgent' as never })).toThrow(InvalidOptionsError);
    expect(() => new CosmosSource(container, { throughputBucket: 0 })).toThrow(/throughputBucket/);
  });
});
