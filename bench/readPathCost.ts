/**
 * rxfeed's instructions per read, for callgrind: the built package reads `BENCH_PAGES` pages of
 * `BENCH_PAGE` changes through `CosmosSource` over a container answering from memory (bench/pageReplies.ts),
 * createChangeFeed → mapChanges(toTotal) → checkpointEvery(`BENCH_CHECKPOINT`) on an in-memory lease store,
 * `BENCH_PASSES` times, one feed a pass. Nothing waits on a socket and nothing is random, so the instruction
 * count is the same from run to run whatever the machine's load; the difference between two pass counts,
 * divided by the pages of the passes in between, is the cost of a read with the JIT warm.
 *
 * Run (the build is `BENCH_BUILD`, default dist; `npm run build` first), bundled so that tsx is not in the count:
 * ```
 * npx esbuild bench/readPathCost.ts --bundle --platform=node --format=esm --packages=external --outfile=.rxfeed-cost/readPathCost.mjs
 * BENCH_DUMP=1 BENCH_PASSES=5 valgrind --tool=callgrind --trace-children=no --callgrind-out-file=/tmp/rp.out node .rxfeed-cost/readPathCost.mjs
 * grep -h '^summary' /tmp/rp.out.*     # one dump per pass, in order: instructions per read = a warm pass's ÷ BENCH_PAGES
 * ```
 * With `BENCH_DUMP=1` it asks callgrind (`callgrind_control --dump`) for a dump after each pass, so one run gives
 * every pass's count. Without valgrind it prints the CPU time of each pass.
 */
import { toTotal } from './checkpointingLoop.js';
import { filter, firstValueFrom, scan, type Observable } from 'rxjs';
import { pathToFileURL } from 'node:url';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import type { Container } from '@azure/cosmos';
import type { ChangeBatch } from '../src/core/ChangeBatch.js';
import type * as Rxfeed from '../src/index.js';
import { pageReplies, type Doc, pageFeedOptions } from './pageReplies.js';

const BUILD = resolve(process.env.BENCH_BUILD ?? 'dist');
const PAGES = Number(process.env.BENCH_PAGES ?? 2000);
const PAGE = Number(process.env.BENCH_PAGE ?? 100);
const RANGES = Number(process.env.BENCH_RANGES ?? 4);
const CHECKPOINT = Number(process.env.BENCH_CHECKPOINT ?? 1000);
const PASSES = Number(process.env.BENCH_PASSES ?? 2);
/** Ablations, to see what a part of the pipeline costs: `BENCH_TELEMETRY=0` (telemetry: false), `BENCH_MAP=0` (no mapChanges). */
const TELEMETRY = process.env.BENCH_TELEMETRY !== '0';
const MAP = process.env.BENCH_MAP !== '0';

const rxfeed = (await import(pathToFileURL(`${BUILD}/esm/index.js`).href)) as typeof Rxfeed;
const { changes: CHANGES, fakeContainer } = pageReplies(PAGES, PAGE, RANGES);

async function pass(container: Container): Promise<number> {
  const { CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed, mapChanges } = rxfeed;
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases: new MemoryLeaseStore(),
    ...pageFeedOptions(PAGE, RANGES),
    ...(TELEMETRY ? {} : { telemetry: false as const }),
  });
  const count = await firstValueFrom(
    feed.changes$.pipe(
      MAP ? mapChanges(toTotal) : (batches) => batches as unknown as Observable<ChangeBatch<number>>,
      checkpointEvery(CHECKPOINT),
      scan((n, batch) => n + batch.size, 0),
      filter((n) => n >= CHANGES),
    ),
  );
  await feed.stop();
  if (count !== CHANGES) throw new Error(`read ${count} changes, expected ${CHANGES}`);
  return count;
}

const DUMP = process.env.BENCH_DUMP === '1';
/** Has callgrind dump its counts since the last dump (the event loop keeps running while it does). */
const dump = (tag: string): Promise<unknown> =>
  new Promise((done) => spawn('callgrind_control', [`--dump=${tag}`, String(process.pid)], { stdio: 'ignore' }).on('exit', done));

const container = fakeContainer();
if (DUMP) await dump('start');
for (let i = 0; i < PASSES; i++) {
  const cpu = process.cpuUsage();
  await pass(container);
  const used = process.cpuUsage(cpu);
  if (DUMP) await dump(`pass ${i + 1}`);
  console.log(`pass ${i + 1}: ${CHANGES} changes, ${PAGES} pages of ${PAGE}: ${((used.user + used.system) / 1000).toFixed(0)} ms CPU`);
}
