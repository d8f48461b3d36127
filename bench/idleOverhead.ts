/**
 * rxfeed's own CPU per idle poll, without HTTP: `CosmosSource` over a container whose change feed iterators
 * answer every read at once with "not modified" (the same continuation token and session token each time, as an
 * idle range does), read through the whole engine (createChangeFeed → checkpointEvery, an in-memory lease
 * store) with a short poll interval, against bare loops (`readNext`, then a timer of the same interval) over
 * iterators of the same kind. Rounds alternate; each is `BENCH_WINDOW_MS` long once every lease is owned.
 * What the SDK and the network cost per poll is the same on both sides of bench/idle.ts; this shows what is
 * left: rxfeed's per-poll work, hot (its read loop, timers, credit, CosmosSource's read path).
 *
 * Run: npx tsx bench/idleOverhead.ts   (env: BENCH_RANGES=256 BENCH_POLL_MS=20 BENCH_WINDOW_MS=3000 BENCH_RUNS=3;
 * BENCH_PROFILE=path writes path.bare.cpuprofile and path.rxfeed.cpuprofile of the last round; BENCH_COMPARE=dir also
 * runs another build (`dir/esm/index.js`, e.g. a copy of `dist` made before a change) in the same rounds, in turn
 * with this one, and prints the paired ratio)
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { idleFeedOptions, idleRanges } from './idleContainer.js';
import * as built from './built.js';
import { pathToFileURL } from 'node:url';
import type * as Rxfeed from '../src/index.js';
import type { Page, ReadRequest, Source } from '../src/sources/Source.js';

type Package = Pick<typeof Rxfeed, 'CosmosSource' | 'MemoryLeaseStore' | 'checkpointEvery' | 'createChangeFeed'>;
const COMPARE = process.env.BENCH_COMPARE;
const other = COMPARE ? ((await import(pathToFileURL(`${COMPARE}/esm/index.js`).href)) as Package) : undefined;

const RANGES = Number(process.env.BENCH_RANGES ?? 256);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 20);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 3000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const PROFILE = process.env.BENCH_PROFILE;

const { container: fakeContainer, bareLoops } = idleRanges(RANGES);

let polls = 0;
function counting<T>(inner: Source<T>): Source<T> {
  const read = inner.read.bind(inner);
  inner.read = (request: ReadRequest): Promise<Page<T>> => {
    polls++;
    return read(request);
  };
  return inner;
}

async function measure(name: string, profile: boolean): Promise<{ cpuMs: number; polls: number }> {
  const session = profile ? new Session() : undefined;
  session?.connect();
  await session?.post('Profiler.enable');
  await session?.post('Profiler.setSamplingInterval', { interval: 100 });
  await session?.post('Profiler.start');
  const before = polls;
  const cpu = process.cpuUsage();
  await delay(WINDOW_MS);
  const used = process.cpuUsage(cpu);
  const n = polls - before;
  if (session) {
    const { profile: p } = await session.post('Profiler.stop');
    writeFileSync(`${PROFILE}.${name}.cpuprofile`, JSON.stringify(p));
    session.disconnect();
  }
  return { cpuMs: (used.user + used.system) / 1000, polls: n };
}

async function rxfeedRound(profile: boolean, rxfeed: Package = built, name = 'rxfeed') {
  const { CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed } = rxfeed;
  let owned = 0;
  const feed = createChangeFeed<unknown>({
    source: counting(new CosmosSource<unknown>(fakeContainer())),
    leases: new MemoryLeaseStore(),
    ...idleFeedOptions(POLL_MS, () => owned++),
  });
  const subscription = feed.changes$.pipe(checkpointEvery(100)).subscribe();
  for (let i = 0; owned < RANGES; i++) {
    if (i % 40 === 39) console.log(`waiting: ${owned} leases owned, ${polls} polls`);
    await delay(50);
  }
  await delay(4 * POLL_MS);
  try {
    return await measure(name, profile);
  } finally {
    subscription.unsubscribe();
    await feed.stop();
  }
}

async function bareRound(profile: boolean) {
  const stop = bareLoops(POLL_MS, () => polls++);
  await delay(2 * POLL_MS);
  try {
    return await measure('bare', profile);
  } finally {
    await stop();
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
await bareRound(false);
await rxfeedRound(false);
if (other) await rxfeedRound(false, other, 'other');
const rx: number[] = [];
const bare: number[] = [];
const others: number[] = [];
const perPoll = (w: { cpuMs: number; polls: number }) => (1000 * w.cpuMs) / w.polls;
for (let run = 0; run < RUNS; run++) {
  const last = PROFILE !== undefined && run === RUNS - 1;
  const steps = [
    async () => void rx.push(perPoll(await rxfeedRound(last))),
    async () => void bare.push(perPoll(await bareRound(last))),
    ...(other ? [async () => void others.push(perPoll(await rxfeedRound(last, other, 'other')))] : []),
  ];
  // Each round starts one step later, so no side always follows the same one.
  for (let i = 0; i < steps.length; i++) await steps[(run + i) % steps.length]!();
}
if (other) {
  const paired = rx.map((x, i) => x / others[i]!);
  console.log(`this build ÷ ${COMPARE}: CPU per poll ${median(paired).toFixed(2)}× (runs ${paired.map((x) => x.toFixed(2)).join(' ')}); medians ${median(rx).toFixed(1)} and ${median(others).toFixed(1)} µs`);
}
console.log(
  `${RANGES} idle ranges, poll ${POLL_MS} ms, ${RUNS} rounds of ${WINDOW_MS} ms: CPU µs per poll bare ${median(bare).toFixed(1)} (${bare.map((x) => x.toFixed(1)).join(' ')}), ` +
    `rxfeed ${median(rx).toFixed(1)} (${rx.map((x) => x.toFixed(1)).join(' ')}); rxfeed's own per poll ${(median(rx) - median(bare)).toFixed(1)} µs`,
);
