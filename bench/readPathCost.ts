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
 *
 * With `BENCH_CALLS=1` (no valgrind) it counts, through V8's precise coverage (call counts per function, exact
 * whatever the load), the JavaScript functions that ran in each pass and their calls, per read: rxfeed's own
 * (the build), rxjs's and the rest (the SDK stand-in, node): `node .rxfeed-cost/readPathCost.mjs` after bundling.
 * TurboFan jobs a pass: `BENCH_GC=1 node --expose-gc --trace-opt …` (a full GC before each pass, as the steady bench
 * does before its windows), counting `compiling method … TURBOFAN` lines between the pass lines.
 */
import { toTotal } from './checkpointingLoop.js';
import { filter, firstValueFrom, scan, type Observable } from 'rxjs';
import { pathToFileURL } from 'node:url';
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { Session } from 'node:inspector/promises';
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

const CALLS = process.env.BENCH_CALLS === '1' || process.env.BENCH_CALLS === 'list';
const LIST = process.env.BENCH_CALLS === 'list';
const session = CALLS ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
}

/**
 * The functions that ran about once a read or more (at least `PAGES / 4` calls in the pass) and their calls a
 * read, by owner, split into per-change ones (50 calls a read or more) and the rest; V8 resets its counters on
 * each take. With `BENCH_CALLS=list` the per-read ones are listed too.
 */
async function calls(): Promise<string> {
  if (!session) return '';
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const tally: Record<string, { read: number; readCalls: number; change: number; changeCalls: number }> = {};
  const listed: string[] = [];
  for (const script of result) {
    const owner = script.url.startsWith(pathToFileURL(BUILD).href) ? 'rxfeed' : script.url.includes('/node_modules/rxjs/') ? 'rxjs' : 'other';
    const t = (tally[owner] ??= { read: 0, readCalls: 0, change: 0, changeCalls: 0 });
    for (const fn of script.functions) {
      const count = fn.ranges[0]?.count ?? 0;
      if (count < PAGES / 4) continue;
      if (count >= 50 * PAGES) {
        t.change++;
        t.changeCalls += count;
      } else {
        t.read++;
        t.readCalls += count;
        if (LIST && owner !== 'other') listed.push(`  ${(count / PAGES).toFixed(2)} ${owner} ${fn.functionName || '(anonymous)'} ${script.url.split('/').slice(-2).join('/')}:${fn.ranges[0]!.startOffset}`);
      }
    }
  }
  const per = (n: number) => (n / PAGES).toFixed(1);
  const line = Object.entries(tally)
    .map(([owner, t]) => `${owner} ${t.read} functions ${per(t.readCalls)} calls a read (+ ${t.change} per change, ${per(t.changeCalls)})`)
    .join('; ');
  return LIST ? `${line}\n${listed.sort().join('\n')}` : line;
}

const container = fakeContainer();
if (DUMP) await dump('start');
await calls();
/** `BENCH_GC=1` (with `node --expose-gc`): a full GC before each pass, as the steady Cosmos DB bench does before its windows. */
const GC = process.env.BENCH_GC === '1' ? (globalThis as { gc?: () => void }).gc : undefined;
for (let i = 0; i < PASSES; i++) {
  GC?.();
  const cpu = process.cpuUsage();
  await pass(container);
  const used = process.cpuUsage(cpu);
  if (DUMP) await dump(`pass ${i + 1}`);
  const counted = await calls();
  console.log(`pass ${i + 1}: ${CHANGES} changes, ${PAGES} pages of ${PAGE}: ${((used.user + used.system) / 1000).toFixed(0)} ms CPU${counted ? `; ${counted}` : ''}`);
}
