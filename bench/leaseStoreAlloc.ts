/**
 * What the Cosmos lease store allocates per request of an idle host's rounds: a listing of `BENCH_LEASES`
 * lease documents (one `STARTSWITH` query, its pages) and a renewal of all of them (replaces in bulk, 100 a
 * request), against the emulator in its own process. Each is run `BENCH_ROUNDS` times under V8's sampling
 * heap profiler (objects collected by GCs kept) and printed as bytes per listing / per renewal round, by
 * file and by allocating frame, with rxfeed's own share (its lease code, not the SDK's or Node's).
 *
 * Run: npx tsx bench/leaseStoreAlloc.ts   (env: BENCH_LEASES=1024 BENCH_ROUNDS=10 BENCH_TOP=20
 * BENCH_SAMPLE_BYTES=256; BENCH_BUILD=dir measures another build, `dir/esm/index.js`)
 */
import { CosmosClient } from '@azure/cosmos';
import { Session } from 'node:inspector/promises';
import { pathToFileURL } from 'node:url';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import type * as Rxfeed from '../src/index.js';
import type { Lease } from '../src/leases/Lease.js';
import { fileOf, type SamplingNode } from './heapSamples.js';
import { spawnEmulator } from './spawnEmulator.js';

type Package = Pick<typeof Rxfeed, 'CosmosLeaseStore'>;
const BUILD = process.env.BENCH_BUILD;
const { CosmosLeaseStore } = (BUILD ? await import(pathToFileURL(`${BUILD}/esm/index.js`).href) : await import('./built.js')) as Package;
const LEASES = Number(process.env.BENCH_LEASES ?? 1024);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const TOP = Number(process.env.BENCH_TOP ?? 20);
const SAMPLE_BYTES = Number(process.env.BENCH_SAMPLE_BYTES ?? 256);

/** Runs `work` `ROUNDS` times under the sampling heap profiler; prints bytes per round. */
async function sampled(name: string, work: () => Promise<void>): Promise<void> {
  await work(); // warm
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', { samplingInterval: SAMPLE_BYTES, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  for (let i = 0; i < ROUNDS; i++) await work();
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: SamplingNode } };
  session.disconnect();
  const byFrame = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  let own = 0;
  const walk = (node: SamplingNode) => {
    if (node.selfSize > 0) {
      const { functionName, url, lineNumber } = node.callFrame;
      const file = fileOf(url);
      const key = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
      byFrame.set(key, (byFrame.get(key) ?? 0) + node.selfSize);
      const group = file.startsWith('node_modules/') ? file.split('/').slice(0, file.startsWith('node_modules/@') ? 3 : 2).join('/') : file;
      byFile.set(group, (byFile.get(group) ?? 0) + node.selfSize);
      total += node.selfSize;
      if (file.startsWith('rxfeed:') && !file.startsWith('rxfeed:leaseStoreAlloc')) own += node.selfSize;
    }
    node.children.forEach(walk);
  };
  walk(profile.head);
  const kb = (bytes: number) => `${(bytes / ROUNDS / 1024).toFixed(1).padStart(7)} KB`;
  console.log(`\n${name}: ${kb(total).trim()} per round of ${LEASES} documents (${(total / ROUNDS / LEASES).toFixed(0)} B a document), rxfeed's own code ${kb(own).trim()}`);
  for (const [file, bytes] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${kb(bytes)}  ${file}`);
  console.log('  by frame:');
  for (const [frame, bytes] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${kb(bytes)}  ${frame}`);
}

const emulator = process.env.BENCH_ENDPOINT ? { endpoint: process.env.BENCH_ENDPOINT, child: undefined } : await spawnEmulator();
try {
  const client = new CosmosClient({ endpoint: emulator.endpoint, key: EMULATOR_KEY });
  const { database } = await client.databases.createIfNotExists({ id: 'leaseAlloc' });
  const { container } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
  const store = new CosmosLeaseStore({ container, partitionKeyPath: '/id' });
  const prefix = `alloc-${Date.now().toString(36)}.`;
  const now = Date.now();
  let leases: Lease[] = (
    await Promise.all(
      Array.from({ length: LEASES }, (_, i) =>
        store.createIfAbsent({ id: `${prefix}${i}`, leaseToken: String(i), owner: 'host-a', continuation: `"${1000 + i}"`, timestampMs: now, epoch: 1, mode: 'latestVersion', properties: {}, feedRange: { minInclusive: i.toString(16).padStart(4, '0'), maxExclusive: (i + 1).toString(16).padStart(4, '0') } }),
      ),
    )
  ).filter((l): l is Lease => l !== undefined);
  console.log(`${leases.length} leases under ${prefix}; ${ROUNDS} rounds each, one sample per ${SAMPLE_BYTES} bytes`);
  await sampled('listing', async () => {
    const { leases: listed } = await store.list(prefix);
    if (listed.length !== LEASES) throw new Error(`listed ${listed.length}`);
  });
  await sampled('renewal (all leases, in bulk)', async () => {
    const at = Date.now();
    leases = await Promise.all(leases.map((l) => store.replace({ ...l, timestampMs: at })));
  });
} finally {
  emulator.child?.kill();
}
