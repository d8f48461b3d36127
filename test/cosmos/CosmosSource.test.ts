import { CosmosClient } from '@azure/cosmos';
import { Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { StartFrom } from '../../src/core/Partition.js';
import { CosmosEmulator, faults } from '../../src/emulator/index.js';
import {
  CredentialsError,
  InvalidOptionsError,
  PartitionGoneError,
  ResourceGoneError,
  TransientError,
} from '../../src/errors/index.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { needsEmulator, startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { drainAll, drainPartition, freshContainer, writeDocs, type Doc } from './helpers.js';

let cosmos: TestCosmos;

beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

const ids = (changes: readonly Change<unknown>[]): string[] => changes.map((c) => c.id).sort();

describe('CosmosSource: partitions and start positions', () => {
  it('lists the container ranges as partitions covering the whole key space', async () => {
    const container = await freshContainer(cosmos.client);
    const source = new CosmosSource<Doc>(container);
    const partitions = await source.listPartitions();
    expect(partitions.length).toBe(cosmos.emulator ? 4 : partitions.length);
    expect(partitions[0]!.range.minInclusive).toBe('');
    expect(partitions[partitions.length - 1]!.range.maxExclusive).toBe('FF');
    for (let i = 1; i < partitions.length; i++) {
      expect(partitions[i]!.range.minInclusive).toBe(partitions[i - 1]!.range.maxExclusive);
    }
    expect(source.description).toBe(`dbs/db/colls/${container.id}`);
  });

  it('beginning: every document exactly once, with lsn, timestamp and partition key', async () => {
    const container = await freshContainer(cosmos.client);
    const written = await writeDocs(container, 300);
    const source = new CosmosSource<Doc>(container);
    const changes = await drainAll(source, new Map(), 40);
    expect(ids(changes)).toEqual([...written].sort());
    for (const c of changes) {
      expect(c.operation).toBe('upsert');
      expect(c.lsn).toBeGreaterThan(0);
      expect(c.timestampMs).toBeGreaterThan(Date.parse('2020-01-01'));
      expect(c.partitionKey).toBe(c.document!.pk);
    }
    // LSNs increase within each partition.
    const partitions = await source.listPartitions();
    for (const p of partitions) {
      const { changes: own } = await drainPartition(source, p, 'beginning');
      for (let i = 1; i < own.length; i++) expect(own[i]!.lsn).toBeGreaterThan(own[i - 1]!.lsn);
    }
  });

  it('now: the first read returns a position and nothing; later reads return only newer changes', async () => {
    const container = await freshContainer(cosmos.client);
    await writeDocs(container, 40, 'old');
    const source = new CosmosSource<Doc>(container);
    const positions = new Map<string, StartFrom>();
    for (const p of await source.listPartitions()) {
      const page = await source.read({ partition: p, from: 'now', maxItemCount: 10 });
      expect(page.changes).toEqual([]);
      expect(page.position).toMatch(/^"\d+"$/);
      positions.set(p.id, { position: page.position });
    }
    const fresh = await writeDocs(container, 40, 'new');
    expect(ids(await drainAll(source, positions, 10))).toEqual([...fresh].sort());
  });

  it('an explicit position resumes exactly after it, from another client', async () => {
    const container = await freshContainer(cosmos.client);
    const written = await writeDocs(container, 120);
    const source = new CosmosSource<Doc>(container);
    const seen: Change<Doc>[] = [];
    const positions = new Map<string, StartFrom>();
    for (const p of await source.listPartitions()) {
      const page = await source.read({ partition: p, from: 'beginning', maxItemCount: 7 });
      seen.push(...page.changes);
      positions.set(p.id, { position: page.position });
    }
    const other = cosmos.newClient();
    const resumed = new CosmosSource<Doc>(other.database('db').container(container.id));
    seen.push(...(await drainAll(resumed, positions, 7)));
    expect(ids(seen)).toEqual([...written].sort());
  });

  it('a point in time: only changes at or after it (emulator clock)', async () => {
    let nowMs = Date.parse('2026-01-01T00:00:00Z');
    const emulator = await CosmosEmulator.start({ initialRangeCount: 4, now: () => nowMs });
    const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
    try {
      const container = await freshContainer(client, 'time');
      await writeDocs(container, 30, 'before');
      nowMs += 10_000;
      const after = await writeDocs(container, 30, 'after');
      const source = new CosmosSource<Doc>(container);
      const positions = new Map<string, StartFrom>();
      for (const p of await source.listPartitions()) positions.set(p.id, new Date(nowMs - 1000));
      const changes = await drainAll(source, positions, 8);
      expect(ids(changes)).toEqual([...after].sort());
    } finally {
      client.dispose();
      await emulator.stop();
    }
  });

  it('latestVersion: replaced documents once at their latest version, deletes absent', async () => {
    const container = await freshContainer(cosmos.client);
    await writeDocs(container, 20);
    for (let i = 0; i < 5; i++) await container.item(`d${i}`, `k${i}`).replace<Doc>({ id: `d${i}`, pk: `k${i}`, v: 100 + i });
    for (let i = 5; i < 10; i++) await container.item(`d${i}`, `k${i}`).delete();
    const changes = await drainAll(new CosmosSource<Doc>(container), new Map());
    expect(ids(changes)).toEqual(Array.from({ length: 15 }, (_, i) => (i < 5 ? `d${i}` : `d${i + 5}`)).sort());
    for (const c of changes.filter((c) => Number(c.id.slice(1)) < 5)) expect(c.document!.v).toBe(100 + Number(c.id.slice(1)));
  });

  it('allVersionsAndDeletes: creates, replaces and deletes with previous image, key and ttl flag', async () => {
    const container = await freshContainer(cosmos.client);
    const source = new CosmosSource<Doc>(container, { mode: 'allVersionsAndDeletes' });
    const positions = new Map<string, StartFrom>();
    for (const p of await source.listPartitions()) {
      positions.set(p.id, { position: (await source.read({ partition: p, from: 'now', maxItemCount: 50 })).position });
    }
    await writeDocs(container, 10);
    for (let i = 0; i < 10; i++) await container.item(`d${i}`, `k${i}`).replace<Doc>({ id: `d${i}`, pk: `k${i}`, v: 1000 + i });
    for (let i = 0; i < 4; i++) await container.item(`d${i}`, `k${i}`).delete();
    const changes = await drainAll(source, positions, 6);
    expect(changes.length).toBe(24);
    const byId = new Map<string, Change<Doc>[]>();
    for (const c of changes) byId.set(c.id, [...(byId.get(c.id) ?? []), c]);
    for (let i = 0; i < 10; i++) {
      const ops = byId.get(`d${i}`)!;
      expect(ops.map((c) => c.operation)).toEqual(i < 4 ? ['create', 'replace', 'delete'] : ['create', 'replace']);
      expect(ops[0]!.document).toMatchObject({ v: i });
      expect(ops[1]!.document).toMatchObject({ v: 1000 + i });
      if (i < 4) {
        const del = ops[2]!;
        expect(del.document).toBeUndefined();
        expect(del.previous).toMatchObject({ id: `d${i}`, v: 1000 + i });
        expect(del.partitionKey).toBe(`k${i}`);
        expect(del.timeToLiveExpired).toBeUndefined();
        expect(del.lsn).toBeGreaterThan(ops[1]!.lsn);
      }
    }
  });

  it('allVersionsAndDeletes refuses beginning and points in time, as the service does', async () => {
    const container = await freshContainer(cosmos.client);
    const source = new CosmosSource<Doc>(container, { mode: 'allVersionsAndDeletes' });
    const [p] = await source.listPartitions();
    await expect(source.read({ partition: p!, from: 'beginning', maxItemCount: 10 })).rejects.toThrow(InvalidOptionsError);
    await expect(source.read({ partition: p!, from: new Date(), maxItemCount: 10 })).rejects.toThrow(/'now' or a saved position/);
    // A feed that could never start fails at construction, not with a retry loop on every read.
    const leases = new MemoryLeaseStore();
    expect(() => createChangeFeed({ source, leases, leasePrefix: 'test.', instanceName: 'a' })).toThrow(/startFrom.*'now'/);
    expect(() => createChangeFeed({ source, leases, leasePrefix: 'test.', instanceName: 'a', startFrom: new Date() })).toThrow(InvalidOptionsError);
    expect(() => createChangeFeed({ source, leases, leasePrefix: 'test.', instanceName: 'a', startFrom: 'now' })).not.toThrow();
  });

  it('refuses bad options at construction', () => {
    const container = cosmos.client.database('db').container('x');
    expect(() => new CosmosSource(container, { mode: 'full' as never })).toThrow(InvalidOptionsError);
    expect(() => new CosmosSource({} as never)).toThrow(/expected an @azure\/cosmos Container/);
  });

  it("advises as many reads at once as half its client's kept-alive connections (the processor's maxConcurrentReads)", () => {
    const container = cosmos.client.database('db').container('x');
    expect(new CosmosSource(container).concurrentReads).toBe(128);
    const agent = new Agent({ keepAlive: true, maxSockets: 40, maxFreeSockets: 64 });
    const client = new CosmosClient({ endpoint: cosmos.endpoint, key: cosmos.key, agent });
    try {
      expect(new CosmosSource(client.database('db').container('x')).concurrentReads).toBe(32);
      const few = new CosmosClient({ endpoint: cosmos.endpoint, key: cosmos.key, agent: new Agent({ keepAlive: true, maxSockets: 8 }) });
      expect(new CosmosSource(few.database('db').container('x')).concurrentReads).toBe(8);
      few.dispose();
    } finally {
      client.dispose();
      agent.destroy();
    }
  });

  it("a partition's first read right after the listing costs one change feed request: the listing's container read stands for the SDK's", async (ctx) => {
    needsEmulator(cosmos, 'counting requests', ctx);
    const container = await freshContainer(cosmos.client);
    await writeDocs(container, 20);
    const source = new CosmosSource<Doc>(container);
    const partitions = await source.listPartitions();
    // The container read the listing sends alongside is answered (the first read needs it either way).
    await source.read({ partition: partitions[0]!, from: 'beginning', maxItemCount: 1 });
    cosmos.emulator!.clearRequests();
    for (const partition of partitions.slice(1)) await source.read({ partition, from: 'beginning', maxItemCount: 100 });
    expect(cosmos.emulator!.requests().map((r) => r.kind)).toEqual(Array(partitions.length - 1).fill('changeFeed'));
  });

  it('keeps one iterator per partition: a steady poll costs one change feed request and nothing else', async (ctx) => {
    needsEmulator(cosmos, 'counting requests', ctx);
    const container = await freshContainer(cosmos.client);
    await writeDocs(container, 200);
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    let page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 5 });
    cosmos.emulator!.clearRequests();
    // The feed engine's read credit varies from read to read; the iterator follows it without a rebuild.
    for (const maxItemCount of [5, 3, 7, 1, 5]) {
      page = await source.read({ partition: p!, from: { position: page.position }, maxItemCount });
      expect(page.changes.length).toBe(maxItemCount);
    }
    expect(cosmos.emulator!.requests().map((r) => r.kind)).toEqual(Array(5).fill('changeFeed'));
    expect(page.latestLsn).toBeGreaterThanOrEqual(Number(page.position.replace(/"/g, '')));
  });

  it('keeps an iterator for every partition of a container listed with more than 1,024 ranges', { timeout: 90_000 }, async () => {
    // An emulator of its own, which gives a container one range per 10,000 RU/s.
    const emulator = await CosmosEmulator.start();
    const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
    try {
      const { database } = await client.databases.createIfNotExists({ id: 'db' });
      const { container } = await database.containers.createIfNotExists({
        id: 'many',
        partitionKey: { paths: ['/pk'], version: 2 },
        throughput: 1_100 * 10_000,
      });
      const source = new CosmosSource<Doc>(container);
      const partitions = await source.listPartitions();
      expect(partitions).toHaveLength(1_100);
      const positions = new Map<string, string>();
      for (const partition of partitions) positions.set(partition.id, (await source.read({ partition, from: 'now', maxItemCount: 10 })).position);
      // A second round of idle polls over every partition reuses every iterator: change feed requests only
      // (counted in parts: the emulator logs the last 1,000 requests).
      for (let from = 0; from < partitions.length; from += 500) {
        emulator.clearRequests();
        for (const partition of partitions.slice(from, from + 500)) {
          const page = await source.read({ partition, from: { position: positions.get(partition.id)! }, maxItemCount: 10 });
          expect(page.position).toBe(positions.get(partition.id));
          expect(page.changes).toEqual([]);
        }
        const kinds = emulator.requests().map((r) => r.kind);
        expect(kinds.filter((k) => k !== 'changeFeed')).toEqual([]);
        expect(kinds).toHaveLength(Math.min(500, partitions.length - from));
      }
    } finally {
      client.dispose();
      await emulator.stop();
    }
  });
});

describe('CosmosSource: splits', () => {
  it('a split mid-stream surfaces as PartitionGoneError and the children continue with nothing lost', async (ctx) => {
    needsEmulator(cosmos, 'splitting a range', ctx);
    const container = await freshContainer(cosmos.client, 'split');
    const first = await writeDocs(container, 400, 'a');
    const source = new CosmosSource<Doc>(container);
    const partitions = await source.listPartitions();
    const target = partitions[1]!;
    const seen: Change<Doc>[] = [];
    const positions = new Map<string, StartFrom>();
    // Read part of the target partition, then split it under the running iterator. Two pages: the second
    // reply's token is read without a parse (the first one's with another etag), the split's must not be.
    let page = await source.read({ partition: target, from: 'beginning', maxItemCount: 30 });
    seen.push(...page.changes);
    const firstPosition = page.position;
    page = await source.read({ partition: target, from: { position: page.position }, maxItemCount: 30 });
    seen.push(...page.changes);
    expect(page.changes).toHaveLength(30);
    expect(Number(page.position.replace(/"/g, ''))).toBeGreaterThan(Number(firstPosition.replace(/"/g, '')));
    positions.set(target.id, { position: page.position });
    const [left, right] = cosmos.emulator!.split('db', container.id, target.id);
    const second = await writeDocs(container, 200, 'b');
    await expect(source.read({ partition: target, from: { position: page.position }, maxItemCount: 30 })).rejects.toThrow(
      PartitionGoneError,
    );
    // A fresh client (routing map already showing the children) detects it too.
    const fresh = new CosmosSource<Doc>(cosmos.newClient().database('db').container(container.id));
    await expect(fresh.read({ partition: target, from: { position: page.position }, maxItemCount: 30 })).rejects.toThrow(
      PartitionGoneError,
    );
    const after = await source.listPartitions();
    expect(after.map((p) => p.id)).not.toContain(target.id);
    expect(after.filter((p) => p.parents?.includes(target.id)).map((p) => p.id).sort()).toEqual([left.id, right.id].sort());
    // Children start at the parent's position: the same etag is valid for them.
    page = await source.read({ partition: after.find((p) => p.id === left.id)!, from: { position: page.position }, maxItemCount: 30 });
    expect(page.position).toMatch(/^"\d+"$/);
    seen.push(...(await drainAll(source, positions)));
    const got = new Set(seen.map((c) => c.id));
    for (const id of [...first, ...second]) expect(got.has(id)).toBe(true);
  });
  it('a merge also surfaces as PartitionGoneError for both parents; the merged range continues from either', async (ctx) => {
    needsEmulator(cosmos, 'merging ranges', ctx);
    const container = await freshContainer(cosmos.client, 'merge');
    const written = await writeDocs(container, 200);
    const source = new CosmosSource<Doc>(container);
    const [, p1, p2] = await source.listPartitions();
    const positions = new Map<string, StartFrom>();
    const seen: Change<Doc>[] = [];
    for (const p of [p1!, p2!]) {
      const page = await source.read({ partition: p, from: 'beginning', maxItemCount: 10 });
      seen.push(...page.changes);
      positions.set(p.id, { position: page.position });
    }
    const expected = new Set<string>();
    for (const p of [p1!, p2!]) for (const c of (await drainPartition(new CosmosSource<Doc>(container), p, 'beginning')).changes) expected.add(c.id);
    const merged = cosmos.emulator!.merge('db', container.id, p1!.id, p2!.id);
    for (const p of [p1!, p2!]) {
      await expect(source.read({ partition: p, from: positions.get(p.id)!, maxItemCount: 10 })).rejects.toThrow(PartitionGoneError);
    }
    const after = await source.listPartitions();
    expect(after.find((p) => p.id === merged.id)?.parents).toEqual(expect.arrayContaining([p1!.id, p2!.id]));
    // Nothing of the parents is lost when the merged range is read from the older of their positions.
    const oldest = [p1!, p2!].map((p) => positions.get(p.id) as { position: string }).sort((a, b) => Number(a.position.replace(/"/g, '')) - Number(b.position.replace(/"/g, '')))[0]!;
    const rest = await drainPartition(source, after.find((p) => p.id === merged.id)!, oldest);
    const got = new Set([...seen, ...rest.changes].map((c) => c.id));
    expect(expected.size).toBeGreaterThan(50);
    for (const id of expected) expect(got.has(id)).toBe(true);
    expect(written.length).toBe(200);
  });
});

describe('CosmosSource: errors', () => {
  it('429 storms: absorbed by the SDK when short, TransientError with retry-after when longer, nothing lost', async (ctx) => {
    needsEmulator(cosmos, 'injecting 429s', ctx);
    const container = await freshContainer(cosmos.client, 'throttle');
    const written = await writeDocs(container, 60);
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    const short = cosmos.emulator!.injectFault(faults.throttle(5, { kind: 'changeFeed', containerId: container.id }, 3));
    const page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 5 });
    expect(short.hits).toBe(3);
    const storm = cosmos.emulator!.injectFault(faults.throttle(7, { kind: 'changeFeed', containerId: container.id }, 12));
    const error = await source.read({ partition: p!, from: { position: page.position }, maxItemCount: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ statusCode: 429, retryAfterMs: 7 });
    storm.remove();
    const rest = await drainAll(source, new Map([[p!.id, { position: page.position }]]));
    expect(ids([...page.changes, ...rest])).toEqual([...written].sort());
  });

  it('503 storms: TransientError, and reads resume from the same position', async (ctx) => {
    needsEmulator(cosmos, 'injecting 503s', ctx);
    const container = await freshContainer(cosmos.client, 'unavailable');
    const written = await writeDocs(container, 60);
    const source = new CosmosSource<Doc>(container);
    const fault = cosmos.emulator!.injectFault(faults.unavailable({ kind: 'changeFeed', containerId: container.id }, 8));
    const positions = new Map<string, StartFrom>();
    const seen: Change<Doc>[] = [];
    let failures = 0;
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        seen.push(...(await drainAll(source, positions, 9)));
        break;
      } catch (err) {
        expect(err).toBeInstanceOf(TransientError);
        expect((err as TransientError).statusCode).toBe(503);
        failures++;
      }
    }
    expect(fault.hits).toBe(8);
    expect(failures).toBeGreaterThan(0);
    expect(ids(seen)).toEqual([...written].sort());
  });

  it('timeouts and socket resets are retried by the SDK or reported as TransientError', async (ctx) => {
    needsEmulator(cosmos, 'hanging requests', ctx);
    const client = new CosmosClient({
      endpoint: cosmos.endpoint,
      key: cosmos.key,
      connectionPolicy: { requestTimeout: 300, retryOptions: { maxRetryAttemptCount: 1, fixedRetryIntervalInMilliseconds: 0, maxWaitTimeInSeconds: 1 } },
    });
    try {
      const container = await freshContainer(client, 'timeout');
      const written = await writeDocs(container, 20);
      const source = new CosmosSource<Doc>(container);
      const hang = cosmos.emulator!.injectFault(faults.hang({ kind: 'changeFeed', containerId: container.id }, 1));
      const reset = cosmos.emulator!.injectFault(faults.reset({ kind: 'changeFeed', containerId: container.id }, 1));
      const changes = await drainAll(source, new Map());
      expect(hang.hits).toBe(1);
      expect(reset.hits).toBe(1);
      expect(ids(changes)).toEqual([...written].sort());
    } finally {
      client.dispose();
    }
  });

  it('a 410 that is not a split (1008, partition migration): TransientError, and no replay from the start', async (ctx) => {
    needsEmulator(cosmos, 'injecting a 410/1008', ctx);
    const container = await freshContainer(cosmos.client, 'migration');
    await writeDocs(container, 40);
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    const first = await source.read({ partition: p!, from: 'beginning', maxItemCount: 4 });
    // The SDK returns this 410 instead of throwing and forgets the range's etag; reading on from its
    // state would start over. The source reports it and continues from the caller's position instead.
    cosmos.emulator!.injectFault(faults.gone(1008, { kind: 'changeFeed', containerId: container.id }, 1));
    const error = await source.read({ partition: p!, from: { position: first.position }, maxItemCount: 4 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as TransientError).statusCode).toBe(410);
    const rest = await drainPartition(source, p!, { position: first.position }, 4);
    const all = [...first.changes, ...rest.changes].map((c) => c.id);
    expect(new Set(all).size).toBe(all.length);
    expect(ids([...first.changes, ...rest.changes])).toEqual(ids((await drainPartition(source, p!, 'beginning')).changes));
  });

  it('container deleted mid-stream: ResourceGoneError, from a running iterator and a fresh source', async () => {
    const container = await freshContainer(cosmos.client, 'deleted');
    await writeDocs(container, 20);
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    const page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 5 });
    await container.delete();
    const error = await source.read({ partition: p!, from: { position: page.position }, maxItemCount: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResourceGoneError);
    expect((error as ResourceGoneError).resource).toBe(`dbs/db/colls/${container.id}`);
    const fresh = new CosmosSource<Doc>(cosmos.newClient().database('db').container(container.id));
    await expect(fresh.read({ partition: p!, from: { position: page.position }, maxItemCount: 5 })).rejects.toThrow(ResourceGoneError);
    await expect(fresh.listPartitions()).rejects.toThrow(ResourceGoneError);
  });

  it('a container re-created under a running source: its positions belong to the old one → ResourceGoneError', async () => {
    const container = await freshContainer(cosmos.client, 'recreated');
    await writeDocs(container, 5);
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    const page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 5 });
    await container.delete();
    await cosmos.client.database('db').containers.create({ id: container.id, partitionKey: { paths: ['/pk'], version: 2 } });
    await expect(source.read({ partition: p!, from: { position: page.position }, maxItemCount: 5 })).rejects.toThrow(/re-created/);
    // A fresh process sees a position ahead of the new container's log (it moves backwards): also refused.
    const fresh = new CosmosSource<Doc>(cosmos.newClient().database('db').container(container.id));
    await expect(fresh.read({ partition: p!, from: { position: page.position }, maxItemCount: 5 })).rejects.toThrow(ResourceGoneError);
  });

  it('a wrong key: CredentialsError from listPartitions and read, before anything is read', async () => {
    // Against our emulator, one started with a master key checks signatures as the service does.
    const emulator = cosmos.emulator ? await CosmosEmulator.start({ masterKey: Buffer.from('the right key, 32 bytes long....').toString('base64') }) : undefined;
    const endpoint = emulator?.endpoint ?? cosmos.endpoint;
    const good = new CosmosClient({ endpoint, key: emulator?.key ?? cosmos.key });
    const wrong = new CosmosClient({ endpoint, key: Buffer.from('not the key').toString('base64') });
    try {
      const container = await freshContainer(good, 'auth');
      await writeDocs(container, 3);
      const source = new CosmosSource<Doc>(wrong.database('db').container(container.id));
      const error = await source.listPartitions().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CredentialsError);
      expect((error as CredentialsError).statusCode).toBe(401);
      expect((error as Error).message).not.toContain(emulator?.key ?? cosmos.key);
      const partition = { id: '0', range: { minInclusive: '', maxExclusive: 'FF' } };
      await expect(source.read({ partition, from: 'beginning', maxItemCount: 5 })).rejects.toThrow(CredentialsError);
      // The right key reads the same container.
      expect((await drainAll(new CosmosSource<Doc>(container), new Map())).length).toBe(3);
    } finally {
      good.dispose();
      wrong.dispose();
      await emulator?.stop();
    }
  });

  it('403 (e.g. a token without read permission on the container): CredentialsError', async (ctx) => {
    needsEmulator(cosmos, 'injecting a 403', ctx);
    const container = await freshContainer(cosmos.client, 'forbidden');
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    cosmos.emulator!.injectFault({ match: { containerId: container.id, kind: 'changeFeed' }, action: { status: 403, message: 'forbidden' }, times: 1 });
    const error = await source.read({ partition: p!, from: 'beginning', maxItemCount: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CredentialsError);
    expect((error as CredentialsError).statusCode).toBe(403);
    await expect(source.read({ partition: p!, from: 'beginning', maxItemCount: 5 })).resolves.toBeDefined();
  });

  it('aborting an in-flight read rejects at once; the next read from the same position loses nothing', async (ctx) => {
    needsEmulator(cosmos, 'delaying a reply', ctx);
    const container = await freshContainer(cosmos.client, 'abort');
    const written = await writeDocs(container, 30);
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    const page = await source.read({ partition: p!, from: 'beginning', maxItemCount: 3 });
    const fault = cosmos.emulator!.injectFault(faults.latency(3_000, { kind: 'changeFeed', containerId: container.id }, 1));
    const controller = new AbortController();
    let settled = false;
    const pending = source.read({ partition: p!, from: { position: page.position }, maxItemCount: 3, signal: controller.signal });
    void pending.finally(() => (settled = true)).catch(() => undefined);
    while (fault.hits === 0) await new Promise((r) => setTimeout(r, 5));
    expect(settled).toBe(false);
    controller.abort();
    const error = await pending.catch((e: unknown) => e);
    expect((error as Error).name).toBe('AbortError');
    const rest = await drainPartition(source, p!, { position: page.position }, 3);
    const own = await drainPartition(source, p!, 'beginning');
    expect(ids([...page.changes, ...rest.changes])).toEqual(ids(own.changes));
    expect(own.changes.length).toBeGreaterThan(3);
    expect(written.length).toBe(30);
  });

  it('an already-aborted signal rejects without a request', async () => {
    const container = await freshContainer(cosmos.client, 'aborted');
    const source = new CosmosSource<Doc>(container);
    const [p] = await source.listPartitions();
    const controller = new AbortController();
    controller.abort();
    await expect(source.read({ partition: p!, from: 'now', maxItemCount: 3, signal: controller.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
  });
});
