/**
 * Idle cost: one host owning many idle leases (nothing is written), rxfeed (createChangeFeed → checkpointEvery
 * on CosmosSource and CosmosLeaseStore, lease renewals included) against bare SDK polls of the same ranges
 * (one change feed iterator per range, `readNext` then a wait of the same poll interval). Both in one run,
 * alternating rounds, on the same emulator in its own process; the CPU counted is this process's only.
 * Prints the CPU per poll of each, their ratio (target ≤ 1.1) and the heap after a GC at the start and the
 * end of each window (rxfeed's target: ≤ 64 MB and flat). No assertions (figures vary by machine).
 *
 * Both sides are measured alike: each window starts after the same warm-up (`BENCH_WARMUP_MS` once every
 * lease is owned, so start-up work such as first connections and iterator set-up stays out of it) and the
 * same full GC. The bare polls are phased across the poll interval as rxfeed's were in the window before
 * (its readers start in bunches, as leases are acquired in rounds): how bunched polls are changes their
 * cost a lot (polls that wake together share wake-ups, connections and GC work; evenly spread ones cost
 * about twice as much each), so both sides must be phased alike. `BENCH_PHASES=spread` phases the bare polls
 * evenly, `together` starts them all at once. The output says how bunched each side's polls were.
 *
 * Run: npx tsx bench/idle.ts   (env: BENCH_RANGES=1024 BENCH_POLL_MS=5000 BENCH_WINDOW_MS=10000 BENCH_RUNS=3
 * BENCH_WARMUP_MS=2×poll BENCH_PHASES=mirror|spread|together BENCH_LEASES=cosmos|memory; BENCH_IDLE_POLL_MS=60000 sets rxfeed's
 * idlePollIntervalMs (compare % of a core then, not CPU per poll; warm-up 2×that);
 * BENCH_PROFILE=path writes CPU profiles of the windows only: path.rxfeed.cpuprofile, path.bare.cpuprofile,
 * to read with bench/profileTop.ts)
 */
import { ChangeFeedStartFrom, CosmosClient, type Container } from '@azure/cosmos';
import { writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { Session } from 'node:inspector/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import { CosmosLeaseStore, CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed } from './built.js';
import type { Page, ReadRequest, Source } from '../src/sources/Source.js';
import { spawnEmulator } from './spawnEmulator.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The emulator gives a container one range per 10,000 RU/s asked for (the lease container: one, as in production). */
const RU_PER_RANGE = 10_000;
const RANGES = Number(process.env.BENCH_RANGES ?? 1024);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 5000);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 10_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const PROFILE = process.env.BENCH_PROFILE;
/** rxfeed's `idlePollIntervalMs` (off unless given): the bare polls keep `POLL_MS`. */
const IDLE_POLL_MS = process.env.BENCH_IDLE_POLL_MS ? Number(process.env.BENCH_IDLE_POLL_MS) : undefined;
/** Wait before each window, once ready (ms). With idlePollIntervalMs, quiet partitions reach the longest wait after a few doublings. */
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 2 * (IDLE_POLL_MS ?? POLL_MS));
/**
 * rxfeed's lease store: `cosmos` (default; its renewals and acquire scans, 1,024 lease documents every 13 s,
 * land in some windows and not others, so rounds vary) or `memory` (rxfeed's read path only).
 */
const LEASES = process.env.BENCH_LEASES ?? 'cosmos';
if (LEASES !== 'cosmos' && LEASES !== 'memory') throw new Error(`BENCH_LEASES: expected cosmos or memory, got ${LEASES}`);
/**
 * How the bare polls are phased across the poll interval: `mirror` (default) as rxfeed's polls were in the
 * window before (same share of polls in each slot of the interval), `spread` evenly, `together` all at once.
 */
const PHASES = process.env.BENCH_PHASES ?? 'mirror';
if (PHASES !== 'mirror' && PHASES !== 'spread' && PHASES !== 'together') throw new Error(`BENCH_PHASES: expected mirror, spread or together, got ${PHASES}`);

/** Connections this process opened (the emulator closes a connection idle for 5 s, the poll interval). */
let connections = 0;
const connect = Socket.prototype.connect;
Socket.prototype.connect = function (this: Socket, ...args: unknown[]) {
  connections++;
  return (connect as (...a: unknown[]) => Socket).apply(this, args);
} as typeof Socket.prototype.connect;

/** Slots of the poll interval that polls are counted in, to see how evenly they are phased. */
const SLOTS = 100;

/** Counts polls, and in which slot of the poll interval each one starts. */
class Counter {
  polls = 0;
  readonly slots = new Uint32Array(SLOTS);
  count(): void {
    this.polls++;
    this.slots[Math.floor(((Date.now() % POLL_MS) * SLOTS) / POLL_MS)]!++;
  }
}

/** The share of `slots`' polls that started in the busiest tenth of the slots (10%: evenly phased; 100%: bunched). */
function busiestTenth(slots: Uint32Array): number {
  const sorted = [...slots].sort((a, b) => b - a);
  const total = sorted.reduce((n, x) => n + x, 0);
  return (100 * sorted.slice(0, SLOTS / 10).reduce((n, x) => n + x, 0)) / Math.max(1, total);
}

/** Counts reads (one per poll of an idle partition); costs a counter increment. */
function counting<T>(inner: Source<T>, counter: Counter): Source<T> {
  const read = inner.read.bind(inner);
  inner.read = (request: ReadRequest): Promise<Page<T>> => {
    counter.count();
    return read(request);
  };
  return inner;
}

interface Window {
  /** Polls per slot of the poll interval during the window. */
  profile: Uint32Array;
  cpuMs: number;
  /** Of `cpuMs`, the kernel's (sockets, timers). */
  sysMs: number;
  polls: number;
  /** Connections opened during the window. */
  connections: number;
  /** Share of the window's polls in the busiest tenth of the poll interval (see {@link busiestTenth}). */
  bunchedPct: number;
  heapStartMb: number;
  heapEndMb: number;
}

const heapMb = (): number => {
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

/**
 * Measures `WINDOW_MS` of this process's CPU, once `ready()` and `WARMUP_MS` have passed, starting and
 * ending with a full GC (the same for both sides).
 */
async function window(counter: Counter, ready: () => boolean, side: 'rxfeed' | 'bare'): Promise<Window> {
  for (let i = 0; !ready(); i++) {
    if (i % 50 === 49) console.log('waiting…', counter.polls);
    await delay(100);
  }
  await delay(WARMUP_MS);
  const heapStartMb = heapMb();
  const polls = counter.polls;
  const slots = counter.slots.slice();
  const connectionsBefore = connections;
  const profiler = PROFILE ? new Session() : undefined;
  profiler?.connect();
  await profiler?.post('Profiler.enable');
  await profiler?.post('Profiler.start');
  const cpu = process.cpuUsage();
  await delay(WINDOW_MS);
  const used = process.cpuUsage(cpu);
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(`${PROFILE}.${side}.cpuprofile`, JSON.stringify(profile));
    profiler.disconnect();
  }
  const profile = counter.slots.map((n, i) => n - slots[i]!);
  return { profile, connections: connections - connectionsBefore, cpuMs: (used.user + used.system) / 1000, sysMs: used.system / 1000, polls: counter.polls - polls, bunchedPct: busiestTenth(profile), heapStartMb, heapEndMb: heapMb() };
}

let runId = 0;
const RUN_STAMP = Date.now().toString(36);

async function rxfeedWindow(container: Container, leases: Container): Promise<Window> {
  const counter = new Counter();
  let owned = 0;
  const feed = createChangeFeed<unknown>({
    source: counting(new CosmosSource<unknown>(container), counter),
    leases: LEASES === 'memory' ? new MemoryLeaseStore() : new CosmosLeaseStore({ container: leases, partitionKeyPath: '/id' }),
    instanceName: 'idle',
    leasePrefix: `idle-${RUN_STAMP}-${++runId}.`,
    startFrom: 'now',
    pollIntervalMs: POLL_MS,
    ...(IDLE_POLL_MS !== undefined ? { idlePollIntervalMs: IDLE_POLL_MS } : {}),
    events: (e) => {
      if (e.type === 'leaseAcquired') owned++;
      // One line each: start-up and shutdown meet the emulator's closed keep-alive connections (ECONNRESET).
      if (e.type === 'error') console.error(`rxfeed error event${e.lease !== undefined ? ` (lease ${e.lease})` : ''}: ${e.error.message}`);
    },
  });
  const subscription = feed.changes$.pipe(checkpointEvery(100)).subscribe({ error: (e: unknown) => console.error('rxfeed failed:', e) });
  try {
    return await window(counter, () => owned >= RANGES, 'rxfeed');
  } finally {
    subscription.unsubscribe();
    await feed.stop();
  }
}

/**
 * When (ms from now) the `i`-th of `n` bare loops first polls. `mirror`: the loops are given the slots of the
 * poll interval in proportion to `profile` (polls per slot, as counted in rxfeed's window), each at a point
 * within its slot; `spread`: evenly across the interval; `together`: now.
 */
function phaseOf(i: number, n: number, profile: Uint32Array): number {
  if (PHASES === 'together') return 0;
  let at = (i * POLL_MS) / n; // spread: a point in the interval
  if (PHASES === 'mirror') {
    const total = profile.reduce((sum, x) => sum + x, 0);
    const quantile = ((i + 0.5) / n) * total;
    let slot = 0;
    let seen = profile[0]!;
    while (seen <= quantile && slot < SLOTS - 1) {
      slot++;
      seen += profile[slot]!;
    }
    at = ((slot + ((i * 0.618) % 1)) * POLL_MS) / SLOTS;
  }
  return (at - (Date.now() % POLL_MS) + POLL_MS) % POLL_MS;
}

async function bareWindow(container: Container, profile: Uint32Array): Promise<Window> {
  const counter = new Counter();
  let stopped = false;
  const ranges = await container.getFeedRanges();
  // A plain timer between polls, as the least a loop of one's own would do. (A timer given an abort signal
  // adds a listener to it per wait; with 1,024 loops on one signal, each add scans the others: ~12% of the
  // window, which would be the harness's cost, not the SDK's.) Stopping waits for the last timers instead.
  const loops = ranges.map(async (range, i) => {
    const phase = phaseOf(i, ranges.length, profile);
    if (phase > 0) await delay(phase);
    const iterator = container.items.getChangeFeedIterator({ maxItemCount: 100, changeFeedStartFrom: ChangeFeedStartFrom.Now(range) });
    while (!stopped) {
      counter.count();
      await iterator.readNext();
      await delay(POLL_MS);
    }
  });
  try {
    return await window(counter, () => true, 'bare');
  } finally {
    stopped = true;
    await Promise.all(loops);
  }
}


const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const emulator = process.env.BENCH_ENDPOINT ? { endpoint: process.env.BENCH_ENDPOINT, child: undefined } : await spawnEmulator();
const client = new CosmosClient({ endpoint: emulator.endpoint, key: EMULATOR_KEY });
try {
  const { database } = await client.databases.createIfNotExists({ id: 'idle' });
  const { container } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/pk'], version: 2 }, throughput: RANGES * RU_PER_RANGE });
  const { container: leases } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
  console.log(`node ${process.version}; emulator (own process) with ${RANGES} ranges; poll ${POLL_MS} ms; windows of ${WINDOW_MS} ms after ${WARMUP_MS} ms of warm-up; bare polls ${PHASES === 'mirror' ? "phased as rxfeed's were" : PHASES === 'spread' ? 'phased evenly across the interval' : 'all at once'}; rxfeed's leases in ${LEASES === 'memory' ? 'memory' : 'the Cosmos lease container'}; ${RUNS} rounds, alternating${IDLE_POLL_MS !== undefined ? `; rxfeed idlePollIntervalMs ${IDLE_POLL_MS}` : ''}`);
  const rx: Window[] = [];
  const bare: Window[] = [];
  for (let run = 0; run < RUNS; run++) {
    rx.push(await rxfeedWindow(container, leases));
    bare.push(await bareWindow(container, rx.at(-1)!.profile));
  }
  const perPoll = (w: Window) => w.cpuMs / Math.max(1, w.polls);
  const rxPerPoll = median(rx.map(perPoll));
  const barePerPoll = median(bare.map(perPoll));
  const core = (w: Window) => (100 * w.cpuMs) / WINDOW_MS;
  const sysShare = (w: Window) => (100 * w.sysMs) / Math.max(1, w.cpuMs);
  console.log(`\nwhat                         | CPU ms per poll | % of a core | % of it kernel | polls per window`);
  console.log(`-----------------------------|-----------------|-------------|----------------|-----------------`);
  console.log(`bare SDK polls (per range)   | ${barePerPoll.toFixed(3).padStart(15)} | ${median(bare.map(core)).toFixed(1).padStart(11)} | ${median(bare.map(sysShare)).toFixed(0).padStart(14)} | ${median(bare.map((w) => w.polls))}`);
  console.log(`${`rxfeed, ${RANGES} owned leases`.padEnd(28)} | ${rxPerPoll.toFixed(3).padStart(15)} | ${median(rx.map(core)).toFixed(1).padStart(11)} | ${median(rx.map(sysShare)).toFixed(0).padStart(14)} | ${median(rx.map((w) => w.polls))}`);
  const bunched = (ws: Window[]) => ws.map((w) => `${w.bunchedPct.toFixed(0)}%`).join(' ');
  console.log(`\npolls in the busiest tenth of the poll interval (10%: even): rxfeed ${bunched(rx)}; bare ${bunched(bare)}`);
  const opened = (ws: Window[]) => ws.map((w) => w.connections).join(' ');
  console.log(`connections opened per window: rxfeed ${opened(rx)}; bare ${opened(bare)}`);
  console.log(`CPU per idle poll, rxfeed ÷ bare: ${(rxPerPoll / barePerPoll).toFixed(2)}×`);
  const heaps = (ws: Window[]) => ws.map((w) => `${w.heapStartMb.toFixed(1)} → ${w.heapEndMb.toFixed(1)}`).join('; ');
  console.log(`heap after GC, window start → end (MB): rxfeed ${heaps(rx)}; bare ${heaps(bare)}`);
  console.log(`(per-poll CPU ms, rounds: rxfeed ${rx.map((w) => perPoll(w).toFixed(3)).join(' ')}; bare ${bare.map((w) => perPoll(w).toFixed(3)).join(' ')})`);
  console.log(`(ratio per round, rxfeed ÷ the bare window after it: ${rx.map((w, i) => (perPoll(w) / perPoll(bare[i]!)).toFixed(2)).join(' ')})`);
} finally {
  client.dispose();
  emulator.child?.kill('SIGTERM');
}
