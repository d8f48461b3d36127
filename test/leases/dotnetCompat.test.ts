/**
 * The .NET lease scheme against the emulator, through the real client:
 * (a) a lease container written by the .NET v3 change feed processor (or the Functions trigger, which is the
 *     same processor with `LeaseContainerPrefix` as its name) is continued from its checkpoints;
 * (b) leases rxfeed writes in that scheme answer the queries the .NET processor / estimator and KEDA's
 *     `azure-cosmosdb` scaler send, with the fields they read.
 * Every id and field below is taken from the sources named next to it (see docs/compatibility.md).
 */
import type { Container } from '@azure/cosmos';
import { Subscription } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { fromDocument, toDocument } from '../../src/leases/protocol/cosmosDocuments.js';
import { dotnetLeasePrefix } from '../../src/leases/dotnetLeasePrefix.js';
import { estimateLag } from '../../src/estimator/index.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { drainPartition, freshContainer, sleep, writeDocs, type Doc } from '../cosmos/helpers.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { seedDotnetLeases } from '../support/dotnetLeases.js';

/** The account endpoint the .NET client would use; only its host enters the prefix. */
const ACCOUNT_ENDPOINT = 'https://shop.documents.azure.com:443/';
const PROCESSOR = 'orders-view';

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos?.stop();
});

async function leaseContainer(): Promise<Container> {
  const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
  const { container } = await database.containers.createIfNotExists({
    id: `leases-dotnet-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    partitionKey: { paths: ['/id'] },
  });
  return container;
}

async function until(done: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what()}`);
    await sleep(25);
  }
}

function runFeed(monitored: Container, leases: Container, prefix: string, seen: Change<Doc>[]) {
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource(monitored),
    leases: new CosmosLeaseStore({ container: leases }),
    instanceName: 'node-host-1',
    leasePrefix: prefix,
    leaseScheme: 'dotnet',
    startFrom: 'beginning', // were the .NET checkpoints ignored, everything would be delivered again
    pollIntervalMs: 50,
    leaseAcquireIntervalMs: 200,
    leaseRenewIntervalMs: 1_000,
    leaseExpirationMs: 5_000,
  });
  const subscription = new Subscription();
  subscription.add(
    feed.changes$.pipe(checkpointEvery({ count: 1, ms: 20 })).subscribe((batch) => {
      seen.push(...batch.changes);
    }),
  );
  return {
    feed,
    async stop() {
      await feed.stop();
      subscription.unsubscribe();
    },
  };
}

describe('leaseScheme: dotnet', () => {
  it('computes the .NET prefix: processor name, account host, database and container _rid', async () => {
    const monitored = await freshContainer(cosmos.client, 'prefix');
    const { resource: c } = await monitored.read();
    const { resource: d } = await monitored.database.read();
    // CosmosContainerExtensions.GetLeasePrefix: "{0}{1}_{2}" of prefix, Endpoint.Host, "{databaseRid}_{containerRid}"
    expect(await dotnetLeasePrefix({ container: monitored, endpoint: ACCOUNT_ENDPOINT, processorName: PROCESSOR })).toBe(
      `${PROCESSOR}shop.documents.azure.com_${d!._rid}_${c!._rid}`,
    );
    // A Functions trigger without LeaseContainerPrefix uses '' as the processor name.
    expect(await dotnetLeasePrefix({ container: monitored, endpoint: ACCOUNT_ENDPOINT, processorName: '' })).toBe(
      `shop.documents.azure.com_${d!._rid}_${c!._rid}`,
    );
  });

  // Without `.info` (a .NET host died while bootstrapping), rxfeed bootstraps too and must hit the .NET ids.
  it.each([
    ['with', true],
    ['without', false],
  ])('(a) continues a lease container written by the .NET processor from its checkpoints, %s its .info marker', { timeout: 30_000 }, async (_, withInfo) => {
    const monitored = await freshContainer(cosmos.client, 'from-dotnet');
    const leases = await leaseContainer();
    const prefix = await dotnetLeasePrefix({ container: monitored, endpoint: ACCOUNT_ENDPOINT, processorName: PROCESSOR });
    const source = new CosmosSource<Doc>(monitored);
    const before = await writeDocs(monitored, 40, 'old-');
    // The .NET processor's ContinuationToken is the change feed response's ETag, stored as is
    // (ChangeFeedPartitionKeyResultSetIteratorCore: "Change Feed uses etag as continuation token").
    const partitions = await source.listPartitions();
    expect(partitions).toHaveLength(4);
    const checkpoints = new Map<string, string>();
    for (const p of partitions) checkpoints.set(p.id, (await drainPartition(source, p, 'beginning')).position);
    for (const etag of checkpoints.values()) expect(etag).toMatch(/^"\d+"$/);
    const after = await writeDocs(monitored, 40, 'new-');

    // Documents exactly as the .NET v3 processor writes them (test/support/dotnetLeases.ts names the sources):
    // one released on StopAsync (Owner null), the others left by a host that died an hour ago (expired).
    await seedDotnetLeases(
      leases,
      prefix,
      partitions.map((p, i) => ({
        partition: p,
        owner: i === 0 ? null : 'a7c2f3e0-0d6b-4b7e-9d55-2f2f8f4d1c11',
        continuation: checkpoints.get(p.id)!,
        timestampMs: Date.now() - 3_600_000,
      })),
      { info: withInfo },
    );

    const seen: Change<Doc>[] = [];
    const run = runFeed(monitored, leases, prefix, seen);
    try {
      await until(() => after.every((id) => seen.some((c) => c.id === id)), 20_000, () => `saw ${seen.length} of ${after.length}`);
      await sleep(300); // a few more polls: nothing older may come
    } finally {
      await run.stop();
    }
    const ids = new Set(seen.map((c) => c.id));
    expect(before.filter((id) => ids.has(id))).toEqual([]);
    expect([...ids].sort()).toEqual([...after].sort());

    // The .NET documents were taken over in place: no new ids, checkpoints moved on, still .NET-shaped.
    const { resources } = await leases.items.readAll<Record<string, unknown>>().fetchAll();
    // (rxfeed writes `.info` when it bootstrapped; the lock is gone)
    expect(resources.map((d) => d.id).sort()).toEqual([`${prefix}.info`, ...partitions.map((p) => `${prefix}..${p.id}`)].sort());
    for (const p of partitions) {
      const doc = resources.find((d) => d.id === `${prefix}..${p.id}`)!;
      expect(doc.LeaseToken).toBe(p.id);
      expect(doc.version).toBe(0);
      expect(doc.ContinuationToken).toMatch(/^"\d+"$/);
      expect(Number(JSON.parse(doc.ContinuationToken as string))).toBeGreaterThanOrEqual(Number(JSON.parse(checkpoints.get(p.id)!)));
    }
  });

  it('(b) writes leases the .NET processor, its estimator and KEDA find and read', { timeout: 30_000 }, async () => {
    const monitored = await freshContainer(cosmos.client, 'to-dotnet');
    const leases = await leaseContainer();
    const prefix = await dotnetLeasePrefix({ container: monitored, endpoint: ACCOUNT_ENDPOINT, processorName: PROCESSOR });
    const written = await writeDocs(monitored, 30, 'x-');
    const seen: Change<Doc>[] = [];
    const run = runFeed(monitored, leases, prefix, seen);
    try {
      await until(() => written.every((id) => seen.some((c) => c.id === id)), 20_000, () => `saw ${seen.length} of ${written.length}`);
      await sleep(200);
    } finally {
      await run.stop();
    }
    const partitions = await new CosmosSource<Doc>(monitored).listPartitions();

    // The .NET processor and its estimator: DocumentServiceLeaseContainerCosmos.ListDocumentsAsync sends
    // "SELECT * FROM c WHERE STARTSWITH(c.id, '" + prefix + "')" with GetPartitionLeasePrefix() = prefix + "..".
    const partitionLeasePrefix = `${prefix}..`;
    const { resources: dotnet } = await leases.items
      .query<Record<string, unknown>>("SELECT * FROM c WHERE STARTSWITH(c.id, '" + partitionLeasePrefix + "')")
      .fetchAll();
    expect(dotnet.map((d) => d.LeaseToken).sort()).toEqual(partitions.map((p) => p.id).sort());
    for (const doc of dotnet) {
      const p = partitions.find((x) => x.id === doc.LeaseToken)!;
      // DocumentServiceLeaseConverter picks the class by "version" (0: DocumentServiceLeaseCore, 1: …CoreEpk)
      expect(doc.version).toBe(0);
      expect(doc.id).toBe(`${partitionLeasePrefix}${p.id}`);
      expect(doc.FeedRange).toMatchObject({ Range: { min: p.range.minInclusive, max: p.range.maxExclusive } });
      expect(doc.Owner === null || typeof doc.Owner === 'string').toBe(true);
      // ChangeFeedStartFromContinuationAndFeedRange sends it as If-None-Match: the raw ETag
      expect(doc.ContinuationToken).toMatch(/^"\d+"$/);
      expect(Number.isNaN(Date.parse(doc.timestamp as string))).toBe(false);
      expect(Object.values(doc.properties as object).every((v) => typeof v === 'string')).toBe(true);
      expect(doc.Mode).toBe('Incremental Feed');
      expect(typeof doc._etag).toBe('string');
    }

    // KEDA azure_cosmosdb_scaler.go queryLeasesPage: "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)" with
    // prefix = processorName + cosmosDBAccountShortName(dataEndpoint) + "."; documents without LeaseToken
    // are bookkeeping and skipped; version 0 leases are read by partition key range id = LeaseToken.
    const kedaPrefix = `${PROCESSOR}${new URL(ACCOUNT_ENDPOINT).hostname.split('.')[0]}.`;
    const { resources: keda } = await leases.items
      .query<Record<string, unknown>>({ query: 'SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)', parameters: [{ name: '@prefix', value: kedaPrefix }] })
      .fetchAll();
    const kedaLeases = keda.filter((d) => typeof d.LeaseToken === 'string' && d.LeaseToken !== '');
    expect(kedaLeases.map((d) => d.id).sort()).toEqual(dotnet.map((d) => d.id).sort());
    // the rest is exactly the bootstrap marker, without a LeaseToken (as the .NET `{ id }` marker), and the
    // bootstrap's lock while it is kept (an expiration after `.info` landed), without one either
    expect(keda.filter((d) => !kedaLeases.includes(d)).map((d) => d.id).filter((id) => id !== `${prefix}.lock`)).toEqual([`${prefix}.info`]);

    // Each ContinuationToken is a position the service accepts (what the estimator and KEDA read from):
    // nothing after it now, exactly one change after one more write.
    const source = new CosmosSource<Doc>(monitored);
    const fromCheckpoint = async () => {
      let n = 0;
      for (const doc of dotnet) {
        const p = partitions.find((x) => x.id === doc.LeaseToken)!;
        n += (await drainPartition(source, p, { position: doc.ContinuationToken as string })).changes.length;
      }
      return n;
    };
    expect(await fromCheckpoint()).toBe(0);
    // rxfeed's own estimator reads the .NET layout with the same naming options as the processor
    const lagOf = async () =>
      (await estimateLag({ source, leases: new CosmosLeaseStore({ container: leases }), leasePrefix: prefix, leaseScheme: 'dotnet' })).map((l) => [l.leaseToken, l.estimatedLag]);
    expect((await lagOf()).sort()).toEqual(partitions.map((p) => [p.id, 0]).sort());
    await writeDocs(monitored, 1, 'late-');
    expect(await fromCheckpoint()).toBe(1);
    expect((await lagOf()).reduce((sum, [, lag]) => sum + (lag as number), 0)).toBe(1);
  });

  it('refuses the .NET scheme without the prefix it needs', () => {
    expect(() =>
      createChangeFeed({ source: new CosmosSource(cosmos.client.database('db').container('x')), leases: new CosmosLeaseStore(cosmos.client.database('db').container('y')), leasePrefix: 'test.', instanceName: 'h', leaseScheme: 'dotnet' }),
    ).toThrow(/dotnetLeasePrefix/);
    // a prefix written with the separator would make ids `<prefix>....<token>`
    expect(() =>
      createChangeFeed({ source: new CosmosSource(cosmos.client.database('db').container('x')), leases: new CosmosLeaseStore(cosmos.client.database('db').container('y')), instanceName: 'h', leaseScheme: 'dotnet', leasePrefix: 'p..' }),
    ).toThrow(/leasePrefix: 'p\.\.' ends with '\.': with leaseScheme 'dotnet' pass the \.NET prefix without the '\.\.' separator/);
  });
});

describe('markers of the .NET scheme', () => {
  it('are written without LeaseToken, and the .NET { id, ttl } lock reads with its _ts as timestamp', () => {
    const marker = { id: 'p.lock', leaseToken: '', feedRange: undefined, owner: 'h', continuation: null, timestampMs: 1_700_000_000_000, epoch: 0, mode: 'latestVersion' as const, properties: {} };
    const doc = toDocument(marker);
    expect(doc).toEqual({ id: 'p.lock', Owner: 'h', timestamp: '2023-11-14T22:13:20.000Z', epoch: 0 });
    expect(fromDocument({ ...doc, _etag: '"1"' })).toMatchObject({ id: 'p.lock', leaseToken: '', owner: 'h', timestampMs: 1_700_000_000_000 });
    // DocumentServiceLeaseStoreCosmos.LockDocument: { "id", "ttl" }
    expect(fromDocument({ id: 'p.lock', ttl: 60, _ts: 1_700_000_000, _etag: '"2"' })).toMatchObject({ leaseToken: '', owner: null, timestampMs: 1_700_000_000_000 });
    // a lease without LeaseToken is still corrupt
    expect(fromDocument({ id: 'p..0', _etag: '"3"' })).toBeInstanceOf(Error);
  });
  it('keep the properties of a lock handed over at a stop (the leases its unfinished bootstrap knew of), and only then carry any', () => {
    const handed = { id: 'p.lock', leaseToken: '', feedRange: undefined, owner: null, continuation: null, timestampMs: 1_700_000_000_000, epoch: 0, mode: 'latestVersion' as const, properties: { 'rxfeed.bootstrapLeases': '[["0","","FF"]]' } };
    const doc = toDocument(handed);
    expect(doc).toEqual({ id: 'p.lock', Owner: null, timestamp: '2023-11-14T22:13:20.000Z', epoch: 0, properties: { 'rxfeed.bootstrapLeases': '[["0","","FF"]]' } });
    expect(fromDocument({ ...doc, _etag: '"1"' })).toMatchObject({ owner: null, properties: { 'rxfeed.bootstrapLeases': '[["0","","FF"]]' } });
  });
});
