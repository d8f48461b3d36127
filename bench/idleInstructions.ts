/**
 * A fixed number of idle polls, for instruction and cache-miss counts under valgrind (load-independent): the
 * engine of bench/idleOverhead.ts (`CosmosSource` over iterators answering "not modified", an in-memory lease
 * store, `checkpointEvery`) or its bare loops, over `BENCH_RANGES` ranges polled every `BENCH_POLL_MS`; once
 * every lease is owned and `BENCH_WARMUP_POLLS` polls more were made, it counts `BENCH_POLLS` polls and exits
 * at once (no teardown). Two runs that differ only in `BENCH_POLLS` give the cost of the polls between them:
 * (Ir of the longer − Ir of the shorter) ÷ the difference, with everything a poll causes (GC, timers, all threads).
 *
 * Run: valgrind --tool=callgrind --smc-check=all-non-file node --import tsx bench/idleInstructions.ts
 * (env: BENCH_SIDE=rxfeed|bare BENCH_BUILD=dir (default ./dist) BENCH_RANGES=512 BENCH_POLL_MS=2000
 * BENCH_WARMUP_POLLS=2×ranges BENCH_POLLS=2048; BENCH_COUNT_TIMERS=1: the feed's scheduler counts its `schedule` calls, and the
 * count per counted poll is printed: timers per idle poll, without valgrind)
 */
import { setTimeout as delay } from 'node:timers/promises';
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { pathToFileURL } from 'node:url';
import { idleFeedOptions, idleRanges } from './idleContainer.js';
import type * as Rxfeed from '../src/index.js';
import type { Page, ReadRequest, Source } from '../src/sources/Source.js';

type Package = Pick<typeof Rxfeed, 'CosmosSource' | 'MemoryLeaseStore' | 'checkpointEvery' | 'createChangeFeed'>;
const SIDE = process.env.BENCH_SIDE ?? 'rxfeed';
const BUILD = process.env.BENCH_BUILD ?? new URL('../dist', import.meta.url).pathname;
const RANGES = Number(process.env.BENCH_RANGES ?? 512);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP_POLLS ?? 2 * RANGES);
const POLLS = Number(process.env.BENCH_POLLS ?? 2048);
const COUNT_TIMERS = process.env.BENCH_COUNT_TIMERS === '1';

let timers = 0;
let timersAtStart = 0;
/** asyncScheduler, counting what is scheduled on it. */
const countingScheduler: SchedulerLike = {
  now: () => asyncScheduler.now(),
  schedule: ((work: never, delayMs?: number, state?: never) => {
    timers++;
    return asyncScheduler.schedule(work, delayMs, state);
  }) as SchedulerLike['schedule'],
};

const { container, bareLoops } = idleRanges(RANGES);
let polls = 0;
let owned = 0;
let counted = -1;
const onPoll = (): void => {
  polls++;
  if (counted >= 0 && ++counted > POLLS) {
    const timersPerPoll = COUNT_TIMERS ? `; scheduler.schedule calls per poll ${((timers - timersAtStart) / POLLS).toFixed(3)}` : '';
    console.log(`${SIDE}: ${POLLS} polls counted after ${WARMUP} warm-up polls (${RANGES} ranges, poll ${POLL_MS} ms)${timersPerPoll}`);
    process.exit(0);
  }
};
if (SIDE === 'bare') {
  bareLoops(POLL_MS, onPoll);
  owned = RANGES;
} else {
  const { CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed } = (await import(pathToFileURL(`${BUILD}/esm/index.js`).href)) as Package;
  const source = new CosmosSource<unknown>(container());
  const read = source.read.bind(source);
  (source as Source<unknown>).read = (request: ReadRequest): Promise<Page<unknown>> => {
    onPoll();
    return read(request);
  };
  createChangeFeed<unknown>({ source, leases: new MemoryLeaseStore(), ...idleFeedOptions(POLL_MS, () => owned++), ...(COUNT_TIMERS ? { scheduler: countingScheduler } : {}) })
    .changes$.pipe(checkpointEvery(100))
    .subscribe();
}
while (owned < RANGES) await delay(50);
const start = polls;
while (polls < start + WARMUP) await delay(50);
timersAtStart = timers;
counted = 0;
