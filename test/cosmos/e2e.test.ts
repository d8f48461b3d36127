import type { OperationInput } from '@azure/cosmos';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { estimateLag } from '../../src/estimator/index.js';
import { lsnOfPosition } from '../../src/sources/cosmos/continuation.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { needsEmulator, startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { sleep } from './helpers.js';

const WORKER = fileURLToPath(new URL('./fixtures/processor.ts', import.meta.url));
const WRITES = 20_000;

interface Message {
  type: 'ready' | 'processed' | 'event' | 'fatal' | 'stopped';
  owner: string;
  ids?: string[];
  partition?: string;
  event?: { type: string; lease?: string; error?: string };
  error?: string;
}

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

/** Resolves when `done()` holds, polling every 50 ms; rejects with `what` after `timeoutMs`. */
async function until(done: () => boolean | Promise<boolean>, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what()}`);
    await sleep(50);
  }
}

describe('end to end: two processes, four ranges, a split mid-stream', () => {
  it(`processes all ${WRITES} writes at least once and checkpoints every lease at the end of its range`, { timeout: 120_000 }, async (ctx) => {
    needsEmulator(cosmos, 'splitting a range mid-stream', ctx);
    const emulator = cosmos.emulator!;
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'e2e' });
    const { container } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/pk'], version: 2 } });
    const { container: leaseContainer } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
    const prefix = 'e2e.';

    const processed = new Map<string, number>();
    const log: string[] = [];
    const fatal: string[] = [];
    const children: ChildProcess[] = [];
    const ready = new Set<string>();
    for (const owner of ['host-a', 'host-b']) {
      const child = fork(WORKER, [], {
        execArgv: ['--import', 'tsx'],
        env: {
          ...process.env,
          COSMOS_ENDPOINT: cosmos.endpoint,
          COSMOS_KEY: cosmos.key,
          E2E_DATABASE: 'e2e',
          E2E_CONTAINER: 'orders',
          E2E_LEASES: 'leases',
          E2E_PREFIX: prefix,
          E2E_OWNER: owner,
        },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      child.on('message', (m: Message) => {
        if (m.type === 'ready') ready.add(m.owner);
        if (m.type === 'processed') for (const id of m.ids ?? []) processed.set(id, (processed.get(id) ?? 0) + 1);
        if (m.type === 'event') log.push(`${m.owner} ${m.event?.type} ${m.event?.lease ?? ''} ${m.event?.error ?? ''}`);
        if (m.type === 'fatal') fatal.push(`${m.owner}: ${m.error}`);
      });
      children.push(child);
    }
    try {
      await until(() => ready.size === 2, 30_000, () => 'workers did not start');

      // 20k writes in bulk requests of 2000 while both hosts run; split a range halfway through. (The SDK's
      // bulk executor costs about a second per call whatever its size, so calls are few and large.)
      let split: string[] = [];
      const CHUNK = 2_000;
      for (let i = 0; i < WRITES; i += CHUNK) {
        const ops: OperationInput[] = [];
        for (let j = i; j < i + CHUNK; j++) {
          ops.push({ operationType: 'Create', partitionKey: `k${j % 997}`, resourceBody: { id: `o${j}`, pk: `k${j % 997}`, n: j } });
        }
        const results = await container.items.executeBulkOperations(ops);
        expect(results.filter((r) => r.response?.statusCode !== 201).length).toBe(0);
        if (i + CHUNK === WRITES / 2) {
          const [left, right] = emulator.split('e2e', 'orders', '1');
          split = [left.id, right.id];
        }
      }
      expect(split.length).toBe(2);

      await until(
        () => processed.size === WRITES || fatal.length > 0,
        60_000,
        () => `processed ${processed.size}/${WRITES}; events: ${log.slice(-20).join(' | ')}`,
      );
      expect(fatal).toEqual([]);
      for (let j = 0; j < WRITES; j++) expect(processed.has(`o${j}`)).toBe(true);

      // Every lease ends at the end of its range: one lease per live range, checkpoint = the range's LSN.
      const store = new CosmosLeaseStore({ container: leaseContainer });
      const ranges = emulator.partitionKeyRanges('e2e', 'orders');
      expect(ranges.map((r) => r.id)).toEqual(expect.arrayContaining(split));
      expect(ranges.map((r) => r.id)).not.toContain('1');
      const listLeases = async () => (await store.list(prefix)).leases.filter((l) => !l.id.endsWith('.info') && !l.id.endsWith('.lock'));
      const settled = async (): Promise<boolean> => {
        const leases = await listLeases();
        if (leases.length !== ranges.length) return false;
        return ranges.every((r) => {
          const lease = leases.find((l) => l.leaseToken === r.id);
          return lease !== undefined && lsnOfPosition(lease.continuation) === r.lsn;
        });
      };
      let snapshot = '';
      const settledOrSnapshot = async (): Promise<boolean> => {
        const leases = await listLeases();
        snapshot = `leases ${leases.map((l) => `${l.leaseToken}@${l.continuation}(${l.owner})`).join(' ')}; ranges ${ranges.map((r) => `${r.id}@${r.lsn}`).join(' ')}`;
        return settled();
      };
      await until(settledOrSnapshot, 20_000, () => `leases did not settle at the end of their ranges: ${snapshot}`);
      const leases = await listLeases();
      expect(leases.map((l) => l.leaseToken).sort()).toEqual(ranges.map((r) => r.id).sort());
      expect(new Set(leases.map((l) => l.owner))).toEqual(new Set(['host-a', 'host-b']));
      // The estimator agrees: nothing waiting on any lease.
      const lags = await estimateLag({ source: new CosmosSource(container), leases: store, leasePrefix: prefix });
      expect(lags.map((l) => [l.leaseToken, l.estimatedLag, l.timeLagMs])).toEqual(ranges.map((r) => [r.id, 0, 0]).sort());
      const duplicates = [...processed.values()].filter((n) => n > 1).length;
      console.log(`e2e: ${processed.size} changes processed, ${duplicates} more than once; leases: ${leases.map((l) => `${l.leaseToken}@${l.continuation}(${l.owner})`).join(' ')}`);
    } finally {
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null) return resolve();
              const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
              child.once('exit', () => {
                clearTimeout(timer);
                resolve();
              });
              child.send('stop');
            }),
        ),
      );
    }
  });
});
