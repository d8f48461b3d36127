/**
 * The two sides of the fair-ceiling comparison of bench/cosmos.ts — the checkpointing per-range SDK loops and the
 * rxfeed pipeline (createChangeFeed → mapChanges → checkpointEvery, Cosmos DB lease store) — as windows of one
 * process, after a chosen number of untimed passes, with each window's client CPU split into the main thread
 * (where rxfeed's and the SDK's JavaScript runs) and the whole process (which also counts V8's background
 * threads: the optimizing compiler, concurrent marking, sweeping). Made for profiling one side at a time with a
 * sampler that counts on-CPU time only (`perf record -e cpu-clock`), which the machine's load does not scatter.
 *
 * Needs an emulator holding the bench's 100k changes (start one, then run bench/cosmos.ts once against it).
 *
 * Run: BENCH_ENDPOINT=… npx tsx bench/cosmosWindows.ts   (env: BENCH_SIDE=both|fair|rxfeed (default both:
 * the two alternate, paired ratios printed), BENCH_RUNS=5 windows per side, BENCH_WARMUP=1 untimed passes of
 * each side, BENCH_FAIR_LISTING=1 (the loops list their lease documents with a query first, as rxfeed's
 * bootstrap does), BENCH_PAGE=100, BENCH_CHECKPOINT=1000, BENCH_CHANGES=100000; BENCH_PIDFILE=path: after the
 * warm-up, write this process's id there and wait 2.5 s, so that a profiler can attach to the windows alone:
 * `perf record -e cpu-clock -F 2000 -g -p $(cat path)` with node started as
 * `node --perf-basic-prof --interpreted-frames-native-stack --expose-gc --import tsx bench/cosmosWindows.ts`;
 * `perf script -F tid | sort | uniq -c` then splits the samples by thread, the main thread's id being the pid;
 * BENCH_KEEP_FEEDS=1 keeps every stopped rxfeed feed referenced (an experiment: whether the optimized code V8
 * drops between windows, once the previous feed's objects are collected, survives then);
 * BENCH_MARK=1 prints a line `=== window <side> start|end` around each timed window, so that the output of
 * `node --trace-opt --trace-deopt --import tsx bench/cosmosWindows.ts` can be split by window)
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { readFileSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { filter, firstValueFrom, scan } from 'rxjs';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import { CosmosLeaseStore, CosmosSource, checkpointEvery, createChangeFeed, mapChanges } from './built.js';
import { checkpointingLoop, toTotal } from './checkpointingLoop.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const CHANGES = Number(process.env.BENCH_CHANGES ?? 100_000);
const PAGE = Number(process.env.BENCH_PAGE ?? 100);
const CHECKPOINT = Number(process.env.BENCH_CHECKPOINT ?? 1_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
const SIDE = process.env.BENCH_SIDE ?? 'both';
if (SIDE !== 'both' && SIDE !== 'fair' && SIDE !== 'rxfeed') throw new Error(`BENCH_SIDE: expected both, fair or rxfeed, got ${SIDE}`);
const ENDPOINT = process.env.BENCH_ENDPOINT;
if (!ENDPOINT) throw new Error('BENCH_ENDPOINT: the endpoint of an emulator holding the bench changes (see bench/cosmos.ts)');

interface Doc {
  id: string;
  total: number;
}

const stamp = `${Date.now().toString(36)}-${process.pid}`;
let runId = 0;

/** The fair ceiling, as in bench/cosmos.ts: per-range loops, each replacing its lease document every CHECKPOINT changes. */
async function fair(container: Container, leases: Container): Promise<number> {
  const ranges = await container.getFeedRanges();
  const prefix = `loops-${stamp}-${++runId}`;
  // BENCH_FAIR_LISTING=1: the loops first list their lease documents with a query, as rxfeed's bootstrap does.
  if (process.env.BENCH_FAIR_LISTING === '1') {
    await leases.items.query({ query: 'SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)', parameters: [{ name: '@prefix', value: prefix }] }).fetchAll();
  }
  const counts = await Promise.all(
    ranges.map((range, i) => checkpointingLoop(container, leases, range, `${prefix}.${i}`, { page: PAGE, every: CHECKPOINT })),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/** The rxfeed pipeline of bench/cosmos.ts, from subscribe until every change reached the checkpoint (stop() not timed). */
async function rxfeed(container: Container, leases: Container): Promise<{ count: number; stop: () => Promise<void> }> {
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases: new CosmosLeaseStore({ container: leases, partitionKeyPath: '/id' }),
    instanceName: 'bench',
    leasePrefix: `bench-${stamp}-${++runId}.`,
    startFrom: 'beginning',
    maxItemCount: PAGE,
    maxInFlightChanges: Math.max(10_000, PAGE * 8),
  });
  const count = await firstValueFrom(
    feed.changes$.pipe(
      mapChanges(toTotal),
      checkpointEvery(CHECKPOINT),
      scan((n, batch) => n + batch.size, 0),
      filter((n) => n >= CHANGES),
    ),
  );
  // BENCH_KEEP_FEEDS=1: every feed stays referenced after it stopped (what it still holds lives on).
  if (process.env.BENCH_KEEP_FEEDS === '1') keptFeeds.push(feed);
  return { count, stop: () => feed.stop() };
}
const keptFeeds: unknown[] = [];

/** The main thread's on-CPU time so far (ms), from the kernel's scheduler statistics. */
const mainThreadMs = (): number => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const list = (xs: number[], digits = 0): string => xs.map((x) => x.toFixed(digits)).join(' ');

const client = new CosmosClient({ endpoint: ENDPOINT, key: EMULATOR_KEY });
try {
  const database = client.database('bench');
  const container = database.container('orders');
  const leases = database.container('leases');
  const sides = { fair: { cpu: [] as number[], main: [] as number[], wall: [] as number[] }, rxfeed: { cpu: [] as number[], main: [] as number[], wall: [] as number[] } };
  // BENCH_MARK=1: a line before and after each timed window, to split a `node --trace-opt --trace-deopt` log by window.
  const mark = process.env.BENCH_MARK === '1' ? (what: string) => console.log(`=== ${what}`) : () => undefined;
  const window = async (side: 'fair' | 'rxfeed'): Promise<void> => {
    gc();
    mark(`window ${side} start`);
    const started = performance.now();
    const cpu = process.cpuUsage();
    const main = mainThreadMs();
    let stop: (() => Promise<void>) | undefined;
    let count: number;
    if (side === 'fair') count = await fair(container, leases);
    else ({ count, stop } = await rxfeed(container, leases));
    const used = process.cpuUsage(cpu);
    sides[side].main.push(mainThreadMs() - main);
    sides[side].cpu.push((used.user + used.system) / 1000);
    sides[side].wall.push(performance.now() - started);
    mark(`window ${side} end`);
    await stop?.();
    if (count < CHANGES) throw new Error(`${side} read ${count} changes, expected ${CHANGES}`);
  };
  for (let pass = 0; pass < WARMUP; pass++) {
    await fair(container, leases);
    await (await rxfeed(container, leases)).stop();
  }
  for (const side of ['fair', 'rxfeed'] as const) {
    sides[side].cpu.length = 0;
    sides[side].main.length = 0;
    sides[side].wall.length = 0;
  }
  if (process.env.BENCH_PIDFILE) {
    writeFileSync(process.env.BENCH_PIDFILE, String(process.pid));
    await new Promise((resolve) => setTimeout(resolve, 2500));
  }
  for (let run = 0; run < RUNS; run++) {
    // Both sides alternate which goes first, so neither always follows the other.
    const order: ('fair' | 'rxfeed')[] = SIDE === 'both' ? (run % 2 === 0 ? ['rxfeed', 'fair'] : ['fair', 'rxfeed']) : [SIDE];
    for (const side of order) await window(side);
  }
  console.log(`${CHANGES} changes, pages of ${PAGE}, checkpoint every ${CHECKPOINT}, ${RUNS} windows per side after ${WARMUP} untimed pass(es) of each`);
  for (const [side, s] of Object.entries(sides)) {
    if (s.cpu.length === 0) continue;
    console.log(`${side}: client CPU ms ${list(s.cpu)} (median ${median(s.cpu).toFixed(0)}); main thread ms ${list(s.main)} (median ${median(s.main).toFixed(0)}); wall ms ${list(s.wall)} (median ${median(s.wall).toFixed(0)})`);
  }
  if (SIDE === 'both') {
    const paired = (a: number[], b: number[]) => {
      const ratios = a.map((x, i) => x / b[i]!);
      return `${median(ratios).toFixed(2)}× (runs ${list(ratios, 2)})`;
    };
    console.log(
      `paired, rxfeed ÷ fair: client CPU ${paired(sides.rxfeed.cpu, sides.fair.cpu)}; main thread CPU ${paired(sides.rxfeed.main, sides.fair.main)}; ` +
        `throughput ${paired(sides.fair.wall, sides.rxfeed.wall)}`,
    );
  }
} finally {
  client.dispose();
}
