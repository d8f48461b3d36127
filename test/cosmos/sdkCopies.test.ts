import * as esmSdk from '@azure/cosmos';
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { lastValueFrom, take, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosEmulator } from '../../src/emulator/index.js';
import { changeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/index.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { sdkOfContainer } from '../../src/sources/cosmos/sdkOfContainer.js';
import { drainPartition, type Doc } from './helpers.js';

type Sdk = typeof esmSdk;

const repo = fileURLToPath(new URL('../..', import.meta.url));
const sdkDir = dirname(createRequire(import.meta.url).resolve('@azure/cosmos/package.json'));
// A second copy of the SDK on disk, as a linked install or a monorepo gives one. It sits inside
// node_modules so that its own dependencies still resolve.
const copyDir = join(repo, 'node_modules', '.rxfeed-test-sdk-copy', String(process.pid), '@azure', 'cosmos');

let emulator: CosmosEmulator;
const copies: Record<string, Sdk> = {};

beforeAll(async () => {
  emulator = await CosmosEmulator.start({ initialRangeCount: 2 });
  // The CommonJS build of the same package: what a CommonJS app `require`s (the dual package hazard).
  copies['CommonJS build (require)'] = createRequire(import.meta.url)('@azure/cosmos') as Sdk;
  mkdirSync(join(copyDir, 'dist'), { recursive: true });
  cpSync(join(sdkDir, 'package.json'), join(copyDir, 'package.json'));
  cpSync(join(sdkDir, 'dist', 'esm'), join(copyDir, 'dist', 'esm'), { recursive: true });
  copies['second copy on disk (ESM)'] = (await import(pathToFileURL(join(copyDir, 'dist', 'esm', 'index.js')).href)) as Sdk;
});
afterAll(async () => {
  await emulator?.stop();
  rmSync(dirname(dirname(copyDir)), { recursive: true, force: true });
});

async function containerFrom(sdk: Sdk, name: string): Promise<{ client: esmSdk.CosmosClient; container: esmSdk.Container }> {
  const client = new sdk.CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
  const { database } = await client.databases.createIfNotExists({ id: 'copies' });
  const { container } = await database.containers.createIfNotExists({ id: name, partitionKey: { paths: ['/pk'], version: 2 } });
  for (let i = 0; i < 20; i++) await container.items.create<Doc>({ id: `d${i}`, pk: `k${i}`, v: i });
  return { client, container };
}

describe.each(['CommonJS build (require)', 'second copy on disk (ESM)'])('a container from another @azure/cosmos: %s', (kind) => {
  it('is a different module instance, whose SDK refuses start locations from rxfeed\'s copy', async () => {
    const sdk = copies[kind]!;
    expect(sdk.Container).not.toBe(esmSdk.Container);
    const { client, container } = await containerFrom(sdk, `refuse-${kind.length}`);
    try {
      const foreign = container.items.getChangeFeedIterator({ changeFeedStartFrom: esmSdk.ChangeFeedStartFrom.Beginning() });
      await expect(foreign.readNext()).rejects.toThrow(/Invalid change feed start location/);
      expect((await sdkOfContainer(container)).ChangeFeedStartFrom).toBe(sdk.ChangeFeedStartFrom);
    } finally {
      client.dispose();
    }
  });

  it('reads the change feed through rxfeed from the beginning, from a position and from now', async () => {
    const { client, container } = await containerFrom(copies[kind]!, `read-${kind.length}`);
    try {
      const source = new CosmosSource<Doc>(container);
      const partitions = await source.listPartitions();
      let total = 0;
      for (const p of partitions) {
        const fromStart = await drainPartition(source, p, 'beginning');
        total += fromStart.changes.length;
        expect((await drainPartition(source, p, { position: fromStart.position })).changes).toEqual([]);
        expect((await drainPartition(source, p, 'now')).changes).toEqual([]);
      }
      expect(total).toBe(20);

      const batches = await lastValueFrom(
        changeFeed<Doc>({ source: new CosmosSource<Doc>(container), leases: new MemoryLeaseStore(), leasePrefix: 'test.', instanceName: 'copies', pollIntervalMs: 50 }).pipe(
          checkpointEvery(1),
          take(2),
          toArray(),
        ),
      );
      expect(batches.flatMap((b) => b.changes.map((c) => c.id)).length).toBeGreaterThan(0);
    } finally {
      client.dispose();
    }
  });
});
