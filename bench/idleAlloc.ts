/**
 * What one idle poll allocates, by function: bench/idleOverhead.ts's engine (`CosmosSource` over iterators
 * answering "not modified" at once, createChangeFeed → checkpointEvery, an in-memory lease store) and its bare
 * loops (`readNext`, then a timer), each for a window under V8's sampling heap profiler with the objects that
 * minor and major GCs collected kept in the profile: every allocation of the window, sampled (one sample per
 * `BENCH_SAMPLE_BYTES` on average), not only what was still alive at its end. Prints bytes per poll of each side
 * and the functions that allocated most per poll (the allocating frame: a constructor, a closure's maker, an
 * async function's frame). Everything an idle poll allocates before its wait lives through the wait (a poll
 * interval of seconds: minor GCs run meanwhile), so it is promoted and marked by a major GC; fewer bytes per
 * poll is fewer promoted bytes.
 *
 * Run: npx tsx bench/idleAlloc.ts   (env: BENCH_RANGES=1024 BENCH_POLL_MS=100 BENCH_WINDOW_MS=3000 BENCH_TOP=25
 * BENCH_SAMPLE_BYTES=256; BENCH_BUILD=dir measures another build, `dir/esm/index.js`, e.g. a copy of `dist` made
 * before a change)
 */
import { Session } from 'node:inspector/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type * as Rxfeed from '../src/index.js';
import type { Page, ReadRequest, Source } from '../src/sources/Source.js';
import { idleFeedOptions, idleRanges } from './idleContainer.js';

type Package = Pick<typeof Rxfeed, 'CosmosSource' | 'MemoryLeaseStore' | 'checkpointEvery' | 'createChangeFeed'>;
const BUILD = process.env.BENCH_BUILD;
const { CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed } = (BUILD
  ? await import(pathToFileURL(`${BUILD}/esm/index.js`).href)
  : await import('./built.js')) as Package;

const RANGES = Number(process.env.BENCH_RANGES ?? 1024);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 100);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 3000);
const TOP = Number(process.env.BENCH_TOP ?? 25);
const SAMPLE_BYTES = Number(process.env.BENCH_SAMPLE_BYTES ?? 256);

interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

const { container, bareLoops } = idleRanges(RANGES);
let polls = 0;

/** Bytes allocated in the window per allocating frame (`name file:line`), and the polls in it. */
async function sampled(): Promise<{ byFrame: Map<string, number>; polls: number; total: number }> {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  const before = polls;
  await session.post('HeapProfiler.startSampling', { samplingInterval: SAMPLE_BYTES, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await delay(WINDOW_MS);
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: SamplingNode } };
  const n = polls - before;
  session.disconnect();
  const byFrame = new Map<string, number>();
  let total = 0;
  const walk = (node: SamplingNode) => {
    if (node.selfSize > 0) {
      const { functionName, url, lineNumber } = node.callFrame;
      const file = url.replace(/^.*\/(node_modules\/|dist\/esm\/)/, '$1');
      const key = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
      byFrame.set(key, (byFrame.get(key) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    node.children.forEach(walk);
  };
  walk(profile.head);
  return { byFrame, polls: n, total };
}

function report(name: string, { byFrame, polls: n, total }: Awaited<ReturnType<typeof sampled>>): void {
  console.log(`\n${name}: ${n} polls, ${(total / Math.max(1, n)).toFixed(0)} bytes allocated per poll (sampled)`);
  for (const [frame, bytes] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    console.log(`${(bytes / Math.max(1, n)).toFixed(0).padStart(7)} B  ${frame}`);
  }
}

async function bare() {
  const stop = bareLoops(POLL_MS, () => polls++);
  await delay(4 * POLL_MS);
  try {
    return await sampled();
  } finally {
    await stop();
  }
}

async function rxfeed() {
  let owned = 0;
  const source = new CosmosSource<unknown>(container());
  const read = source.read.bind(source);
  (source as Source<unknown>).read = (request: ReadRequest): Promise<Page<unknown>> => {
    polls++;
    return read(request);
  };
  const feed = createChangeFeed<unknown>({
    source,
    leases: new MemoryLeaseStore(),
    ...idleFeedOptions(POLL_MS, () => owned++),
  });
  const subscription = feed.changes$.pipe(checkpointEvery(100)).subscribe();
  while (owned < RANGES) await delay(50);
  await delay(8 * POLL_MS);
  try {
    return await sampled();
  } finally {
    subscription.unsubscribe();
    await feed.stop();
  }
}

// A round of each first, unmeasured (the JIT), then the measured ones.
await bare();
await rxfeed();
report('bare loops', await bare());
report('rxfeed', await rxfeed());
