import { Redis } from 'ioredis';
import { asyncScheduler } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyFailure } from '../../src/errors/classify.js';
import { ViewFencedError } from '../../src/errors/ViewFencedError.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { RedisViewStore } from '../../src/redis/RedisViewStore.js';
import type { ViewCommit } from '../../src/sinks/ViewStore.js';
import { change, history, viewStoreConformance, writeOf, type ConformanceRow } from '../support/viewStoreConformance.js';
import { TcpProxy } from '../support/brokers/tcpProxy.js';
import { REDIS_URL, serviceUnavailable, uniqueName } from '../support/brokers/services.js';
import { FaultEnv, faultyRedis, type RedisFaultPlan } from '../support/faults/index.js';

const skip = await serviceUnavailable('Redis', REDIS_URL);
const prefix = `${uniqueName('rxfeed_test')}:`;

describe.skipIf(skip !== undefined)('RedisViewStore', () => {
  const client = new Redis(REDIS_URL);
  afterAll(async () => {
    const keys = await client.keys(`${prefix}*`);
    if (keys.length > 0) await client.del(...keys);
    await client.quit();
  });
  let views = 0;

  // Alternate between a client we pass (kept open) and a URL (the store opens and closes its own).
  viewStoreConformance('RedisViewStore', async () => {
    const name = `v${++views}`;
    const options = views % 2 === 0 ? { name, keyPrefix: prefix, client } : { name, keyPrefix: prefix, url: REDIS_URL };
    return { store: new RedisViewStore<ConformanceRow>(options), reopen: async () => new RedisViewStore<ConformanceRow>(options) };
  });

  const fresh = () => new RedisViewStore<ConformanceRow>({ name: `r${++views}`, keyPrefix: prefix, client });
  const at = (partition: string, min: string, max: string, epoch: number, lsn: number): ViewCommit => ({
    partition,
    epoch,
    position: `pos:${partition}:${lsn}`,
    lsn,
    range: { minInclusive: min, maxExclusive: max },
  });

  it('fences by key range along the lineage: a parent is refused once a split child wrote, even a write changing nothing', async () => {
    const store = fresh();
    await store.write({ mode: 'guarded', changes: [change('P', 'a', 5, 5)], partitions: [at('P', '', 'FF', 3, 5)] });
    // Child L [,80) took over at an epoch above its parent's, and only replayed (nothing changed).
    expect(await store.write({ mode: 'guarded', changes: [change('L', 'a', 5, 5)], partitions: [at('L', '', '80', 4, 5)] })).toMatchObject({ written: 0 });
    const refused = await store.write({ mode: 'guarded', changes: [change('P', 'b', 6, 6)], partitions: [at('P', '', 'FF', 3, 6)] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ViewFencedError);
    expect(refused).toMatchObject({ leaseToken: 'P', epoch: 3, currentEpoch: 4 });
    expect(await store.get('b')).toBeUndefined();
    // A commit that leaves its range out is fenced over the range stored with its partition.
    await expect(store.write(writeOf([change('P', 'b', 6, 6)], { epoch: 3 }))).rejects.toMatchObject({ leaseToken: 'P', currentEpoch: 4 });
    // The sibling R [80,FF) at its own (higher) epoch does not overlap L and is accepted; so is a merge above both.
    await store.write({ mode: 'guarded', changes: [change('R', 'c', 7, 7)], partitions: [at('R', '80', 'FF', 4, 7)] });
    await store.write({ mode: 'guarded', changes: [change('M', 'd', 9, 9)], partitions: [at('M', '', 'FF', 5, 9)] });
    // Now both children are fenced by the merge (their ranges overlap a range written with epoch 5).
    await expect(store.write({ mode: 'exactlyOnce', changes: [], partitions: [at('R', '80', 'FF', 4, 8)] })).rejects.toMatchObject({ leaseToken: 'R', currentEpoch: 5 });
    await expect(store.write({ mode: 'guarded', changes: [], partitions: [at('L', '', '40', 4, 8)] })).rejects.toBeInstanceOf(ViewFencedError);
    // A range that does not overlap any written one starts fresh.
    await store.write({ mode: 'guarded', changes: [change('X', 'x', 1, 1)], partitions: [at('X', 'FF', 'FFFF', 1, 1)] });
    expect((await store.rows()).map((r) => r.key)).toEqual(['a', 'c', 'd', 'x']);
    // clearPositions forgets the fences too (a reset lease container starts at low epochs again).
    await store.clearPositions();
    await store.write({ mode: 'guarded', changes: [], partitions: [at('P', '', 'FF', 1, 10)] });
  });

  it('keeps LSNs and epochs beyond 14 digits exact', async () => {
    const store = fresh();
    const lsn = 2 ** 53 - 3;
    await store.write({ mode: 'exactlyOnce', changes: [change('p0', 'a', lsn, 1)], partitions: [{ partition: 'p0', epoch: 123456789012345, position: 'p', lsn }] });
    expect((await store.positions()).get('p0')).toEqual({ position: 'p', epoch: 123456789012345, lsn });
    expect((await store.get('a'))?.lsn).toBe(lsn);
  });

  it('ends equal to the source when the connection is cut mid-batch again and again (unanswered scripts are re-sent: each is idempotent)', async () => {
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(REDIS_URL).port || 6379) });
    const viaProxy = new Redis(`redis://127.0.0.1:${proxy.port}`, { retryStrategy: () => 10 });
    viaProxy.on('error', () => undefined); // the cuts, expected
    try {
      const store = new RedisViewStore<ConformanceRow>({ name: `cut${++views}`, keyPrefix: prefix, client: viaProxy });
      const { batches, final } = history(11);
      const writes: Promise<unknown>[] = [];
      for (const [i, batch] of batches.entries()) {
        writes.push(store.write(writeOf(batch)));
        if (i % 15 === 7) {
          await writes.at(-1); // some scripts in flight, then the cut
          writes.push(store.write(writeOf(batches[i - 1]!)));
          proxy.cut();
        }
      }
      await Promise.all(writes);
      expect(proxy.cuts).toBeGreaterThan(3);
      const rows = await new RedisViewStore<ConformanceRow>({ name: `cut${views}`, keyPrefix: prefix, client }).rows();
      expect(Object.fromEntries(rows.map((r) => [r.key, r.row.version]))).toEqual(final);
    } finally {
      viaProxy.disconnect();
      await proxy.close();
    }
  });

  for (const mode of ['guarded', 'exactlyOnce'] as const) {
    it(`${mode}: ends equal to the source through connections lost during EVALSHA, lost replies, timeouts with the write landed and NOSCRIPT after a SCRIPT FLUSH (fault wrapper; each write retried as materializeToView does)`, async () => {
      const env = new FaultEnv({ seed: 7, scheduler: asyncScheduler });
      const plan: RedisFaultPlan = {
        evalsha: [
          { kind: 'noscript', count: 1 }, // the first script call finds the cache flushed (a real SCRIPT FLUSH)
          { kind: 'noscript', probability: 0.03 },
          { kind: 'drop', probability: 0.1 },
          { kind: 'lostReply', probability: 0.1 },
          { kind: 'timeout', probability: 0.05, ms: 20 },
          { kind: 'slow', probability: 0.05, ms: 5 },
        ],
        eval: [{ kind: 'lostReply', probability: 0.2 }],
      };
      const name = `faults${++views}`;
      const store = new RedisViewStore<ConformanceRow>({ name, keyPrefix: prefix, client: faultyRedis(client, plan, env) });
      const { batches, final } = history(12);
      let retries = 0;
      for (const batch of batches) {
        for (let attempt = 1; ; attempt++) {
          try {
            await store.write(writeOf(batch, { mode }));
            break;
          } catch (error) {
            expect(classifyFailure(error)).toBe('transient'); // waited out and retried, never the end of the stream
            expect(attempt).toBeLessThan(20);
            retries++;
          }
        }
      }
      const clean = new RedisViewStore<ConformanceRow>({ name, keyPrefix: prefix, client });
      expect(Object.fromEntries((await clean.rows()).map((r) => [r.key, r.row.version]))).toEqual(final);
      // Each partition's position is its last batch's, whichever attempt of it landed.
      const last = new Map(batches.map((b) => [b[0]!.partition, Math.max(...b.map((c) => c.lsn))]));
      for (const [partition, lsn] of last) expect((await clean.positions()).get(partition)).toMatchObject({ lsn, epoch: 1 });
      const counts = env.counts();
      for (const kind of ['noscript', 'drop', 'lostReply', 'timeout']) expect(counts.get(`redis.${kind}`) ?? 0).toBeGreaterThan(0);
      expect(retries).toBeGreaterThan(0);
    });
  }

  it('drops a whole view', async () => {
    const store = fresh();
    await store.write(writeOf([change('p0', 'a', 1, 1), change('p0', 'b', 2, undefined)]));
    await store.drop();
    expect(await store.rows()).toEqual([]);
    expect((await store.positions()).size).toBe(0);
  });

  it('says what to fix for bad options', () => {
    expect(() => new RedisViewStore({ name: '' , client })).toThrow(InvalidOptionsError);
    expect(() => new RedisViewStore({ name: 'x' })).toThrow(/client or a url/);
  });
});
