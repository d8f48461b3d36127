import { ChangeFeedStartFrom, type Container, type CosmosClient } from '@azure/cosmos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReadRequest } from '../../src/sources/Source.js';
import { faults, type FaultHandle } from '../../src/emulator/index.js';
import { PartitionGoneError, TransientError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { needsEmulator, startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { drainAll, freshContainer, writeDocs, type Doc } from './helpers.js';

// @azure/cosmos 4.9 caches the promise of a container's partition key ranges per client and keeps it when it
// rejects: one /pkranges read that fails past the SDK's own retry poisons every later change feed read of that
// container through that client. These tests inject exactly that: 503s on the /pkranges reads of one
// container until the first change feed read has failed, then none.

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(done: () => boolean, ms = 15_000): Promise<void> {
  for (let waited = 0; !done() && waited < ms; waited += 50) await sleep(50);
}

/** 503 on every /pkranges read of `container` until removed. */
function unavailableRanges(container: Container): FaultHandle {
  return cosmos.emulator!.injectFault(faults.unavailable({ kind: 'pkranges', containerId: container.id }));
}

/** The same container through another client (its own routing map cache). */
function viaNewClient(container: Container): { client: CosmosClient; container: Container } {
  const client = cosmos.newClient();
  return { client, container: client.database(container.database.id).container(container.id) };
}

/** A CosmosSource that records the errors its reads throw. */
class RecordingSource<T> extends CosmosSource<T> {
  readonly failures: unknown[] = [];
  override async read(request: ReadRequest) {
    try {
      return await super.read(request);
    } catch (error) {
      this.failures.push(error);
      throw error;
    }
  }
}

const isRoutingMapFailure = (e: unknown): boolean => e instanceof TransientError && /partition key ranges failed/.test(e.message);

describe('a failed partition key range read cached by the SDK client', () => {
  it('poisons the raw SDK for good, even through a new Container reference (why the source clears it)', async (ctx) => {
    needsEmulator(cosmos, 'injecting 503s', ctx);
    const setup = await freshContainer(cosmos.client, 'pkr-sdk');
    const { container } = viaNewClient(setup);
    const fault = unavailableRanges(container);
    const readAll = (c: Container) =>
      c.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }).readNext();
    await expect(readAll(container)).rejects.toThrow(/injected fault 503/);
    fault.remove();
    // If these start passing, @azure/cosmos no longer keeps the failure and takeRoutingMapFailure can go.
    const error = await readAll(container).catch((e: unknown) => e as { code?: unknown; message: string });
    expect(error).toMatchObject({ message: expect.stringMatching(/injected fault 503/) });
    expect((error as { code?: unknown }).code).toBeUndefined();
    await expect(readAll(container.database.container(container.id))).rejects.toThrow(/injected fault 503/);
  });

  it('CosmosSource reports a TransientError (503) once, and the next read works', async (ctx) => {
    needsEmulator(cosmos, 'injecting 503s', ctx);
    const setup = await freshContainer(cosmos.client, 'pkr-source');
    const written = await writeDocs(setup, 120);
    const { container } = viaNewClient(setup);
    const source = new CosmosSource<Doc>(container);
    const [first] = await source.listPartitions(); // listing does not use the cache
    const fault = unavailableRanges(container);
    const error = await source.read({ partition: first!, from: 'beginning', maxItemCount: 10 }).catch((e: unknown) => e);
    fault.remove();
    expect(error).toBeInstanceOf(TransientError);
    expect((error as TransientError).statusCode).toBe(503);
    expect(isRoutingMapFailure(error)).toBe(true);
    const changes = await drainAll(source, new Map(), 50);
    expect(changes.map((c) => c.id).sort()).toEqual([...written].sort());
  });

  it("a failed forced refresh of the ranges after a split is dropped too: the next read sees the split", async (ctx) => {
    needsEmulator(cosmos, 'splitting a range and injecting 503s', ctx);
    const setup = await freshContainer(cosmos.client, 'pkr-split');
    await writeDocs(setup, 80);
    const { container } = viaNewClient(setup);
    const source = new CosmosSource<Doc>(container);
    const [first] = await source.listPartitions();
    const page = await source.read({ partition: first!, from: 'beginning', maxItemCount: 5 });
    cosmos.emulator!.split('db', setup.id, first!.id);
    const fault = unavailableRanges(container);
    const error = await source.read({ partition: first!, from: { position: page.position }, maxItemCount: 5 }).catch((e: unknown) => e);
    fault.remove();
    expect(error).toBeInstanceOf(TransientError);
    expect((error as TransientError).statusCode).toBe(503);
    await expect(source.read({ partition: first!, from: { position: page.position }, maxItemCount: 5 })).rejects.toThrow(PartitionGoneError);
  });

  it('a processor starting during the fault delivers every change once it is over', async (ctx) => {
    needsEmulator(cosmos, 'injecting 503s', ctx);
    const setup = await freshContainer(cosmos.client, 'pkr-feed');
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
    await database.containers.createIfNotExists({ id: 'pkr-leases', partitionKey: { paths: ['/id'] } });
    const prefix = `p${Date.now()}.`;
    const timing = { pollIntervalMs: 50, leaseAcquireIntervalMs: 200, leaseRenewIntervalMs: 1_000, leaseExpirationMs: 3_000, drainTimeoutMs: 500 };
    const start = (client: CosmosClient, source: CosmosSource<Doc>, seen: Set<string>) => {
      const feed = createChangeFeed<Doc>({
        source,
        leases: new CosmosLeaseStore({ container: client.database('db').container('pkr-leases') }),
        instanceName: 'host',
        leasePrefix: prefix,
        startFrom: 'beginning',
        ...timing,
      });
      const sub = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 50 })).subscribe((b) => {
        for (const c of b.changes) seen.add(c.id);
      });
      return async () => {
        await feed.stop();
        sub.unsubscribe();
      };
    };

    // A first run creates the leases and checkpoints them, so the next start needs no partition listing.
    const before = await writeDocs(setup, 40);
    const firstSeen = new Set<string>();
    const stopFirst = start(cosmos.client, new CosmosSource<Doc>(setup), firstSeen);
    await eventually(() => firstSeen.size >= before.length);
    await stopFirst();
    expect(firstSeen.size).toBe(before.length);

    // The next host starts with a fresh client while the container's /pkranges reads answer 503.
    const { client, container } = viaNewClient(setup);
    const source = new RecordingSource<Doc>(container);
    const fault = unavailableRanges(container);
    const seen = new Set<string>();
    const stop = start(client, source, seen);
    try {
      await eventually(() => source.failures.length > 0, 10_000);
      fault.remove();
      expect(source.failures.length).toBeGreaterThan(0);
      const after = await writeDocs(setup, 100, 'late');
      await eventually(() => after.every((id) => seen.has(id)));
      expect(after.filter((id) => !seen.has(id))).toEqual([]);
      // Every failure was the typed, retryable one: nothing was left as an unknown error.
      expect(source.failures.filter((e) => !isRoutingMapFailure(e))).toEqual([]);
    } finally {
      fault.remove();
      await stop();
    }
  });
});
