import { firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import type { Container } from '@azure/cosmos';
import { CredentialsError, InvalidOptionsError, ResourceGoneError } from '../../src/errors/index.js';
import type { NewLease } from '../../src/leases/Lease.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { fromDocument, toDocument } from '../../src/leases/protocol/cosmosDocuments.js';
import { createLeaseCoordinator } from '../../src/leases/createLeaseCoordinator.js';
import { FakePartitions } from './hosts.js';
import { leaseStoreConformance } from '../support/leaseStoreConformance.js';
import type { TestCosmos } from '../support/cosmos.js';
import { needsEmulator, startTestCosmos } from '../support/cosmos.js';
import { faults } from '../../src/emulator/index.js';
import { VirtualScheduler } from './virtualScheduler.js';
import { LeaseConflictError } from '../../src/errors/LeaseConflictError.js';
import type { Lease } from '../../src/leases/Lease.js';

let cosmos: TestCosmos;

const newLease = (id: string): NewLease => ({
  id,
  leaseToken: id.slice(id.indexOf('.') + 1),
  feedRange: undefined,
  owner: null,
  continuation: null,
  timestampMs: 0,
  epoch: 0,
  mode: 'latestVersion',
  properties: {},
});
let byId: Container;
let byPartitionKey: Container;

beforeAll(async () => {
  cosmos = await startTestCosmos();
  const { database } = await cosmos.client.databases.createIfNotExists({ id: 'rxfeed-leases' });
  ({ container: byId } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } }));
  ({ container: byPartitionKey } = await database.containers.createIfNotExists({
    id: 'leases-pk',
    partitionKey: { paths: ['/partitionKey'] },
  }));
});
afterAll(async () => {
  await cosmos?.stop();
});

leaseStoreConformance('CosmosLeaseStore (/id)', async () => ({
  store: new CosmosLeaseStore({ container: byId }),
  writeCorrupt: async (id) => {
    await byId.items.create({ id, LeaseToken: 7, Owner: { not: 'a string' } });
  },
}));

leaseStoreConformance('CosmosLeaseStore (/partitionKey)', async () => ({
  store: new CosmosLeaseStore({ container: byPartitionKey }),
  writeCorrupt: async (id) => {
    await byPartitionKey.items.create({ id, partitionKey: id, timestamp: 'yesterday', LeaseToken: '0' });
  },
}));

describe('CosmosLeaseStore', () => {
  it('writes the .NET field names and reads a document written by the .NET processor', async () => {
    const store = new CosmosLeaseStore({ container: byId });
    const lease = (await store.createIfAbsent({
      id: 'net.0',
      leaseToken: '0',
      feedRange: { minInclusive: '', maxExclusive: 'FF' },
      owner: 'host-a',
      continuation: '"42"',
      timestampMs: Date.UTC(2024, 1, 2, 10, 0, 0),
      epoch: 4,
      mode: 'latestVersion',
      properties: { a: 'b' },
    }))!;
    const { resource } = await byId.item('net.0', 'net.0').read();
    expect(resource).toMatchObject({
      id: 'net.0',
      version: 0,
      LeaseToken: '0',
      FeedRange: { Range: { min: '', max: 'FF' } },
      Owner: 'host-a',
      ContinuationToken: '"42"',
      timestamp: '2024-02-02T10:00:00.000Z',
      properties: { a: 'b' },
      Mode: 'Incremental Feed',
      epoch: 4,
      _etag: lease.etag,
    });

    // As .NET writes it: 7 fractional digits, EffectiveRange variant, no epoch, owner released.
    await byId.items.create({
      id: 'net.1',
      version: 1,
      LeaseToken: '00-7F',
      FeedRange: { EffectiveRange: { min: '00', max: '7F' } },
      Owner: null,
      ContinuationToken: null,
      timestamp: '2024-02-02T10:00:00.1234567Z',
      properties: {},
    });
    const net = (await store.read('net.1'))!;
    expect(net).toMatchObject({ leaseToken: '00-7F', owner: null, epoch: 0, continuation: null, mode: undefined });
    expect(net.feedRange).toEqual({ minInclusive: '00', maxExclusive: '7F' });
    expect(net.timestampMs).toBe(Date.UTC(2024, 1, 2, 10, 0, 0, 123));
  });

  it('creates the container when asked, and says so when it is missing otherwise', async () => {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'rxfeed-leases' });
    const missing = new CosmosLeaseStore({ container: database.container('absent-leases') });
    await expect(missing.list('x.')).rejects.toBeInstanceOf(ResourceGoneError);
    const created = new CosmosLeaseStore({ container: database.container('created-leases'), createIfMissing: true });
    expect((await created.list('x.')).leases).toEqual([]);
    const { resource } = await database.container('created-leases').read();
    expect(resource?.partitionKey?.paths).toEqual(['/id']);
  });

  it('takes the container alone too', async () => {
    const store = new CosmosLeaseStore(byId, { partitionKeyPath: '/id' });
    expect((await store.list('nothing-here.')).leases).toEqual([]);
    expect(() => new CosmosLeaseStore({} as never)).toThrow(/container/);
  });

  it('refuses a container partitioned on another path, on every call, with what to change', async () => {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'rxfeed-leases' });
    const { container } = await database.containers.createIfNotExists({ id: 'wrong-pk', partitionKey: { paths: ['/tenant'] } });
    const store = new CosmosLeaseStore({ container });
    const error = await store.list('x.').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as InvalidOptionsError).option).toBe('container');
    expect((error as Error).message).toMatch(/wrong-pk is partitioned on \/tenant.*partitioned on \/id/);
    await expect(store.read('x.0')).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(store.createIfAbsent(newLease('x.0'))).rejects.toBeInstanceOf(InvalidOptionsError);
    const { resources } = await container.items.readAll().fetchAll();
    expect(resources).toEqual([]);
  });

  it('a processor on a lease container partitioned on the wrong path stops at once with that error (no retry storm)', async () => {
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'rxfeed-leases' });
    const { container } = await database.containers.createIfNotExists({ id: 'wrong-pk', partitionKey: { paths: ['/tenant'] } });
    const feed = createChangeFeed({ source: new MemorySource({ partitions: 2 }), leases: new CosmosLeaseStore({ container }), leasePrefix: 'test.', instanceName: 'a' });
    const failure = await firstValueFrom(feed.changes$).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(InvalidOptionsError);
    expect((failure as Error).message).toMatch(/partitioned on \/tenant/);
  });

  it("sends a new store's first read or listing alongside its check of the container, not after it", async (ctx) => {
    const emulator = needsEmulator(cosmos, 'delaying container reads', ctx);
    // The container check answers 300 ms late: a read sent only after its answer would arrive that much later.
    const slow = emulator.injectFault(faults.latency(300, { kind: 'container', containerId: byId.id }));
    try {
      emulator.clearRequests();
      expect(await new CosmosLeaseStore({ container: byId }).read('alongside.0')).toBeUndefined();
      await new CosmosLeaseStore({ container: byId }).list('alongside.');
      const log = emulator.requests().filter((r) => r.containerId === byId.id);
      const checks = log.filter((r) => r.kind === 'container');
      const [read] = log.filter((r) => r.kind === 'read');
      const [listing] = log.filter((r) => r.kind === 'query');
      expect(checks).toHaveLength(2);
      // Each arrived before its store's check was answered (the emulator's clock: an order, not a duration).
      expect(read!.atMs).toBeLessThan(checks[0]!.atMs + 300);
      expect(listing!.atMs).toBeLessThan(checks[1]!.atMs + 300);
    } finally {
      slow.remove();
    }
    // A store whose check fails reports that failure, not the answer of the read sent alongside.
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'rxfeed-leases' });
    const { container: wrong } = await database.containers.createIfNotExists({ id: 'wrong-pk', partitionKey: { paths: ['/tenant'] } });
    await expect(new CosmosLeaseStore({ container: wrong }).read('x.0')).rejects.toBeInstanceOf(InvalidOptionsError);
  });

  it('checks a stated partitionKeyPath against the container before writing anything', async () => {
    // Unchecked, a lease written to a container partitioned on /partitionKey as if it were on /id is listed
    // but never found by id: the coordinator would see leases it cannot read or renew.
    const store = new CosmosLeaseStore({ container: byPartitionKey, partitionKeyPath: '/id' });
    const error = await store.createIfAbsent(newLease('stated.0')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as InvalidOptionsError).option).toBe('partitionKeyPath');
    expect((error as Error).message).toMatch(/partitioned on \/partitionKey, not \/id: pass partitionKeyPath: '\/partitionKey'/);
    expect((await new CosmosLeaseStore({ container: byPartitionKey }).list('stated.')).leases).toEqual([]);
    const right = new CosmosLeaseStore({ container: byPartitionKey, partitionKeyPath: '/partitionKey' });
    expect(await right.createIfAbsent(newLease('stated.1'))).toMatchObject({ id: 'stated.1' });
    expect(await right.read('stated.1')).toMatchObject({ id: 'stated.1' });
  });

  it('maps rejected credentials to CredentialsError', async (ctx) => {
    needsEmulator(cosmos, 'injecting a 403 (a real endpoint cannot be told to reject good credentials)', ctx);
    const fault = cosmos.emulator!.injectFault({ match: { containerId: 'leases' }, action: { status: 403, message: 'forbidden' } });
    try {
      const store = new CosmosLeaseStore({ container: byId, partitionKeyPath: '/id' });
      await expect(store.list('x.')).rejects.toBeInstanceOf(CredentialsError);
      await expect(store.read('x.0')).rejects.toBeInstanceOf(CredentialsError);
    } finally {
      fault.remove();
    }
  });
});

describe('coordinators over CosmosLeaseStore (emulator, real time, short timings)', () => {
  it('three hosts with their own clients bootstrap once, share the leases, and take over the leases of a stopped host', async () => {
    const clients = [cosmos.newClient(), cosmos.newClient(), cosmos.newClient()];
    const parts = new FakePartitions(6);
    const timings = { leaseAcquireIntervalMs: 150, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000, drainTimeoutMs: 200 };
    const hosts = clients.map((client, i) =>
      createLeaseCoordinator({
        store: new CosmosLeaseStore({ container: client.database('rxfeed-leases').container('leases') }),
        listPartitions: parts.listPartitions,
        owner: `host-${i}`,
        prefix: 'coord.',
        ...timings,
      }),
    );
    const errors: unknown[] = [];
    for (const h of hosts) {
      h.events$.subscribe((e) => e.type === 'error' && errors.push(e.error));
      h.acquired$.subscribe();
    }
    const store = new CosmosLeaseStore({ container: byId });
    const counts = async () => {
      const { leases } = await store.list('coord.');
      const c = new Map<string, number>();
      for (const l of leases.filter((x) => !x.id.startsWith('coord..'))) if (l.owner) c.set(l.owner, (c.get(l.owner) ?? 0) + 1);
      return c;
    };
    const waitFor = async (done: () => Promise<boolean>) => {
      for (let i = 0; i < 100 && !(await done()); i++) await new Promise((r) => setTimeout(r, 50));
    };

    const ids = async () => (await store.list('coord.')).leases.map((l) => l.id).sort();
    try {
      await waitFor(async () => [...(await counts()).values()].join() === '2,2,2');
      expect([...(await counts()).values()].sort()).toEqual([2, 2, 2]);
      // The bootstrap holds its lock one lease expiration after `.info` lands (a host reading late must not
      // bootstrap again), then deletes it.
      await waitFor(async () => !(await ids()).includes('coord..lock'));
      expect(await ids()).toEqual(['coord..info', ...parts.list.map((p) => `coord.${p.id}`)].sort());

      await hosts[0]!.stop(); // released leases go to the others
      await waitFor(async () => [...(await counts()).values()].join() === '3,3');
      expect([...(await counts()).values()].sort()).toEqual([3, 3]);
      expect(errors.map(String)).toEqual([]);
    } finally {
      await Promise.all(hosts.map((h) => h.stop()));
    }
    expect((await counts()).size).toBe(0);
  });
});

describe('markers in the .NET format', () => {
  it('a bare { id } .info document counts as bootstrapped, and is not reported as corrupt', async () => {
    await byId.items.create({ id: 'dotnet..info' });
    const coordinator = createLeaseCoordinator({
      store: new CosmosLeaseStore({ container: byId }),
      listPartitions: new FakePartitions(2).listPartitions,
      owner: 'a',
      prefix: 'dotnet.',
      leaseAcquireIntervalMs: 50,
      leaseRenewIntervalMs: 100,
      leaseExpirationMs: 500,
    });
    const events: string[] = [];
    coordinator.events$.subscribe((e) => events.push(e.type));
    coordinator.acquired$.subscribe();
    await new Promise((r) => setTimeout(r, 300));
    await coordinator.stop();
    const { leases, corrupt } = await new CosmosLeaseStore({ container: byId }).list('dotnet.');
    // nothing bootstrapped: .info says it was done; the marker reads as one (empty LeaseToken), not as corrupt
    // (with no lease under the prefix there is nothing to read, which the host says with a stall event)
    expect(leases.map((l) => [l.id, l.leaseToken])).toEqual([['dotnet..info', '']]);
    expect(corrupt).toEqual([]);
    expect(events.filter((e) => e !== 'stall')).toEqual([]);
  });
});

describe('lease documents', () => {
  it('round-trip through toDocument/fromDocument', () => {
    const lease = {
      id: 'p.AA-BB',
      leaseToken: 'AA-BB',
      feedRange: { minInclusive: 'AA', maxExclusive: 'BB' },
      owner: 'x',
      continuation: 'c',
      timestampMs: 1_700_000_000_000,
      epoch: 9,
      mode: 'allVersionsAndDeletes' as const,
      properties: { k: 'v' },
    };
    const doc = toDocument(lease, '/partitionKey');
    expect(doc).toMatchObject({ version: 1, partitionKey: 'p.AA-BB', Mode: 'Full-Fidelity Feed' });
    expect(fromDocument({ ...doc, _etag: '"e"' })).toEqual({ ...lease, etag: '"e"' });
  });

  it('writes the same fields in the same order whatever the lease (the usual lease is built apart)', () => {
    const base = { id: 'p.AA-BB', owner: 'x', continuation: 'c', timestampMs: 1_700_000_000_000, epoch: 9, properties: { k: 'v' } };
    const range = { minInclusive: 'AA', maxExclusive: 'BB' };
    const cases: [Parameters<typeof toDocument>[0], '/id' | '/partitionKey', string][] = [
      [{ ...base, leaseToken: 'AA-BB', feedRange: range, mode: 'latestVersion' }, '/id', '{"id":"p.AA-BB","version":1,"LeaseToken":"AA-BB","FeedRange":{"Range":{"min":"AA","max":"BB","isMinInclusive":true,"isMaxInclusive":false}},"Owner":"x","ContinuationToken":"c","timestamp":"2023-11-14T22:13:20.000Z","properties":{"k":"v"},"Mode":"Incremental Feed","epoch":9}'],
      [{ ...base, leaseToken: '3', feedRange: range, mode: 'latestVersion' }, '/id', '{"id":"p.AA-BB","version":0,"LeaseToken":"3","FeedRange":{"Range":{"min":"AA","max":"BB","isMinInclusive":true,"isMaxInclusive":false}},"Owner":"x","ContinuationToken":"c","timestamp":"2023-11-14T22:13:20.000Z","properties":{"k":"v"},"Mode":"Incremental Feed","epoch":9}'],
      [{ ...base, leaseToken: 'AA-B', feedRange: range, mode: 'latestVersion' }, '/id', '{"id":"p.AA-BB","version":0,"LeaseToken":"AA-B","FeedRange":{"Range":{"min":"AA","max":"BB","isMinInclusive":true,"isMaxInclusive":false}},"Owner":"x","ContinuationToken":"c","timestamp":"2023-11-14T22:13:20.000Z","properties":{"k":"v"},"Mode":"Incremental Feed","epoch":9}'],
      [{ ...base, leaseToken: 'AA-BB', feedRange: range, mode: 'latestVersion' }, '/partitionKey', '{"id":"p.AA-BB","partitionKey":"p.AA-BB","version":1,"LeaseToken":"AA-BB","FeedRange":{"Range":{"min":"AA","max":"BB","isMinInclusive":true,"isMaxInclusive":false}},"Owner":"x","ContinuationToken":"c","timestamp":"2023-11-14T22:13:20.000Z","properties":{"k":"v"},"Mode":"Incremental Feed","epoch":9}'],
      [{ ...base, leaseToken: '3', feedRange: undefined, mode: undefined }, '/id', '{"id":"p.AA-BB","version":0,"LeaseToken":"3","Owner":"x","ContinuationToken":"c","timestamp":"2023-11-14T22:13:20.000Z","properties":{"k":"v"},"epoch":9}'],
    ];
    for (const [lease, path, json] of cases) {
      const doc = toDocument(lease, path);
      expect(JSON.stringify(doc)).toBe(json);
      expect(Object.values(doc)).not.toContain(undefined);
      expect(fromDocument({ ...doc, _etag: '"e"' })).toEqual({ ...lease, etag: '"e"' });
    }
  });

  it.each([
    [{ LeaseToken: 1 }, /LeaseToken/],
    [{ Owner: 5 }, /Owner/],
    [{ timestamp: 'soon' }, /timestamp/],
    [{ epoch: -1 }, /epoch/],
    [{ properties: { a: 1 } }, /properties/],
    [{ FeedRange: { Range: {} } }, /FeedRange/],
    [{ Mode: 'Weird' }, /Mode/],
  ])('%j is corrupt', (patch, problem) => {
    const doc = { ...toDocument({ id: 'p.0', leaseToken: '0', feedRange: undefined, owner: null, continuation: null, timestampMs: 0, epoch: 0, mode: undefined, properties: {} }), _etag: '"1"', ...patch };
    const result = fromDocument(doc as Record<string, unknown>);
    expect(result).toMatchObject({ documentId: 'p.0', problem: expect.stringMatching(problem) });
  });
});

describe('CosmosLeaseStore grouped writes', () => {
  /** `n` fresh leases under their own prefix, as stored. */
  const created = async (store: CosmosLeaseStore, prefix: string, n: number): Promise<Lease[]> =>
    Promise.all(Array.from({ length: n }, async (_, i) => (await store.createIfAbsent(newLease(`${prefix}.${i}`)))!));
  const sent = (emulator: { requests(): readonly { kind: string }[] }, kind: string) => emulator.requests().filter((r) => r.kind === kind).length;

  it('sends replaces issued together as one bulk request, each answered as a replace of its own would be', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'counting requests', ctx);
    const store = new CosmosLeaseStore({ container: byId });
    // Created through another store: this one has written none of them, so none waits out a just-written lease's
    // window (on a loaded machine the creates land apart, and such waits would end apart: groups of one).
    const [a, b, c, d, e] = await created(new CosmosLeaseStore({ container: byId }), `grouped-${Date.now()}`, 5);
    const changedBehind = await new CosmosLeaseStore({ container: byId, groupWritesMs: 0 }).replace({ ...d!, owner: 'other' });
    await byId.item(e!.id, e!.id).delete();
    emulator.clearRequests();

    const outcomes = await Promise.allSettled([a, b, c, d, e].map((l) => store.replace({ ...l!, owner: 'me', continuation: `at-${l!.id}` })));

    // One bulk request per physical partition of the lease container (this one has several).
    expect(sent(emulator, 'batch')).toBeLessThanOrEqual((await byId.getFeedRanges()).length);
    expect(sent(emulator, 'replace')).toBe(0);
    for (const [i, l] of [a, b, c].entries()) {
      const outcome = outcomes[i]!;
      expect(outcome.status).toBe('fulfilled');
      const written = (outcome as PromiseFulfilledResult<Lease>).value;
      expect(written).toMatchObject({ id: l!.id, owner: 'me', continuation: `at-${l!.id}` });
      expect(written.etag).not.toBe(l!.etag);
      expect(await store.read(l!.id)).toEqual(written);
    }
    expect(outcomes[3]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ kind: 'changed' }) });
    expect((outcomes[3] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseConflictError);
    expect(outcomes[4]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ kind: 'missing' }) });
    expect(await store.read(d!.id)).toEqual(changedBehind);
  });

  it('sends creates issued together as one bulk request: each created lease, or undefined where the id exists', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'counting requests', ctx);
    const store = new CosmosLeaseStore({ container: byId });
    const prefix = `create-${Date.now()}`;
    const [existing] = await created(new CosmosLeaseStore({ container: byId }), prefix, 1);
    emulator.clearRequests();
    const results = await Promise.all([0, 1, 2, 3].map((i) => store.createIfAbsent({ ...newLease(`${prefix}.${i}`), owner: 'me' })));
    expect(sent(emulator, 'batch')).toBeLessThanOrEqual((await byId.getFeedRanges()).length);
    expect(sent(emulator, 'create')).toBe(0);
    expect(results[0]).toBeUndefined();
    expect(await store.read(existing!.id)).toEqual(existing);
    for (const i of [1, 2, 3]) {
      expect(results[i]).toMatchObject({ id: `${prefix}.${i}`, owner: 'me' });
      expect(await store.read(`${prefix}.${i}`)).toEqual(results[i]);
    }
  });

  it('sends creates again one by one when their bulk request fails, answering a create that had landed with its lease', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'injecting a fault', ctx);
    const store = new CosmosLeaseStore({ container: byId });
    const prefix = `recreate-${Date.now()}`;
    const ranges = (await byId.getFeedRanges()).length;
    expect(ranges).toBeGreaterThan(1);
    const fault = emulator.injectFault({ match: { kind: 'batch' }, action: { status: 500 }, times: 1 });
    try {
      emulator.clearRequests();
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => store.createIfAbsent(newLease(`${prefix}.${i}`))));
      for (const [i, lease] of results.entries()) {
        expect(lease).toMatchObject({ id: `${prefix}.${i}` });
        expect(await store.read(`${prefix}.${i}`)).toEqual(lease);
      }
      expect(sent(emulator, 'batch')).toBeGreaterThan(1); // one failed, the others landed
      expect(sent(emulator, 'create')).toBe(12);
    } finally {
      fault.remove();
    }
  });

  it('takes what landed of a bulk request that lands partly, and sends its failed operations again on their own', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'injecting a fault', ctx);
    const store = new CosmosLeaseStore({ container: byId });
    const leases = await created(store, `partly-${Date.now()}`, 9);
    // Inside the bulk, every third operation is throttled, timed out or refused for now; the others land.
    const failures = [{ status: 429, substatus: 3200, retryAfterMs: 5 }, { status: 408 }, { status: 503 }];
    let failed = 0;
    const fault = emulator.injectFault({ match: { kind: 'batch' }, action: { operations: (i) => (i % 3 === 1 ? failures[failed++ % 3] : undefined) } });
    try {
      emulator.clearRequests();
      const written = await Promise.all(leases.map((l) => store.replace({ ...l, owner: 'me', continuation: `moved-${l.id}` })));
      fault.remove();
      expect(failed).toBeGreaterThan(0);
      expect(written.map((l) => l.continuation)).toEqual(leases.map((l) => `moved-${l.id}`));
      for (const l of written) expect(await store.read(l.id)).toEqual(l);
      // Only the failed operations were sent again, each on its own.
      expect(sent(emulator, 'replace')).toBe(failed);
    } finally {
      fault.remove();
    }
  });

  it('sends a group again write by write when its bulk request fails, and takes a write that had landed as written', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'injecting a fault', ctx);
    const store = new CosmosLeaseStore({ container: byId });
    // Enough leases that the SDK splits the bulk over the container's physical partitions: one of those
    // requests fails, the others land, and the whole call fails.
    const leases = await created(store, `regroup-${Date.now()}`, 12);
    const ranges = (await byId.getFeedRanges()).length;
    expect(ranges).toBeGreaterThan(1);
    const fault = emulator.injectFault({ match: { kind: 'batch' }, action: { status: 500 }, times: 1 });
    try {
      emulator.clearRequests();
      const written = await Promise.all(leases.map((l) => store.replace({ ...l, continuation: `moved-${l.id}` })));
      expect(written.map((l) => l.continuation)).toEqual(leases.map((l) => `moved-${l.id}`));
      for (const l of written) expect(await store.read(l.id)).toEqual(l);
      expect(sent(emulator, 'batch')).toBeGreaterThan(1); // one failed, the others landed
      expect(sent(emulator, 'replace')).toBe(leases.length);
    } finally {
      fault.remove();
    }
    // A conflict met when sending again is still a conflict when the stored lease is not this write.
    const [lease] = await created(store, `regroup-conflict-${Date.now()}`, 1);
    const [other] = await created(store, `regroup-other-${Date.now()}`, 1);
    await new CosmosLeaseStore({ container: byId, groupWritesMs: 0 }).replace({ ...lease!, owner: 'someone' });
    const again = emulator.injectFault({ match: { kind: 'batch' }, action: { status: 500 }, times: 1 });
    try {
      const outcomes = await Promise.allSettled([store.replace({ ...lease!, owner: 'me' }), store.replace({ ...other!, owner: 'me' })]);
      expect(outcomes[0]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ kind: 'changed' }) });
      expect(outcomes[1]).toMatchObject({ status: 'fulfilled', value: expect.objectContaining({ owner: 'me' }) });
    } finally {
      again.remove();
    }
  });

  it('sends a write alone when nothing else is written with it, and every write alone with groupWritesMs 0', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'counting requests', ctx);
    const prefix = `alone-${Date.now()}`;
    const [one, ...rest] = await created(new CosmosLeaseStore({ container: byId }), prefix, 4);
    emulator.clearRequests();
    await new CosmosLeaseStore({ container: byId }).replace({ ...one!, owner: 'me' });
    await Promise.all(rest.map((l) => new CosmosLeaseStore({ container: byId, groupWritesMs: 0 }).replace({ ...l!, owner: 'me' })));
    expect(sent(emulator, 'replace')).toBe(4);
    expect(sent(emulator, 'batch')).toBe(0);
  });

  it('sends writes issued together without waiting for a timer: on the next turn of the event loop, as one group', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'counting requests', ctx);
    // A scheduler that is never advanced: a write that waited for one of its timers would never leave.
    const store = new CosmosLeaseStore({ container: byId, groupWritesMs: 1_000, scheduler: new VirtualScheduler() });
    const leases = await created(new CosmosLeaseStore({ container: byId }), `turn-${Date.now()}`, 3);
    emulator.clearRequests();
    const written = await Promise.all(leases.map((l) => store.replace({ ...l, continuation: 'moved' })));
    expect(written.map((l) => l.continuation)).toEqual(['moved', 'moved', 'moved']);
    expect(sent(emulator, 'replace')).toBe(0);
    expect(sent(emulator, 'batch')).toBeGreaterThanOrEqual(1);
  });

  it('holds a write of a lease written less than groupWritesMs ago until then, and sends what came meanwhile with it', async (ctx) => {
    const emulator = needsEmulator(cosmos, 'counting requests', ctx);
    const clock = new VirtualScheduler();
    const store = new CosmosLeaseStore({ container: byId, groupWritesMs: 1_000, scheduler: clock });
    const [a, b, c] = await created(new CosmosLeaseStore({ container: byId }), `window-${Date.now()}`, 3);
    await store.read(a!.id); // the store's first call reads the container definition, over the network
    emulator.clearRequests();
    const first = store.replace({ ...a!, continuation: 'one' });
    await clock.advance(0);
    const written = await first;
    // Another lease goes at once …
    const other = store.replace({ ...b!, continuation: 'one' });
    await clock.advance(0);
    await other;
    expect(sent(emulator, 'replace')).toBe(2);
    // … the same lease again waits for the window (while another lease's write goes at once), and leaves
    // with the writes of other leases due by then.
    const again = store.replace({ ...written, continuation: 'two' });
    await clock.advance(500);
    const otherAgain = store.replace({ ...(await other), continuation: 'two' });
    const alongside = store.replace({ ...c!, continuation: 'one' });
    await clock.advance(0);
    expect((await alongside).continuation).toBe('one');
    await clock.advance(499);
    await store.read(a!.id); // a round trip: a write sent by now would be in the log
    expect(sent(emulator, 'replace')).toBe(3);
    await clock.advance(500);
    expect((await again).continuation).toBe('two');
    expect((await otherAgain).continuation).toBe('two');
    expect(sent(emulator, 'batch')).toBeGreaterThanOrEqual(1); // one per physical partition of the two
    expect(sent(emulator, 'replace')).toBe(3);
  });

  it.each([-1, Number.NaN, Infinity, '5', 1_001])('rejects groupWritesMs %s at construction', (groupWritesMs) => {
    expect(() => new CosmosLeaseStore({ container: byId, groupWritesMs: groupWritesMs as number })).toThrow(InvalidOptionsError);
  });
});
