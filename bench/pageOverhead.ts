/**
 * rxfeed's own CPU per page, without HTTP: `CosmosSource` over a container whose change feed iterators answer
 * at once from prepared replies (the shape `@azure/cosmos` 4.x returns: result, continuation token, session
 * token, charge), read through the whole engine (createChangeFeed → mapChanges → checkpointEvery, an
 * in-memory lease store), against a loop reading the same replies from the same iterators per range. What
 * the SDK and the network cost is the same on both sides of the Cosmos DB bench (bench/cosmos.ts); this
 * shows what is left: rxfeed's per-page and per-batch work, with a CPU-bound profile that the machine's load
 * does not scatter (no waits on sockets).
 *
 * Run: npx tsx bench/pageOverhead.ts   (env: BENCH_PAGES=4000 BENCH_PAGE=100 BENCH_RANGES=4 BENCH_RUNS=5
 * BENCH_CHECKPOINT=100; BENCH_PROFILE=path writes path.loop.cpuprofile and path.rxfeed.cpuprofile of the last run;
 * BENCH_COMPARE=dir also runs another build of rxfeed (`dir/esm/index.js`, e.g. a copy of `dist` made before a
 * change) in the same rounds, in turn with this one, and prints the paired ratio: path.other.cpuprofile)
 */
import type { Container } from '@azure/cosmos';
import { toTotal } from './checkpointingLoop.js';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { filter, firstValueFrom, scan } from 'rxjs';
import { pageReplies, type Doc, pageFeedOptions } from './pageReplies.js';
import * as built from './built.js';
import { pathToFileURL } from 'node:url';
import type * as Rxfeed from '../src/index.js';

type Package = Pick<typeof Rxfeed, 'CosmosSource' | 'MemoryLeaseStore' | 'checkpointEvery' | 'createChangeFeed' | 'mapChanges'>;
const COMPARE = process.env.BENCH_COMPARE;
const other = COMPARE ? ((await import(pathToFileURL(`${COMPARE}/esm/index.js`).href)) as Package) : undefined;

const PAGES = Number(process.env.BENCH_PAGES ?? 4000);
const PAGE = Number(process.env.BENCH_PAGE ?? 100);
const RANGES = Number(process.env.BENCH_RANGES ?? 4);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const CHECKPOINT = Number(process.env.BENCH_CHECKPOINT ?? PAGE);
const PROFILE = process.env.BENCH_PROFILE;
const PER_RANGE = Math.ceil(PAGES / RANGES);
const CHANGES = PER_RANGE * RANGES * PAGE;

const { ranges, iterator, fakeContainer } = pageReplies(PAGES, PAGE, RANGES);

/** The hand-written side: every range's iterator read to its end, concurrently, summing a field of each document. */
async function loop(): Promise<number> {
  const counts = await Promise.all(
    ranges.map(async (_, r) => {
      const it = iterator(r, 0);
      let count = 0;
      let sum = 0;
      for (;;) {
        const page = await it.readNext();
        if (page.statusCode === 304) return count;
        for (const doc of page.result) sum += doc.total;
        count += page.result.length;
        if (sum < 0) throw new Error('unreachable');
      }
    }),
  );
  return counts.reduce((a, b) => a + b, 0);
}

async function pipeline(container: Container, rxfeed: Package = built): Promise<number> {
  const { CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed, mapChanges } = rxfeed;
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases: new MemoryLeaseStore(),
    ...pageFeedOptions(PAGE, RANGES),
  });
  const count = await firstValueFrom(
    feed.changes$.pipe(
      mapChanges(toTotal),
      checkpointEvery(CHECKPOINT),
      scan((n, batch) => n + batch.size, 0),
      filter((n) => n >= CHANGES),
    ),
  );
  await feed.stop();
  return count;
}

async function timed(name: string, fn: () => Promise<number>, profile: boolean): Promise<number> {
  const session = profile ? new Session() : undefined;
  session?.connect();
  await session?.post('Profiler.enable');
  await session?.post('Profiler.setSamplingInterval', { interval: 100 });
  await session?.post('Profiler.start');
  const cpu = process.cpuUsage();
  const count = await fn();
  const used = process.cpuUsage(cpu);
  if (session) {
    const { profile: p } = await session.post('Profiler.stop');
    writeFileSync(`${PROFILE}.${name}.cpuprofile`, JSON.stringify(p));
    session.disconnect();
  }
  if (count !== CHANGES) throw new Error(`${name} read ${count} changes, expected ${CHANGES}`);
  return (used.user + used.system) / 1000;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const container = fakeContainer();
// Warm-up: the JIT, and what rxfeed loads on its first feed (start-up, not per page).
await loop();
await pipeline(container);
if (other) await pipeline(container, other);
const loopMs: number[] = [];
const rxfeedMs: number[] = [];
const otherMs: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const last = PROFILE !== undefined && run === RUNS - 1;
  const steps = [
    async () => void loopMs.push(await timed('loop', loop, last)),
    async () => void rxfeedMs.push(await timed('rxfeed', () => pipeline(container), last)),
    ...(other ? [async () => void otherMs.push(await timed('other', () => pipeline(container, other), last))] : []),
  ];
  // Each round starts one step later, so no side always follows the same one.
  for (let i = 0; i < steps.length; i++) await steps[(run + i) % steps.length]!();
}
const ratios = rxfeedMs.map((b, i) => b / loopMs[i]!);
const pages = PER_RANGE * RANGES;
if (other) {
  const paired = rxfeedMs.map((b, i) => b / otherMs[i]!);
  console.log(
    `this build ÷ ${COMPARE}: client CPU ${median(paired).toFixed(2)}× (runs ${paired.map((x) => x.toFixed(2)).join(' ')}); ` +
      `medians ${median(rxfeedMs).toFixed(0)} ms and ${median(otherMs).toFixed(0)} ms; its own CPU per page ` +
      `${(((median(rxfeedMs) - median(loopMs)) * 1000) / pages).toFixed(1)} µs and ${(((median(otherMs) - median(loopMs)) * 1000) / pages).toFixed(1)} µs`,
  );
}
console.log(
  `${CHANGES} changes in ${pages} pages of ${PAGE}, ${RANGES} ranges, checkpointEvery(${CHECKPOINT}), ${RUNS} runs: ` +
    `client CPU loop ${median(loopMs).toFixed(0)} ms, rxfeed ${median(rxfeedMs).toFixed(0)} ms; ` +
    `rxfeed's own CPU per page ${(((median(rxfeedMs) - median(loopMs)) * 1000) / pages).toFixed(1)} µs (median difference); ` +
    `rxfeed ÷ loop ${median(ratios).toFixed(2)}× (runs ${ratios.map((x) => x.toFixed(2)).join(' ')})`,
);
