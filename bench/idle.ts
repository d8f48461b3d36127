/**
 * Idle cost: one host owning many idle leases (nothing is written), rxfeed (createChangeFeed → checkpointEvery
 * on CosmosSource and CosmosLeaseStore, lease renewals included) against bare SDK polls of the same ranges
 * (one change feed iterator per range, `readNext` then a wait of the same poll interval). Both in one run,
 * in paired rounds (each round one window of each; the first side alternates from round to round), on the
 * same emulator in its own process; the CPU counted is this process's (user + system, all its threads: the
 * GC's and the compiler's too), with the emulator's beside it. Prints the CPU per poll of each, the paired
 * ratio (median of the rounds' ratios and their middle half, target ≤ 1.1), where each side's CPU per poll
 * went (main thread, other threads, GC pauses by kind) and the heap after a GC at the start and the end of
 * each window (rxfeed's target: ≤ 128 MB and flat). No assertions (figures vary by machine).
 *
 * Both sides are measured alike: an unmeasured round of each runs first (the JIT warms the code both
 * share), and each window starts after the same warm-up (`BENCH_WARMUP_MS` once every lease is owned, so
 * start-up work such as first connections and iterator set-up stays out of it) and the same full GC. The bare polls are phased across the poll interval as rxfeed's were in the window before
 * (its readers start in bunches, as leases are acquired in rounds): how bunched polls are changes their
 * cost a lot (polls that wake together share wake-ups, connections and GC work; evenly spread ones cost
 * about twice as much each), so both sides must be phased alike. `BENCH_PHASES=spread` phases the bare polls
 * evenly, `together` starts them all at once. The output says how bunched each side's polls were.
 *
 * Run: npx tsx bench/idle.ts   (env: BENCH_RANGES=1024 BENCH_POLL_MS=5000 BENCH_WINDOW_MS=10000 BENCH_RUNS=3
 * BENCH_WARMUP_MS=2×poll BENCH_PHASES=mirror|spread|together BENCH_LEASES=cosmos|memory; BENCH_IDLE_POLL_MS=60000 sets rxfeed's
 * idlePollIntervalMs (compare % of a core then, not CPU per poll; warm-up 2×that);
 * BENCH_MAX_READS=n sets rxfeed's maxConcurrentReads (default: the source's advice; 100000: unbounded, as before it existed), and the bare
 * loops' bound with it; BENCH_BARE_READS=n bounds the bare loops' reads in flight alone (0: unbounded);
 * BENCH_COMPARE=dir runs another build of rxfeed (`dir/esm/index.js`) as a third window of every round and prints the paired ratios;
 * BENCH_PROFILE=path writes CPU profiles of the windows only: path.rxfeed.cpuprofile, path.bare.cpuprofile,
 * to read with bench/profileTop.ts; BENCH_HEAP_SAMPLE=bytes runs each window under V8's sampling heap profiler (objects
 * collected by GCs kept) and prints the bytes allocated per poll and the allocating frames that allocated most per poll
 * (BENCH_HEAP_TOP=30 of them, and by file); BENCH_PIN=1 pins this process and the emulator to a CPU each; BENCH_BUSY=8 BENCH_BUSY_MS=1000: that many partition keys are written
 * every that many ms throughout, by a process of their own, and rxfeed's write → processed latency for them
 * is printed (0 keys: none), to show that `idlePollIntervalMs` slows only partitions that stay quiet)
 */
import { ChangeFeedStartFrom, CosmosClient, type Container } from '@azure/cosmos';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import * as built from './built.js';
import { pathToFileURL } from 'node:url';
import type * as Rxfeed from '../src/index.js';
import type { Page, ReadRequest, Source } from '../src/sources/Source.js';
import { fileOf, type SamplingNode } from './heapSamples.js';
import { requests } from './requests.js';
import { besideEmulator, mainThreadCpuMs, processCpuMs, spawnEmulator } from './spawnEmulator.js';
import { median, ratioLine } from './stats.js';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tap } from 'rxjs';
import type { ChangeBatch } from '../src/core/ChangeBatch.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The emulator gives a container one range per 10,000 RU/s asked for (the lease container: one, as in production). */
const RU_PER_RANGE = 10_000;
type Package = Pick<typeof Rxfeed, 'CosmosLeaseStore' | 'CosmosSource' | 'MemoryLeaseStore' | 'checkpointEvery' | 'createChangeFeed'>;
/** BENCH_COMPARE=dir: another build of rxfeed (`dir/esm/index.js`, e.g. a copy of `dist` made before a change), a third window in every round. */
const COMPARE = process.env.BENCH_COMPARE;
const other = COMPARE ? ((await import(pathToFileURL(`${COMPARE}/esm/index.js`).href)) as Package) : undefined;
const { CosmosSource } = built;
const RANGES = Number(process.env.BENCH_RANGES ?? 1024);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 5000);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? 10_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const PROFILE = process.env.BENCH_PROFILE;
/** BENCH_HEAP_SAMPLE=bytes: each window under V8's sampling heap profiler (one sample per that many bytes; GC'd objects kept). */
const HEAP_SAMPLE = process.env.BENCH_HEAP_SAMPLE ? Number(process.env.BENCH_HEAP_SAMPLE) : undefined;
const HEAP_TOP = Number(process.env.BENCH_HEAP_TOP ?? 30);
/** rxfeed's `idlePollIntervalMs` (off unless given): the bare polls keep `POLL_MS`. */
const IDLE_POLL_MS = process.env.BENCH_IDLE_POLL_MS ? Number(process.env.BENCH_IDLE_POLL_MS) : undefined;
/** rxfeed's `maxConcurrentReads` (default: the source's advice); a large value shows rxfeed without the bound. */
const MAX_READS = process.env.BENCH_MAX_READS ? Number(process.env.BENCH_MAX_READS) : undefined;
/**
 * The most bare reads in flight at once: by default the bound rxfeed's reads have (`BENCH_MAX_READS`, else the
 * source's advice, 128 with the SDK's agent); `BENCH_BARE_READS=0`: unbounded, as before. Unbounded loops that
 * fall behind (a loaded machine) poll in one burst: thousands of reads in flight, a new connection for each
 * beyond the agent's kept-alive ones, and every loop's next poll due at once again, so the bursts persist and a
 * bare window costs several times what it costs spread (bench/PROFILE.md, wip/idlecpu).
 */
const BARE_READS = process.env.BENCH_BARE_READS !== undefined ? Number(process.env.BENCH_BARE_READS) : undefined;
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
/** Partition keys written throughout (each a busy partition among the idle ones), and how often (ms). */
const BUSY = Number(process.env.BENCH_BUSY ?? 8);
const BUSY_MS = Number(process.env.BENCH_BUSY_MS ?? 1000);
if (PHASES !== 'mirror' && PHASES !== 'spread' && PHASES !== 'together') throw new Error(`BENCH_PHASES: expected mirror, spread or together, got ${PHASES}`);


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

/** GC pauses on the main thread: count and ms by kind (perf_hooks 'gc' entries). */
interface GcPauses {
  minor: number;
  minorMs: number;
  major: number;
  majorMs: number;
  incremental: number;
  incrementalMs: number;
  weak: number;
  weakMs: number;
}
/** The 'gc' entries seen so far (delivered after the GC, so a window counts those that started within it). */
const gcEntries: { kind: 'minor' | 'major' | 'incremental' | 'weak'; startTime: number; duration: number }[] = [];
const gcKinds: Record<number, 'minor' | 'major' | 'incremental' | 'weak'> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak',
};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = gcKinds[(entry as unknown as { detail: { kind: number } }).detail.kind];
    if (kind !== undefined) gcEntries.push({ kind, startTime: entry.startTime, duration: entry.duration });
  }
}).observe({ entryTypes: ['gc'] });

/** The GC pauses that started between `from` and `to` (performance.now() ms); forgets those before `to`. */
function gcPauses(from: number, to: number): GcPauses {
  const pauses: GcPauses = { minor: 0, minorMs: 0, major: 0, majorMs: 0, incremental: 0, incrementalMs: 0, weak: 0, weakMs: 0 };
  for (const { kind, startTime, duration } of gcEntries) {
    if (startTime < from || startTime >= to) continue;
    pauses[kind]++;
    pauses[`${kind}Ms`] += duration;
  }
  const kept = gcEntries.findIndex((e) => e.startTime >= to);
  gcEntries.splice(0, kept === -1 ? gcEntries.length : kept);
  return pauses;
}

interface Window {
  /** Polls per slot of the poll interval during the window. */
  profile: Uint32Array;
  cpuMs: number;
  /** Of `cpuMs`, the main thread's (the rest: V8's compiler and GC threads, libuv's pool); NaN without /proc. */
  mainMs: number;
  /** The emulator process's CPU over the window (ms, 10 ms ticks); NaN when it runs elsewhere. */
  emulatorMs: number;
  /** GC pauses on the main thread during the window (the explicit GCs around it excluded). */
  gc: GcPauses;
  /** Of `cpuMs`, the kernel's (sockets, timers). */
  sysMs: number;
  polls: number;
  /** Connections opened during the window. */
  connections: number;
  /** Requests other than change feed reads sent during the window (rxfeed: the lease store's). */
  otherRequests: number;
  /** Most requests in flight at once during the window (the SDK's agent keeps at most 256 idle connections). */
  maxInFlight: number;
  /** Share of the window's polls in the busiest tenth of the poll interval (see {@link busiestTenth}). */
  bunchedPct: number;
  heapStartMb: number;
  heapEndMb: number;
  /** rxfeed: write → processed latency (ms) of the busy keys' changes processed during the window. */
  latencies: number[];
}

/** Write → processed latencies (ms) recorded while a window is measured; `undefined` outside one. */
let latencies: number[] | undefined;

const heapMb = (): number => {
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

/**
 * Measures `WINDOW_MS` of this process's CPU, once `ready()` and `WARMUP_MS` have passed, starting and
 * ending with a full GC (the same for both sides).
 */
async function window(counter: Counter, ready: () => boolean, side: 'rxfeed' | 'bare', windowMs = WINDOW_MS): Promise<Window> {
  for (let i = 0; !ready(); i++) {
    if (i % 50 === 49) console.log('waiting…', counter.polls);
    await delay(100);
  }
  await delay(WARMUP_MS);
  const heapStartMb = heapMb();
  const polls = counter.polls;
  const slots = counter.slots.slice();
  const connectionsBefore = requests.connections;
  const otherBefore = requests.other;
  requests.maxInFlight = requests.inFlight;
  const profiler = PROFILE ? new Session() : undefined;
  profiler?.connect();
  await profiler?.post('Profiler.enable');
  await profiler?.post('Profiler.start');
  const heapSampler = HEAP_SAMPLE ? new Session() : undefined;
  heapSampler?.connect();
  await heapSampler?.post('HeapProfiler.enable');
  await heapSampler?.post('HeapProfiler.startSampling', { samplingInterval: HEAP_SAMPLE, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  latencies = [];
  const startedAt = performance.now();
  const emulatorBefore = emulatorCpuMs();
  const mainBefore = mainThreadCpuMs();
  const cpu = process.cpuUsage();
  await delay(windowMs);
  const used = process.cpuUsage(cpu);
  const mainMs = (mainThreadCpuMs() ?? NaN) - (mainBefore ?? NaN);
  const emulatorMs = (emulatorCpuMs() ?? NaN) - (emulatorBefore ?? NaN);
  const endedAt = performance.now();
  const windowPolls = counter.polls - polls;
  if (heapSampler) {
    const { profile } = (await heapSampler.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: SamplingNode } };
    heapSampler.disconnect();
    printAllocations(side, profile.head, windowPolls);
  }
  await delay(50); // the window's last 'gc' entries are delivered after it
  const gc = gcPauses(startedAt, endedAt);
  const measured = latencies;
  latencies = undefined;
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(`${PROFILE}.${side}.cpuprofile`, JSON.stringify(profile));
    profiler.disconnect();
  }
  const profile = counter.slots.map((n, i) => n - slots[i]!);
  return { profile, mainMs, emulatorMs, gc, connections: requests.connections - connectionsBefore, otherRequests: requests.other - otherBefore, maxInFlight: requests.maxInFlight, cpuMs: (used.user + used.system) / 1000, sysMs: used.system / 1000, polls: counter.polls - polls, bunchedPct: busiestTenth(profile), heapStartMb, heapEndMb: heapMb(), latencies: measured };
}

/** Prints the window's bytes allocated per poll (sampled), by allocating frame and by file. */
function printAllocations(side: string, head: SamplingNode, polls: number): void {
  const byFrame = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  const walk = (node: SamplingNode) => {
    if (node.selfSize > 0) {
      const { functionName, url, lineNumber } = node.callFrame;
      const file = fileOf(url);
      const key = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
      byFrame.set(key, (byFrame.get(key) ?? 0) + node.selfSize);
      const group = file.startsWith('node_modules/') ? file.split('/').slice(0, file.startsWith('node_modules/@') ? 3 : 2).join('/') : file;
      byFile.set(group, (byFile.get(group) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    node.children.forEach(walk);
  };
  walk(head);
  if (process.env.BENCH_HEAP_OUT) writeFileSync(`${process.env.BENCH_HEAP_OUT}.${side}.${Date.now()}.json`, JSON.stringify({ polls, byFrame: [...byFrame] }));
  const perPoll = (bytes: number) => (bytes / Math.max(1, polls)).toFixed(0).padStart(7);
  console.log(`allocated (sampled), ${side}: ${perPoll(total).trim()} bytes per poll (${polls} polls, ${(total / 1e6).toFixed(1)} MB)`);
  for (const [frame, bytes] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, HEAP_TOP)) console.log(`${perPoll(bytes)} B  ${frame}`);
  console.log(`  by file / package:`);
  for (const [file, bytes] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, HEAP_TOP)) console.log(`${perPoll(bytes)} B  ${file}`);
}

let runId = 0;
const RUN_STAMP = Date.now().toString(36);

async function rxfeedWindow(container: Container, leases: Container, windowMs?: number, rxfeed: Package = built): Promise<Window> {
  const { CosmosLeaseStore, CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed } = rxfeed;
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
    ...(MAX_READS !== undefined ? { maxConcurrentReads: MAX_READS } : {}),
    events: (e) => {
      if (e.type === 'leaseAcquired') owned++;
      // One line each: start-up and shutdown meet the emulator's closed keep-alive connections (ECONNRESET).
      if (e.type === 'error') console.error(`rxfeed error event${e.lease !== undefined ? ` (lease ${e.lease})` : ''}: ${e.error.message}`);
    },
  });
  const processed = (batch: ChangeBatch<unknown>) => {
    const now = Date.now();
    for (const change of batch.changes) {
      const writtenAt = (change.document as { writtenAt?: number } | undefined)?.writtenAt;
      if (writtenAt !== undefined) latencies?.push(now - writtenAt);
    }
  };
  const subscription = feed.changes$.pipe(tap(processed), checkpointEvery(100)).subscribe({ error: (e: unknown) => console.error('rxfeed failed:', e) });
  try {
    return await window(counter, () => owned >= RANGES, 'rxfeed', windowMs);
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

async function bareWindow(container: Container, profile: Uint32Array, windowMs?: number): Promise<Window> {
  const counter = new Counter();
  let stopped = false;
  const ranges = await container.getFeedRanges();
  // The bound on reads in flight, first come first served (as rxfeed's for polls); 0: none.
  const bound = BARE_READS ?? MAX_READS ?? new CosmosSource<unknown>(container).concurrentReads;
  let inFlight = 0;
  const queued: (() => void)[] = [];
  const slot = (): Promise<void> | undefined => {
    if (bound === 0 || inFlight < bound) {
      inFlight++;
      return undefined;
    }
    return new Promise((resolve) => queued.push(resolve));
  };
  const release = () => {
    const next = queued.shift();
    if (next) next();
    else inFlight--;
  };
  // A plain timer between polls, as the least a loop of one's own would do. (A timer given an abort signal
  // adds a listener to it per wait; with 1,024 loops on one signal, each add scans the others: ~12% of the
  // window, which would be the harness's cost, not the SDK's.) Stopping waits for the last timers instead.
  const loops = ranges.map(async (range, i) => {
    const phase = phaseOf(i, ranges.length, profile);
    if (phase > 0) await delay(phase);
    const iterator = container.items.getChangeFeedIterator({ maxItemCount: 100, changeFeedStartFrom: ChangeFeedStartFrom.Now(range) });
    while (!stopped) {
      await slot();
      counter.count();
      try {
        await iterator.readNext();
      } finally {
        release();
      }
      await delay(POLL_MS);
    }
  });
  try {
    return await window(counter, () => true, 'bare', windowMs);
  } finally {
    stopped = true;
    await Promise.all(loops);
  }
}

const emulator = process.env.BENCH_ENDPOINT ? { endpoint: process.env.BENCH_ENDPOINT, child: undefined } : await spawnEmulator();
/** The emulator's CPU so far (ms); `undefined` when it runs elsewhere (BENCH_ENDPOINT without BENCH_EMULATOR_PID). */
function emulatorCpuMs(): number | undefined {
  return processCpuMs(emulator.child?.pid ?? (process.env.BENCH_EMULATOR_PID ? Number(process.env.BENCH_EMULATOR_PID) : undefined));
}
const client = new CosmosClient({ endpoint: emulator.endpoint, key: EMULATOR_KEY });
let writer: ReturnType<typeof spawn> | undefined;
try {
  const { database } = await client.databases.createIfNotExists({ id: 'idle' });
  const { container } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/pk'], version: 2 }, throughput: RANGES * RU_PER_RANGE });
  const { container: leases } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
  writer =
    BUSY > 0
      ? spawn(...besideEmulator(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('busyWriter.ts', import.meta.url)), emulator.endpoint, 'idle', 'orders', String(BUSY), String(BUSY_MS)]), { stdio: 'inherit' })
      : undefined;
  console.log(`node ${process.version}; emulator (own process) with ${RANGES} ranges; poll ${POLL_MS} ms; windows of ${WINDOW_MS} ms after ${WARMUP_MS} ms of warm-up; bare polls ${PHASES === 'mirror' ? "phased as rxfeed's were" : PHASES === 'spread' ? 'phased evenly across the interval' : 'all at once'}; rxfeed's leases in ${LEASES === 'memory' ? 'memory' : 'the Cosmos lease container'}; bare reads in flight ${BARE_READS === 0 ? 'unbounded' : `at most ${BARE_READS ?? MAX_READS ?? "rxfeed's default"}`}; ${RUNS} paired rounds, the first side alternating${process.env.BENCH_PIN === '1' ? '; pinned: this process (all threads) on CPU 0, the emulator and the writer on CPU 1' : ''}${IDLE_POLL_MS !== undefined ? `; rxfeed idlePollIntervalMs ${IDLE_POLL_MS}` : ''}${MAX_READS !== undefined ? `; rxfeed maxConcurrentReads ${MAX_READS}` : ''}; ${BUSY > 0 ? `${BUSY} busy partition keys written every ${BUSY_MS} ms` : 'no busy partitions'}`);
  const rx: Window[] = [];
  const bare: Window[] = [];
  // An unmeasured round of each first (one poll interval long), so neither side's first window pays for the
  // JIT compiling the code the two share (the SDK's), which whichever side ran first would pay alone.
  const rx0 = await rxfeedWindow(container, leases, POLL_MS);
  await bareWindow(container, rx0.profile, POLL_MS);
  // Paired rounds: one window of each side per round, rxfeed first in even rounds and bare first in odd ones
  // (phased as rxfeed's latest window), so neither side always follows the other.
  // With BENCH_COMPARE, the other build's window is a third step, and each round starts one step later.
  const compared: Window[] = [];
  if (other) await rxfeedWindow(container, leases, POLL_MS, other);
  let phases = rx0.profile;
  for (let run = 0; run < RUNS; run++) {
    if (!other) {
      if (run % 2 === 0) {
        rx.push(await rxfeedWindow(container, leases));
        bare.push(await bareWindow(container, rx.at(-1)!.profile));
      } else {
        bare.push(await bareWindow(container, phases));
        rx.push(await rxfeedWindow(container, leases));
      }
      phases = rx.at(-1)!.profile;
    } else {
      const steps = [
        async () => void rx.push(await rxfeedWindow(container, leases)),
        async () => void bare.push(await bareWindow(container, phases)),
        async () => void compared.push(await rxfeedWindow(container, leases, undefined, other)),
      ];
      for (let i = 0; i < steps.length; i++) {
        await steps[(run + i) % steps.length]!();
        if ((run + i) % steps.length === 0) phases = rx.at(-1)!.profile;
      }
    }
    for (const [name, w] of [['rxfeed', rx.at(-1)!], ['bare', bare.at(-1)!], ...(other ? [['compared', compared.at(-1)!] as const] : [])] as const) {
      const us = (ms: number) => ((1000 * ms) / Math.max(1, w.polls)).toFixed(1);
      console.log(
        `round ${run + 1} ${name}: ${w.polls} polls, µs per poll ${us(w.cpuMs)} (main thread ${us(w.mainMs)}, GC pauses ${us(w.gc.minorMs + w.gc.majorMs + w.gc.incrementalMs)}; emulator ${us(w.emulatorMs)}); ` +
          `GCs minor ${w.gc.minor}, major ${w.gc.major}; heap ${w.heapStartMb.toFixed(1)} → ${w.heapEndMb.toFixed(1)} MB; other requests ${w.otherRequests}`,
      );
    }
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
  const most = (ws: Window[]) => ws.map((w) => w.maxInFlight).join(' ');
  console.log(`most requests in flight at once per window: rxfeed ${most(rx)}; bare ${most(bare)}`);
  const others = (ws: Window[]) => ws.map((w) => w.otherRequests).join(' ');
  console.log(`requests other than change feed reads per window: rxfeed ${others(rx)}; bare ${others(bare)}`);
  console.log(`CPU per idle poll, rxfeed ÷ bare: ${(rxPerPoll / barePerPoll).toFixed(2)}×`);
  const heaps = (ws: Window[]) => ws.map((w) => `${w.heapStartMb.toFixed(1)} → ${w.heapEndMb.toFixed(1)}`).join('; ');
  console.log(`heap after GC, window start → end (MB): rxfeed ${heaps(rx)}; bare ${heaps(bare)}`);
  console.log(`(per-poll CPU ms, rounds: rxfeed ${rx.map((w) => perPoll(w).toFixed(3)).join(' ')}; bare ${bare.map((w) => perPoll(w).toFixed(3)).join(' ')})`);
  const ratios = rx.map((w, i) => perPoll(w) / perPoll(bare[i]!));
  console.log(`(ratio per round, rxfeed ÷ the bare window of its round: ${ratios.map((r) => r.toFixed(2)).join(' ')})`);
  console.log(`CPU per idle poll, rxfeed ÷ bare, paired: ${ratioLine(ratios)}`);
  if (other) {
    console.log(`CPU per idle poll, ${COMPARE} ÷ bare, paired: ${ratioLine(compared.map((w, i) => perPoll(w) / perPoll(bare[i]!)))}`);
    console.log(`CPU per idle poll, this build ÷ ${COMPARE}, paired: ${ratioLine(rx.map((w, i) => perPoll(w) / perPoll(compared[i]!)))}`);
    console.log(`(per-poll CPU ms, rounds: ${COMPARE} ${compared.map((w) => perPoll(w).toFixed(3)).join(' ')}; heap after GC ${compared.map((w) => `${w.heapStartMb.toFixed(1)} → ${w.heapEndMb.toFixed(1)}`).join('; ')})`);
  }
  // Where each side's CPU per poll went (µs, medians over the rounds): the process (all threads), its main
  // thread, its other threads (V8's compiler and GC helpers), the main thread's GC pauses by kind, and the emulator's.
  const us = (ws: Window[], f: (w: Window) => number) => median(ws.map((w) => (1000 * f(w)) / Math.max(1, w.polls)));
  const perWindow = (ws: Window[], f: (w: Window) => number) => median(ws.map(f));
  console.log(`\nµs per poll (median of rounds) | process | main thread | other threads | GC pauses: minor | major | incremental | GCs per window: minor / major | emulator`);
  for (const [name, ws] of [['bare', bare], ['rxfeed', rx]] as const) {
    console.log(
      `${name.padEnd(30)} | ${us(ws, (w) => w.cpuMs).toFixed(1).padStart(7)} | ${us(ws, (w) => w.mainMs).toFixed(1).padStart(11)} | ${us(ws, (w) => w.cpuMs - w.mainMs).toFixed(1).padStart(13)} | ` +
        `${us(ws, (w) => w.gc.minorMs).toFixed(1).padStart(16)} | ${us(ws, (w) => w.gc.majorMs).toFixed(1).padStart(5)} | ${us(ws, (w) => w.gc.incrementalMs).toFixed(1).padStart(11)} | ` +
        `${`${perWindow(ws, (w) => w.gc.minor)} / ${perWindow(ws, (w) => w.gc.major)}`.padStart(29)} | ${us(ws, (w) => w.emulatorMs).toFixed(1).padStart(8)}`,
    );
  }
  const rounds = (ws: Window[], f: (w: Window) => number) => ws.map((w) => ((1000 * f(w)) / Math.max(1, w.polls)).toFixed(1)).join(' ');
  console.log(`(µs per poll by round, main thread: rxfeed ${rounds(rx, (w) => w.mainMs)}; bare ${rounds(bare, (w) => w.mainMs)})`);
  console.log(`(µs per poll by round, other threads: rxfeed ${rounds(rx, (w) => w.cpuMs - w.mainMs)}; bare ${rounds(bare, (w) => w.cpuMs - w.mainMs)})`);
  console.log(`(µs per poll by round, GC pauses: rxfeed ${rounds(rx, (w) => w.gc.minorMs + w.gc.majorMs + w.gc.incrementalMs)}; bare ${rounds(bare, (w) => w.gc.minorMs + w.gc.majorMs + w.gc.incrementalMs)})`);
  console.log(`(µs per poll by round, emulator: rxfeed ${rounds(rx, (w) => w.emulatorMs)}; bare ${rounds(bare, (w) => w.emulatorMs)})`);
  if (BUSY > 0) {
    const all = rx.flatMap((w) => w.latencies).sort((a, b) => a - b);
    const at = (q: number) => all[Math.min(all.length - 1, Math.floor(q * all.length))] ?? NaN;
    console.log(
      `rxfeed write → processed latency of the ${BUSY} busy keys (${all.length} changes in the windows): ` +
        `p50 ${at(0.5).toFixed(0)} ms, p95 ${at(0.95).toFixed(0)} ms, max ${(all.at(-1) ?? NaN).toFixed(0)} ms (poll interval ${POLL_MS} ms)`,
    );
  }
} finally {
  writer?.kill();
  client.dispose();
  emulator.child?.kill('SIGTERM');
}
