/**
 * Cosmos DB change feed throughput: an rxfeed pipeline (createChangeFeed → mapChanges → checkpointEvery(n))
 * against the fair ceiling — concurrent per-range SDK loops that write their continuation to a lease document
 * every n changes (a conditional replace, awaited before the next read, as a minimal hand-written processor
 * does) — and, as information, the same loops without writes and a bare `getChangeFeedIterator` loop, over
 * the same changes on the same emulator in the same run,
 * plus a plain `CosmosSource.read` loop to separate the source from the pipeline, and the lease-store
 * writes each 100k changes cost. Prints a table; no assertions (figures vary by machine).
 *
 * The emulator runs in its own process (as the service is remote), so its CPU does not count against the
 * reader's, and its garbage collector does not pause the reader.
 *
 * Run: npx tsx bench/cosmos.ts   (env: BENCH_CHANGES=200000 BENCH_PAGE=1000 BENCH_RUNS=3 BENCH_RANGES=4 BENCH_CHECKPOINT=1000;
 * BENCH_GROUP_MS=n sets the lease store's groupWritesMs (default: the store's own; 0 sends every write alone);
 * BENCH_PROFILE=path writes CPU profiles of the last run's windows: path.fair.cpuprofile, path.loops.cpuprofile,
 * path.rxfeed.cpuprofile, path.sparse.cpuprofile (BENCH_PROFILE_US=n samples every n µs instead of V8's 1,000);
 * BENCH_IN_FLIGHT=n sets rxfeed's maxInFlightChanges (default max(10000, 2 pages per range));
 * BENCH_LEASES=memory gives the pipeline rows an in-memory lease store (no lease requests);
 * BENCH_ACQUIRE_MS=n sets rxfeed's leaseAcquireIntervalMs (default: the processor's own, 13 s);
 * BENCH_EMULATOR_PID=n: the process id of the emulator at BENCH_ENDPOINT, to report its CPU per window;
 * BENCH_WARMUP=n runs n untimed passes of every window first (default 1);
 * BENCH_PIN=1 runs this process on the first CPU and the emulator on the second, which makes runs steadier;
 * BENCH_STEADY=1 measures the steady state instead: per side ONE feed (rxfeed) or set of per-range loops started
 * once, then alternated windows of BENCH_CHANGES new changes written into that side's own container; no window
 * starts a new feed, so none pays a feed's tier-up (bench/cosmosSteady.ts; BENCH_MARK=1 marks its windows;
 * BENCH_PROFILE=path profiles every timed window there: path.rxfeed.r<round>.cpuprofile, path.loops.r<round>…;
 * BENCH_COMPARE=dir adds a third side, the same pipeline on another build of rxfeed (`dir/esm/index.js`, e.g. a
 * copy of `dist` made before a change), printed paired with this build); BENCH_STEADY_GC=0 there skips the full
 * GC before each window, which drops optimized code whose maps died, so the windows show what a process pays
 * between its own full GCs)
 *
 * Each window starts with a full GC, so none pays for the garbage of the one before, and each run takes the
 * windows in another order (rotated by one), so none always follows the same one.
 */
import { ChangeFeedStartFrom, CosmosClient, StatusCodes, type ChangeFeedPullModelIterator, type Container, type OperationInput } from '@azure/cosmos';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { GCProfiler, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { firstValueFrom, filter, scan } from 'rxjs';
import type { Partition, StartFrom } from '../src/core/Partition.js';
import { EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import { CosmosLeaseStore, CosmosSource, MemoryLeaseStore, checkpointEvery, createChangeFeed, mapChanges } from './built.js';
import type { Lease, NewLease } from '../src/leases/Lease.js';
import type { LeaseStore } from '../src/leases/LeaseStore.js';
import type { Source } from '../src/sources/Source.js';
import { requestKinds, requests } from './requests.js';
import { checkpointingLoop, toTotal } from './checkpointingLoop.js';
import { processCpuMs, spawnEmulator } from './spawnEmulator.js';
import { steadyState, type RxfeedPackage } from './cosmosSteady.js';
import { pathToFileURL } from 'node:url';

setFlagsFromString('--expose-gc');
/** A full GC: each window starts with none of the previous window's garbage left to collect. */
const gc = runInNewContext('gc') as () => void;

/** The lease store's `items.bulk` calls and the operations they carried, so far. */
const bulkCalls = { calls: 0, operations: 0 };
const CHANGES = Number(process.env.BENCH_CHANGES ?? 200_000);
const PAGE = Number(process.env.BENCH_PAGE ?? 1_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** The emulator gives a container one range per 10,000 RU/s asked for (the lease container: one, as in production). */
const RU_PER_RANGE = 10_000;
const RANGES = Number(process.env.BENCH_RANGES ?? 4);
const PROFILE = process.env.BENCH_PROFILE;
/** Changes between checkpoints, for rxfeed (`checkpointEvery(n)`) and the checkpointing loops alike (BENCH_PAGE: every page). */
const CHECKPOINT = Number(process.env.BENCH_CHECKPOINT ?? 1_000);
/** rxfeed's lease store in the pipeline rows: `cosmos` (default), or `memory` (what the pipeline costs without lease requests). */
const LEASES = process.env.BENCH_LEASES ?? 'cosmos';
if (LEASES !== 'cosmos' && LEASES !== 'memory') throw new Error(`BENCH_LEASES: expected cosmos or memory, got ${LEASES}`);
/** rxfeed's read-ahead budget (`maxInFlightChanges`, BENCH_IN_FLIGHT); default max(10,000, 2 pages per range). */
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? Math.max(10_000, PAGE * RANGES * 2));
/**
 * rxfeed's `leaseAcquireIntervalMs` (BENCH_ACQUIRE_MS): by default the processor's own (13 s), as in production.
 * Start-up does not wait for it (the bootstrap owns the leases it creates, and the first balance round runs at
 * once on existing leases); a shorter one adds a listing of every lease per interval to the measured window.
 */
const ACQUIRE = process.env.BENCH_ACQUIRE_MS === undefined ? {} : { leaseAcquireIntervalMs: Number(process.env.BENCH_ACQUIRE_MS) };
const GROUP_MS = process.env.BENCH_GROUP_MS === undefined ? {} : { groupWritesMs: Number(process.env.BENCH_GROUP_MS) };
/** Untimed passes of every loop and of the pipeline before the measured runs (BENCH_WARMUP, default 1). */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
/** BENCH_STEADY=1: one long-lived feed per side, timed over windows of new changes (bench/cosmosSteady.ts). */
const STEADY = process.env.BENCH_STEADY === '1';
/** BENCH_COMPARE=dir (steady mode): also runs another build of rxfeed (`dir/esm/index.js`) as a third side, paired with this one. */
const COMPARE = process.env.BENCH_COMPARE;
if (COMPARE && !STEADY) throw new Error('BENCH_COMPARE is supported in the steady mode (BENCH_STEADY=1) only');

interface Doc {
  id: string;
  pk: string;
  n: number;
  total: number;
}

/** Counts lease-store writes (create, replace, delete) by kind. */
class CountingStore implements LeaseStore {
  writes = 0;
  reads = 0;
  constructor(private readonly inner: LeaseStore) {}
  list(prefix: string) {
    this.reads++;
    return this.inner.list(prefix);
  }
  read(id: string) {
    this.reads++;
    return this.inner.read(id);
  }
  createIfAbsent(lease: NewLease) {
    this.writes++;
    return this.inner.createIfAbsent(lease);
  }
  replace(lease: Lease) {
    this.writes++;
    return this.inner.replace(lease);
  }
  delete(lease: Lease) {
    this.writes++;
    return this.inner.delete(lease);
  }
}

async function load(container: Container): Promise<number> {
  const started = performance.now();
  const chunk = 10_000;
  for (let i = 0; i < CHANGES; i += chunk) {
    const ops: OperationInput[] = [];
    for (let j = i; j < Math.min(CHANGES, i + chunk); j++) {
      ops.push({ operationType: 'Create', partitionKey: `k${j % 4093}`, resourceBody: { id: `o${j}`, pk: `k${j % 4093}`, n: j, total: j % 100 } });
    }
    // Retry what the bulk executor gave up on (throttling or timeouts under load); 409 means it landed.
    let pending = ops;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const results = await container.items.executeBulkOperations(pending);
      const failed = results.filter((r) => ![201, 409].includes(Number(r.response?.statusCode ?? r.error?.code ?? 0)));
      if (failed.length > 0 && attempt >= 5) {
        throw new Error(`${failed.length} writes failed while loading: ${String(failed[0]?.response?.statusCode ?? failed[0]?.error?.message)}`);
      }
      pending = failed.map((r) => r.operationInput);
    }
  }
  return performance.now() - started;
}

/** Reads one change feed iterator until it reports nothing new; returns how many changes it gave. */
async function drainIterator(iterator: ChangeFeedPullModelIterator<Doc>): Promise<number> {
  let count = 0;
  let sum = 0;
  for (;;) {
    const page = await iterator.readNext();
    if (page.statusCode === StatusCodes.NotModified) break;
    for (const doc of page.result) sum += doc.total;
    count += page.result.length;
  }
  if (sum < 0) throw new Error('unreachable');
  return count;
}

/** The baseline: one whole-container iterator, read until it reports nothing new. */
function bare(container: Container): Promise<number> {
  return drainIterator(container.items.getChangeFeedIterator<Doc>({ maxItemCount: PAGE, changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }));
}

/**
 * The ceiling for a hand-written client: one iterator per feed range, all read concurrently, each until it
 * reports nothing new.
 */
async function perRange(container: Container): Promise<number> {
  const ranges = await container.getFeedRanges();
  const counts = await Promise.all(
    ranges.map((range) =>
      drainIterator(container.items.getChangeFeedIterator<Doc>({ maxItemCount: PAGE, changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) })),
    ),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * The fair ceiling: the per-range loops of {@link perRange}, each also keeping its continuation in a lease
 * document of its own, replaced conditionally (ETag) once `every` changes were read since the last write and
 * awaited before the next read, plus a last write at the end; the lease documents are created first (the
 * loops' bootstrap). Returns the changes read and the lease writes made.
 */
async function checkpointingLoops(container: Container, leaseContainer: Container, every: number): Promise<{ count: number; writes: number }> {
  const ranges = await container.getFeedRanges();
  const stamp = `loops-${RUN_STAMP}-${++runId}`;
  let writes = 0;
  const counts = await Promise.all(
    ranges.map((range, i) =>
      checkpointingLoop(container, leaseContainer, range, `${stamp}.${i}`, {
        page: PAGE,
        every,
        onWrite: () => {
          writes++;
        },
      }),
    ),
  );
  return { count: counts.reduce((a, b) => a + b, 0), writes };
}

/** CosmosSource.read, one partition after another, each from the beginning to its end. */
async function sourceLoop(container: Container): Promise<number> {
  const source = new CosmosSource<Doc>(container);
  let count = 0;
  for (const partition of await source.listPartitions()) count += await drain(source, partition);
  return count;
}

async function drain(source: Source<Doc>, partition: Partition): Promise<number> {
  let from: StartFrom = 'beginning';
  let count = 0;
  for (;;) {
    const page = await source.read({ partition, from, maxItemCount: PAGE });
    count += page.changes.length;
    if (page.changes.length === 0) return count;
    from = { position: page.position };
  }
}

let runId = 0;
const RUN_STAMP = Date.now().toString(36);

/** The rxfeed pipeline, from subscribe (lease bootstrap included) until every change reached the checkpoint. */
async function pipeline(
  container: Container,
  leaseContainer: Container,
  checkpointCount = CHECKPOINT,
): Promise<{ count: number; writes: number; checkpoints: number; startupMs: number; prefix: string; stop: () => Promise<void> }> {
  const started = performance.now();
  const prefix = `bench-${RUN_STAMP}-${++runId}.`;
  let firstBatchAt: number | undefined;
  const store = new CountingStore(LEASES === 'memory' ? new MemoryLeaseStore() : new CosmosLeaseStore({ container: leaseContainer, partitionKeyPath: '/id', ...GROUP_MS }));
  let checkpoints = 0;
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases: store,
    instanceName: 'bench',
    // Fresh leases for every run (an emulator given by BENCH_ENDPOINT keeps those of earlier runs).
    leasePrefix: prefix,
    startFrom: 'beginning',
    maxItemCount: PAGE,
    maxInFlightChanges: IN_FLIGHT,
    ...ACQUIRE,
    events: (e) => {
      if (e.type === 'checkpoint') checkpoints++;
    },
  });
  const count = await firstValueFrom(
    feed.changes$.pipe(
      mapChanges(toTotal),
      checkpointEvery(checkpointCount),
      scan((n, batch) => {
        if (batch.size > 0) firstBatchAt ??= performance.now();
        return n + batch.size;
      }, 0),
      filter((n) => n >= CHANGES),
    ),
  );
  // Counted before stop(): the final checkpoints and releases on shutdown are not part of the steady state.
  // stop() (the last checkpoints, then the releases) is timed apart: a processor pays it once, not per 100k changes.
  const writes = store.writes;
  return { count, writes, checkpoints, startupMs: (firstBatchAt ?? started) - started, prefix, stop: () => feed.stop() };
}

/**
 * Start-up on leases that already exist (those of an earlier run, released on its stop): from subscribe
 * until every lease is owned and its first read answered (nothing is left to read, so no batch comes).
 */
async function restart(container: Container, leaseContainer: Container, prefix: string): Promise<number> {
  const started = performance.now();
  const source = new CosmosSource<Doc>(container);
  let reads = 0;
  const read = source.read.bind(source);
  let allRead: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allRead = resolve));
  source.read = async (request) => {
    const page = await read(request);
    if (++reads === RANGES) allRead();
    return page;
  };
  const feed = createChangeFeed<Doc>({
    source,
    leases: new CosmosLeaseStore({ container: leaseContainer, partitionKeyPath: '/id', ...GROUP_MS }),
    instanceName: 'bench',
    leasePrefix: prefix,
    maxItemCount: PAGE,
    ...ACQUIRE,
  });
  const subscription = feed.changes$.pipe(checkpointEvery(1000)).subscribe();
  await done;
  const ms = performance.now() - started;
  subscription.unsubscribe();
  await feed.stop();
  return ms;
}

/** The emulator process's CPU so far (ms); `undefined` when it runs elsewhere (BENCH_ENDPOINT without BENCH_EMULATOR_PID, its process id). */
const emulatorCpuMs = (): number | undefined => processCpuMs(emulator.child?.pid ?? (process.env.BENCH_EMULATOR_PID ? Number(process.env.BENCH_EMULATOR_PID) : undefined));

/**
 * The CPU time (ms) of this process's main thread so far, from the kernel's scheduler statistics (ns, on-CPU
 * time): the process's CPU time also counts V8's background threads (optimizing compiler, concurrent marking
 * and sweeping), which a window pays for code still being optimized; `undefined` without /proc.
 */
function mainThreadCpuMs(): number | undefined {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return undefined;
  }
}

/** Wall time and this process's CPU time (user + system) of `fn`, and the emulator's; with `profileAs`, its CPU profile too. */
async function timed<R>(
  fn: () => Promise<R>,
  profileAs?: string,
): Promise<{ ms: number; cpuMs: number; mainMs: number | undefined; overheads: Overheads; emulatorMs: number | undefined; sent: Sent; result: R }> {
  // BENCH_STEADY_GC=0 (steady mode): no full GC before a window. The full GC drops optimized code whose maps died,
  // so each window re-optimizes part of the read path; without it a window shows what a process pays between its
  // own full GCs (each window then carries the other side's garbage: the rounds alternate which side goes first).
  if (!(STEADY && process.env.BENCH_STEADY_GC === '0')) gc();
  const profiler = profileAs ? new Session() : undefined;
  profiler?.connect();
  await profiler?.post('Profiler.enable');
  // BENCH_PROFILE_US: the sampling interval (µs; V8's default is 1,000): finer samples for rxfeed's small frames.
  if (process.env.BENCH_PROFILE_US) await profiler?.post('Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_PROFILE_US) });
  await profiler?.post('Profiler.start');
  const started = performance.now();
  const cpu = process.cpuUsage();
  const mainBefore = mainThreadCpuMs();
  const usage = process.resourceUsage();
  const gcProfiler = new GCProfiler();
  gcProfiler.start();
  const emulatorBefore = emulatorCpuMs();
  const sentBefore = { ...requests };
  const kindsBefore = { ...requestKinds };
  const bulkBefore = { ...bulkCalls };
  const result = await fn();
  const sent = { changeFeed: requests.changeFeed - sentBefore.changeFeed, other: requests.other - sentBefore.other, bytes: requests.bytes - sentBefore.bytes, connections: requests.connections - sentBefore.connections, kinds: kindsDelta(kindsBefore), bulkCalls: bulkCalls.calls - bulkBefore.calls, bulkOperations: bulkCalls.operations - bulkBefore.operations };
  const used = process.cpuUsage(cpu);
  const mainAfter = mainThreadCpuMs();
  const usageAfter = process.resourceUsage();
  const gcs = gcCost(gcProfiler.stop());
  const emulatorAfter = emulatorCpuMs();
  const ms = performance.now() - started;
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(`${PROFILE}.${profileAs}.cpuprofile`, JSON.stringify(profile));
    profiler.disconnect();
  }
  const emulatorMs = emulatorBefore === undefined || emulatorAfter === undefined ? undefined : emulatorAfter - emulatorBefore;
  const overheads = { ...gcs, systemMs: used.system / 1000, pageFaults: usageAfter.minorPageFault - usage.minorPageFault, switches: usageAfter.involuntaryContextSwitches - usage.involuntaryContextSwitches };
  const mainMs = mainBefore === undefined || mainAfter === undefined ? undefined : mainAfter - mainBefore;
  return { ms, cpuMs: (used.user + used.system) / 1000, mainMs, overheads, emulatorMs, sent, result };
}

/** Young-generation collections' time, and full collections and their time (ms), of a GCProfiler's record. */
function gcCost(record: ReturnType<GCProfiler['stop']>): Pick<Overheads, 'minorGcMs' | 'majorGcs' | 'majorGcMs'> {
  let minorGcMs = 0;
  let majorGcs = 0;
  let majorGcMs = 0;
  for (const { gcType, cost } of record?.statistics ?? []) {
    if (gcType === 'Scavenge' || gcType === 'MinorMarkCompact' || gcType === 'MinorMarkSweep') minorGcMs += cost / 1000;
    else if (gcType === 'MarkSweepCompact') {
      majorGcs++;
      majorGcMs += cost / 1000;
    }
  }
  return { minorGcMs, majorGcs, majorGcMs };
}

/**
 * What a window's CPU went to besides its own code: garbage collection (main-thread pauses; a reply's text,
 * some 260 KB per page of 1,000 changes, is a large object of the old generation, whose limit is low after
 * the full GC that opens each window: the reads cause full collections, which empty the young generation
 * too, so few young ones run) and the kernel (system CPU, minor page faults, preemptions of this process).
 */
interface Overheads {
  readonly minorGcMs: number;
  readonly majorGcs: number;
  readonly majorGcMs: number;
  readonly systemMs: number;
  readonly pageFaults: number;
  readonly switches: number;
}

/** The requests a window sent: change feed reads, the rest (and those by kind), and the bytes of their replies. */
type Sent = Pick<typeof requests, 'changeFeed' | 'other' | 'bytes' | 'connections'> & { kinds: typeof requestKinds; bulkCalls: number; bulkOperations: number };

/** The requests of each kind sent since `before`. */
function kindsDelta(before: typeof requestKinds): typeof requestKinds {
  const delta = { ...requestKinds };
  for (const key of Object.keys(delta) as (keyof typeof requestKinds)[]) delta[key] -= before[key];
  return delta;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The first and third quartiles of `xs` (nearest rank). */
function middleHalf(xs: number[]): [number, number] {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return [at(0.25), at(0.75)];
}

// BENCH_ENDPOINT: an emulator already running (e.g. `node --import tsx src/emulator/main.ts`; the container asks for RANGES × 10,000 RU/s);
// the changes are loaded only when the container does not hold them yet, so repeated runs start at once.
const emulator = process.env.BENCH_ENDPOINT ? { endpoint: process.env.BENCH_ENDPOINT, child: undefined } : await spawnEmulator();
const client = new CosmosClient({ endpoint: emulator.endpoint, key: EMULATOR_KEY });
try {
  const { database } = await client.databases.createIfNotExists({ id: 'bench' });
  const { container } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/pk'], version: 2 }, throughput: RANGES * RU_PER_RANGE });
  const { container: leaseContainer } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
  // The lease store groups writes into `items.bulk` calls (the loops never call it): counted, with the operations they carry.
  const bulk = leaseContainer.items.bulk.bind(leaseContainer.items);
  leaseContainer.items.bulk = (operations, ...rest) => {
    bulkCalls.calls++;
    bulkCalls.operations += operations.length;
    return bulk(operations, ...rest);
  };
  console.log(`node ${process.version}, ${process.platform}/${process.arch}; emulator (own process) with ${RANGES} ranges; page ${PAGE}; ${RUNS} runs each, interleaved, after ${WARMUP} untimed pass(es); ${LEASES === 'memory' ? 'leases in memory' : `lease store groupWritesMs ${GROUP_MS.groupWritesMs ?? 'default'}`}`);
  if (STEADY) {
    await steadyState({ database, leaseContainer, changes: CHANGES, page: PAGE, checkpoint: CHECKPOINT, ranges: RANGES, ruPerRange: RU_PER_RANGE, runs: RUNS, warmup: WARMUP, inFlight: IN_FLIGHT, feedOptions: ACQUIRE, storeOptions: GROUP_MS, timed: (fn, profileAs) => timed(fn, profileAs), profile: PROFILE !== undefined, ...(COMPARE ? { compare: { dir: COMPARE, pkg: (await import(pathToFileURL(`${COMPARE}/esm/index.js`).href)) as RxfeedPackage } } : {}) });
  } else {
    const { resources: [existing] } = await container.items.query<number>('SELECT VALUE COUNT(1) FROM c').fetchAll();
    if (existing === CHANGES) console.log(`the container already holds ${CHANGES} changes`);
    else if (existing === 0) console.log(`loading ${CHANGES} changes … ${((await load(container)) / 1000).toFixed(1)} s`);
    else throw new Error(`the container holds ${existing} documents, expected 0 or ${CHANGES}`);

    const times = { fair: [] as number[], bare: [] as number[], ranges: [] as number[], source: [] as number[], pipeline: [] as number[], steady: [] as number[], startup: [] as number[], restart: [] as number[], sparse: [] as number[], stop: [] as number[] };
    /** The main thread's share of the client CPU (without V8's compiler and GC threads). */
    const mainCpu = { fair: [] as number[], pipeline: [] as number[] };
    const cpu = { fair: [] as number[], bare: [] as number[], ranges: [] as number[], source: [] as number[], pipeline: [] as number[], sparse: [] as number[], stop: [] as number[] };
    /** The emulator's CPU in each window: near the wall time, the emulator (not the client) sets the pace. */
    const server = { ranges: [] as number[], pipeline: [] as number[], sparse: [] as number[] };
    const serverOf = (list: number[], t: { emulatorMs: number | undefined }) => t.emulatorMs !== undefined && list.push(t.emulatorMs);
    /** The requests each window sent (change feed reads, everything else) and the bytes their replies brought. */
    const sent = { fair: [] as Sent[], ranges: [] as Sent[], pipeline: [] as Sent[], sparse: [] as Sent[] };
    /** What each window's CPU went to besides its code (GC, kernel). */
    const overheads = { bare: [] as Overheads[], ranges: [] as Overheads[], source: [] as Overheads[], pipeline: [] as Overheads[], sparse: [] as Overheads[] };
    const leaseWrites: number[] = [];
    const fairWrites: number[] = [];
    const checkpointCounts: number[] = [];
    // Untimed passes of each (BENCH_WARMUP, default 1) warm the JIT and the emulator's caches. The pipeline's
    // also load what rxfeed loads on its first feed (the OpenTelemetry API, when installed): start-up, paid once
    // per process, not part of any window. One pass leaves rxfeed's code (and the SDK code only it calls: bulk
    // writes, listings) still being optimized during the first windows; see bench/PROFILE.md (issue 28, wip/pcpu).
    for (let pass = 0; pass < WARMUP; pass++) {
      await bare(container);
      await perRange(container);
      await checkpointingLoops(container, leaseContainer, CHECKPOINT);
      await sourceLoop(container);
      await (await pipeline(container, leaseContainer)).stop();
    }
    for (let run = 0; run < RUNS; run++) {
      const profileAs = (name: string): string | undefined => (PROFILE && run === RUNS - 1 ? name : undefined);
      /** Times one of the loops, checks it read every change, and records its wall time and CPU under `key`. */
      const loop = async (key: 'bare' | 'ranges' | 'source', what: string, read: () => Promise<number>, profile?: string) => {
        const t = await timed(read, profile);
        if (t.result !== CHANGES) throw new Error(`${what} read ${t.result} changes, expected ${CHANGES}`);
        times[key].push(t.ms);
        cpu[key].push(t.cpuMs);
        overheads[key].push(t.overheads);
        return t;
      };
      const steps: (() => Promise<void>)[] = [
        async () => {
          const f = await timed(() => checkpointingLoops(container, leaseContainer, CHECKPOINT), profileAs('fair'));
          if (f.result.count !== CHANGES) throw new Error(`checkpointing loops read ${f.result.count} changes, expected ${CHANGES}`);
          times.fair.push(f.ms);
          cpu.fair.push(f.cpuMs);
          if (f.mainMs !== undefined) mainCpu.fair.push(f.mainMs);
          fairWrites.push(f.result.writes);
          sent.fair.push(f.sent);
        },
        async () => void (await loop('bare', 'bare loop', () => bare(container))),
        async () => {
          const r = await loop('ranges', 'per-range loops', () => perRange(container), profileAs('loops'));
          serverOf(server.ranges, r);
          sent.ranges.push(r.sent);
        },
        async () => void (await loop('source', 'source loop', () => sourceLoop(container))),
        async () => {
          const p = await timed(() => pipeline(container, leaseContainer), profileAs('rxfeed'));
          const stopped = await timed(() => p.result.stop());
          times.stop.push(stopped.ms);
          cpu.stop.push(stopped.cpuMs);
          times.pipeline.push(p.ms);
          cpu.pipeline.push(p.cpuMs);
          if (p.mainMs !== undefined) mainCpu.pipeline.push(p.mainMs);
          serverOf(server.pipeline, p);
          sent.pipeline.push(p.sent);
          overheads.pipeline.push(p.overheads);
          times.steady.push(p.ms - p.result.startupMs);
          times.startup.push(p.result.startupMs);
          leaseWrites.push(p.result.writes);
          checkpointCounts.push(p.result.checkpoints);
          times.restart.push(await restart(container, leaseContainer, p.result.prefix));
        },
        async () => {
          // The same pipeline checkpointing every 10 pages: what the lease writes of checkpointEvery(1000) cost.
          const q = await timed(() => pipeline(container, leaseContainer, PAGE * 10), profileAs('sparse'));
          await q.result.stop();
          times.sparse.push(q.ms);
          cpu.sparse.push(q.cpuMs);
          serverOf(server.sparse, q);
          sent.sparse.push(q.sent);
          overheads.sparse.push(q.overheads);
        },
      ];
      // Each run starts one step later than the one before: what a window costs depends on the window before
      // it (by up to ±15% here), so every one comes after every other in turn.
      for (let i = 0; i < steps.length; i++) await steps[(run + i) % steps.length]!();
    }

    const base = median(times.fair);
    const rows: [string, number, number | undefined][] = [
      [`per-range SDK loops checkpointing every ${CHECKPOINT} changes (the fair ceiling)`, base, median(cpu.fair)],
      ['  the same loops without checkpoints (information)', median(times.ranges), median(cpu.ranges)],
      ['bare getChangeFeedIterator loop (whole container)', median(times.bare), median(cpu.bare)],
      ['CosmosSource.read loop (partition by partition)', median(times.source), median(cpu.source)],
      [`rxfeed: createChangeFeed → mapChanges → checkpointEvery(${CHECKPOINT})`, median(times.pipeline), median(cpu.pipeline)],
      ['  the same, from its first batch (lease bootstrap excluded)', median(times.steady), undefined],
      [`  the same with checkpointEvery(${PAGE * 10}) (a lease write every 10 pages)`, median(times.sparse), median(cpu.sparse)],
    ];
    const width = Math.max(...rows.map(([name]) => name.length));
    console.log(`\n${'what'.padEnd(width)} | median ms | changes/s | × fair  | client CPU ms`);
    console.log(`${'-'.repeat(width)}-|-----------|-----------|---------|-------------`);
    for (const [name, ms, cpuMs] of rows) {
      console.log(
        `${name.padEnd(width)} | ${ms.toFixed(0).padStart(9)} | ${Math.round(CHANGES / (ms / 1000)).toString().padStart(9)} | ` +
          `${(base / ms).toFixed(2).padStart(7)} | ${cpuMs === undefined ? '' : cpuMs.toFixed(0).padStart(12)}`,
      );
    }
    console.log(
      `client CPU per change, rxfeed ÷ per-range loops without checkpoints: ${(median(cpu.pipeline) / median(cpu.ranges)).toFixed(2)}× ` +
        `(${(median(cpu.sparse) / median(cpu.ranges)).toFixed(2)}× checkpointing every 10 pages); ` +
        `start-up: subscribe → first batch on fresh leases ${median(times.startup).toFixed(0)} ms; on existing leases, subscribe → every partition read once ${median(times.restart).toFixed(0)} ms (medians)`,
    );
    // Each run measures the loops and then rxfeed back to back, so a ratio per run cancels what drifts between runs.
    // The middle half of the runs' ratios shows how far one run's figure can be trusted on this machine.
    const perRun = (a: number[], b: number[]): string => {
      const ratios = a.map((x, i) => x / b[i]!);
      const [low, high] = middleHalf(ratios);
      return `${median(ratios).toFixed(2)}×, middle half ${low.toFixed(2)}–${high.toFixed(2)} (runs ${ratios.map((r) => r.toFixed(2)).join(' ')})`;
    };
    console.log(
      `against the fair ceiling, paired in each run, medians: throughput rxfeed ÷ checkpointing loops ${perRun(times.fair, times.pipeline)} (target ≥ 0.95); ` +
        `client CPU per change rxfeed ÷ checkpointing loops ${perRun(cpu.pipeline, cpu.fair)} (target ≤ 1.05); ` +
        `lease writes per 100k changes: rxfeed ${((median(leaseWrites) * 100_000) / CHANGES).toFixed(1)}, loops ${((median(fairWrites) * 100_000) / CHANGES).toFixed(1)}`,
    );
    if (mainCpu.fair.length === cpu.fair.length && mainCpu.pipeline.length === cpu.pipeline.length) {
      const share = (main: number[], all: number[]) => `${((100 * median(main)) / median(all)).toFixed(0)}%`;
      console.log(
        `client CPU of the main thread alone (without V8's compiler and GC threads), rxfeed ÷ checkpointing loops ${perRun(mainCpu.pipeline, mainCpu.fair)}; ` +
          `main thread's share of the client CPU (medians): loops ${share(mainCpu.fair, cpu.fair)}, rxfeed ${share(mainCpu.pipeline, cpu.pipeline)}`,
      );
    }
    console.log(
      `against the loops without checkpoints (information), paired: throughput rxfeed ÷ loops ${perRun(times.ranges, times.pipeline)}; ` +
        `client CPU rxfeed ÷ loops ${perRun(cpu.pipeline, cpu.ranges)}; checkpointing every 10 pages ${perRun(cpu.sparse, cpu.ranges)}`,
    );
    console.log(`(runs, ms: loops ${times.ranges.map((t) => t.toFixed(0)).join(' ')}; bare ${times.bare.map((t) => t.toFixed(0)).join(' ')}; source ${times.source.map((t) => t.toFixed(0)).join(' ')}; pipeline ${times.pipeline.map((t) => t.toFixed(0)).join(' ')})`);
    if (server.ranges.length > 0) {
      const busy = (name: keyof typeof server, wall: number[]): string =>
        `${median(server[name]).toFixed(0)} ms (${((100 * median(server[name])) / median(wall)).toFixed(0)}% of its wall time)`;
      console.log(
        `emulator CPU per window (medians): loops ${busy('ranges', times.ranges)}; rxfeed ${busy('pipeline', times.pipeline)}; ` +
          `rxfeed checkpointing every 10 pages ${busy('sparse', times.sparse)}`,
      );
    }
    // With two cores, the reader and the emulator each have one: when both are near 100%, the wall ratio follows
    // whichever of the two CPU ratios is worse.
    const clientBusy = (name: 'ranges' | 'pipeline' | 'sparse'): string => `${((100 * median(cpu[name])) / median(times[name])).toFixed(0)}%`;
    console.log(`client CPU per window, % of its wall time (medians): loops ${clientBusy('ranges')}; rxfeed ${clientBusy('pipeline')}; rxfeed checkpointing every 10 pages ${clientBusy('sparse')}`);
    console.log(
      `rxfeed's stop() after the run (last checkpoints, then ${RANGES} releases; timed apart from the rows above): ` +
        `${median(times.stop).toFixed(0)} ms, client CPU ${median(cpu.stop).toFixed(0)} ms (medians)`,
    );
    const requestsOf = (name: keyof typeof sent): string => {
      const of = (key: Exclude<keyof Sent, 'kinds' | 'bulkCalls' | 'bulkOperations'>) => median(sent[name].map((r) => r[key]));
      return `${of('changeFeed')} change feed + ${of('other')} other, ${(of('bytes') / 1e6).toFixed(1)} MB, ${of('connections')} new connections`;
    };
    console.log(`requests per window (medians): loops ${requestsOf('ranges')}; rxfeed ${requestsOf('pipeline')}; rxfeed checkpointing every 10 pages ${requestsOf('sparse')}`);
    const kindsOf = (name: keyof typeof sent): string =>
      (Object.keys(requestKinds) as (keyof typeof requestKinds)[]).map((kind) => `${kind} ${median(sent[name].map((r) => r.kinds[kind]))}`).join(', ') +
      ` (items.bulk calls ${median(sent[name].map((r) => r.bulkCalls))}, carrying ${median(sent[name].map((r) => r.bulkOperations))} writes)`;
    console.log(`other requests by kind per window (medians): fair loops ${kindsOf('fair')}; rxfeed ${kindsOf('pipeline')}; rxfeed checkpointing every 10 pages ${kindsOf('sparse')}`);
    const overheadsOf = (name: keyof typeof overheads): string => {
      const of = (key: keyof Overheads) => median(overheads[name].map((k) => k[key])).toFixed(0);
      return `GC ${of('minorGcMs')} ms young + ${of('majorGcs')} full (${of('majorGcMs')} ms), ${of('systemMs')} ms system CPU, ${of('pageFaults')} page faults, ${of('switches')} preemptions`;
    };
    console.log(`GC and kernel per window (medians): loops ${overheadsOf('ranges')}; bare ${overheadsOf('bare')}; source loop ${overheadsOf('source')}; rxfeed ${overheadsOf('pipeline')}; rxfeed checkpointing every 10 pages ${overheadsOf('sparse')}`);
    const per100k = (n: number): string => ((n * 100_000) / CHANGES).toFixed(1);
    console.log(
      `\nlease-store writes per 100k changes (pipeline, bootstrap + acquire + checkpoints + renewals, before stop): ` +
        `${per100k(median(leaseWrites))} (checkpoints ${per100k(median(checkpointCounts))}; ${RANGES} ranges, checkpointEvery(${CHECKPOINT}))`,
    );
  }
} finally {
  client.dispose();
  emulator.child?.kill('SIGTERM');
}
