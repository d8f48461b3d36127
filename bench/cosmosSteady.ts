/**
 * The steady-state mode of bench/cosmos.ts (BENCH_STEADY=1): per side, ONE long-lived pipeline started once —
 * rxfeed (createChangeFeed → mapChanges → checkpointEvery(n), Cosmos DB lease store) and the fair ceiling's
 * per-range SDK loops (an iterator per range kept across windows, a lease document each, replaced every n
 * changes) — each reading a container of its own, then timed windows alternated between the two sides. Each
 * window first writes the same N new changes (untimed) into that side's container while the side's reads wait
 * at a gate, then opens the gate and times until the side has read them and checkpointed over them. So no
 * window starts a new feed or pays its tier-up: a processor runs one feed for hours (bench/PROFILE.md, "TurboFan
 * jobs and deopts per window").
 *
 * The gate: every read of a side (rxfeed: `Source.read`; the loops: `readNext`) waits while its gate is closed.
 * It is closed from the end of the side's window until the start of its next one, so the idle side sends no
 * change feed reads during the other side's window; what it still does (rxfeed's lease renewals and balancing
 * rounds) is counted and printed. A window starts once every range of the side has a read waiting at the gate.
 *
 * Work per window is the same on both sides: the same N documents (ids and partition keys), the same page size,
 * a checkpoint every n changes of a range counted across windows (rxfeed's `checkpointEvery(n)` has no time
 * trigger here, so the loops make no extra write at the end of a window either), and both poll an empty range
 * again after `pollIntervalMs` (rxfeed's default, 5 s). rxfeed's window ends when all N changes passed
 * `checkpointEvery` and the lease writes they caused landed; the loops' when they read all N, every range
 * answered 304 and every checkpoint due was written (each is awaited before the next read).
 */
import { ChangeFeedStartFrom, StatusCodes, type Container, type Database, type FeedRange, type OperationInput } from '@azure/cosmos';
import type { Subscription } from 'rxjs';
import type { Lease, NewLease } from '../src/leases/Lease.js';
import type { LeaseStore } from '../src/leases/LeaseStore.js';
import * as built from './built.js';
import { toTotal } from './checkpointingLoop.js';
import { median, ratioLine } from './stats.js';

/** The parts of rxfeed the steady mode runs: this build's (bench/built.ts), or another's (BENCH_COMPARE). */
export type RxfeedPackage = Pick<typeof built, 'CosmosLeaseStore' | 'CosmosSource' | 'checkpointEvery' | 'createChangeFeed' | 'mapChanges'>;

/** What bench/cosmos.ts measures around a window (its `timed`): wall, client CPU, main thread, requests sent. */
export interface Timed<R> {
  readonly ms: number;
  readonly cpuMs: number;
  readonly mainMs: number | undefined;
  readonly emulatorMs: number | undefined;
  readonly sent: { readonly changeFeed: number; readonly other: number; readonly bytes: number };
  readonly result: R;
}

/** The settings of bench/cosmos.ts the steady mode uses. */
export interface SteadyOptions {
  readonly database: Database;
  readonly leaseContainer: Container;
  /** Changes written and read per window. */
  readonly changes: number;
  readonly page: number;
  readonly checkpoint: number;
  readonly ranges: number;
  readonly ruPerRange: number;
  readonly runs: number;
  readonly warmup: number;
  readonly inFlight: number;
  /** Extra options of the rxfeed feed (BENCH_ACQUIRE_MS). */
  readonly feedOptions: { leaseAcquireIntervalMs?: number };
  readonly storeOptions: { groupWritesMs?: number };
  /** Times a window; with `profileAs`, also writes its CPU profile (BENCH_PROFILE). */
  readonly timed: <R>(fn: () => Promise<R>, profileAs?: string) => Promise<Timed<R>>;
  /** BENCH_PROFILE set: each timed window writes a CPU profile `<path>.<side>.r<round>.cpuprofile`. */
  readonly profile: boolean;
  /**
   * BENCH_COMPARE=dir: a third side, the same pipeline on another build of rxfeed (`dir/esm/index.js`, e.g. a
   * copy of `dist` made before a change), on a container of its own, in the same rounds; printed paired with this build.
   */
  readonly compare?: { readonly dir: string; readonly pkg: RxfeedPackage };
}

interface Doc {
  id: string;
  pk: string;
  n: number;
  total: number;
}

/** The sides: rxfeed (this build), the loops, and rxfeed of another build (BENCH_COMPARE). */
type Name = 'rxfeed' | 'fair' | 'other';

/** rxfeed's default poll interval after an empty read (ms): the loops wait as long. */
const POLL_MS = 5_000;

/** Reads of a side wait at it while it is closed; `held` counts the waiting ones. */
class Gate {
  #opened: Promise<void> | undefined;
  #release: () => void = () => undefined;
  held = 0;
  get closed(): boolean {
    return this.#opened !== undefined;
  }
  close(): void {
    this.#opened ??= new Promise((resolve) => (this.#release = resolve));
  }
  open(): void {
    this.#opened = undefined;
    this.#release();
  }
  wait(): Promise<void> {
    this.held++;
    return this.#opened!.then(() => void this.held--);
  }
  /** Resolves once `n` reads wait at the gate (checked every 20 ms; outside the timed windows). */
  async heldBy(n: number): Promise<void> {
    while (this.held < n) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Counts a lease store's requests and knows when none is in flight. */
class SettlingStore implements LeaseStore {
  writes = 0;
  reads = 0;
  #pending = 0;
  #settled: (() => void)[] = [];
  constructor(private readonly inner: LeaseStore) {}
  #track<T>(promise: Promise<T>): Promise<T> {
    this.#pending++;
    const done = () => {
      if (--this.#pending === 0) for (const resolve of this.#settled.splice(0)) resolve();
    };
    promise.then(done, done);
    return promise;
  }
  /** Resolves when no request of the store is in flight. */
  settled(): Promise<void> {
    return this.#pending === 0 ? Promise.resolve() : new Promise((resolve) => this.#settled.push(resolve));
  }
  list(prefix: string) {
    this.reads++;
    return this.#track(this.inner.list(prefix));
  }
  read(id: string) {
    this.reads++;
    return this.#track(this.inner.read(id));
  }
  createIfAbsent(lease: NewLease) {
    this.writes++;
    return this.#track(this.inner.createIfAbsent(lease));
  }
  replace(lease: Lease) {
    this.writes++;
    return this.#track(this.inner.replace(lease));
  }
  delete(lease: Lease) {
    this.writes++;
    return this.#track(this.inner.delete(lease));
  }
}

/** One side: started once, then windows of `changes` new changes. */
interface Side {
  readonly gate: Gate;
  /** Lease requests (writes, reads) and change feed reads so far. */
  readonly counts: () => { leaseWrites: number; leaseReads: number; feedReads: number };
  /** Opens the gate and resolves once the side read `changes` more changes and checkpointed over them; closes it. */
  window(changes: number): Promise<void>;
  stop(): Promise<void>;
}

/** The rxfeed pipeline of the existing windows, subscribed once, its reads behind a gate (closed from the start). */
function rxfeedSide(container: Container, o: SteadyOptions, prefix: string, pkg: RxfeedPackage = built): Side {
  const { CosmosLeaseStore, CosmosSource, checkpointEvery, createChangeFeed, mapChanges } = pkg;
  const gate = new Gate();
  gate.close();
  const source = new CosmosSource<Doc>(container);
  const read = source.read.bind(source);
  let feedReads = 0;
  source.read = (request) => {
    feedReads++;
    return gate.closed ? gate.wait().then(() => read(request)) : read(request);
  };
  const store = new SettlingStore(new CosmosLeaseStore({ container: o.leaseContainer, partitionKeyPath: '/id', ...o.storeOptions }));
  const feed = createChangeFeed<Doc>({
    source,
    leases: store,
    instanceName: 'bench',
    leasePrefix: prefix,
    startFrom: 'beginning',
    maxItemCount: o.page,
    maxInFlightChanges: o.inFlight,
    // A read waits at the gate while the other side runs and while its changes are written, which under load
    // can exceed a minute: neither its read deadline (the lease expiration) nor the stall timeout may end it.
    // Renewals keep their own interval (leaseRenewIntervalMs, 40 s), so the lease writes are those of the default.
    stallTimeoutMs: 3_600_000,
    leaseExpirationMs: 3_600_000,
    ...o.feedOptions,
  });
  let acked = 0;
  let target = Number.POSITIVE_INFINITY;
  let reached: { resolve: () => void; reject: (e: unknown) => void } | undefined;
  let failed: unknown;
  const subscription: Subscription = feed.changes$.pipe(mapChanges(toTotal), checkpointEvery(o.checkpoint)).subscribe({
    next: (batch) => {
      acked += batch.size;
      if (acked >= target) reached?.resolve();
    },
    error: (error: unknown) => {
      failed = error;
      reached?.reject(error);
    },
  });
  return {
    gate,
    counts: () => ({ leaseWrites: store.writes, leaseReads: store.reads, feedReads }),
    async window(changes) {
      if (failed) throw failed;
      target = acked + changes;
      const done = new Promise<void>((resolve, reject) => (reached = { resolve, reject }));
      gate.open();
      await done;
      // The checkpoints over the window's changes (coalesced, asynchronous) belong to it.
      await store.settled();
      gate.close();
      if (acked !== target) throw new Error(`rxfeed read ${acked - target + changes} changes in a window of ${changes}`);
    },
    async stop() {
      gate.open();
      subscription.unsubscribe();
      await feed.stop();
    },
  };
}

/**
 * The fair ceiling's loops, kept running: per range an iterator, a lease document replaced (ETag) once
 * `checkpoint` changes of the range were read since its last write (awaited before the next read); after a
 * 304, the range waits `POLL_MS` before reading again.
 */
async function loopsSide(container: Container, o: SteadyOptions, prefix: string): Promise<Side> {
  const gate = new Gate();
  gate.close();
  const ranges: readonly FeedRange[] = await container.getFeedRanges();
  let leaseWrites = 0;
  let feedReads = 0;
  let count = 0;
  let sum = 0;
  let target = Number.POSITIVE_INFINITY;
  let stopped = false;
  const idle = ranges.map(() => false);
  let reached: { resolve: () => void; reject: (e: unknown) => void } | undefined;
  let failed: unknown;
  const check = () => {
    if (count >= target && idle.every(Boolean)) reached?.resolve();
  };
  const loop = async (range: FeedRange, i: number): Promise<void> => {
    const id = `${prefix}.${i}`;
    let etag = (await o.leaseContainer.items.create({ id, continuation: null })).etag;
    leaseWrites++;
    const iterator = container.items.getChangeFeedIterator<Doc>({ maxItemCount: o.page, changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) });
    let since = 0;
    while (!stopped) {
      if (gate.closed) await gate.wait();
      if (stopped) break;
      feedReads++;
      const page = await iterator.readNext();
      if (page.statusCode === StatusCodes.NotModified) {
        idle[i] = true;
        check();
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        continue;
      }
      idle[i] = false;
      for (const doc of page.result) sum += doc.total;
      count += page.result.length;
      since += page.result.length;
      if (since >= o.checkpoint) {
        ({ etag } = await o.leaseContainer.item(id, id).replace({ id, continuation: page.continuationToken ?? null }, { accessCondition: { type: 'IfMatch', condition: etag } }));
        leaseWrites++;
        since = 0;
      }
    }
  };
  const running = ranges.map((range, i) =>
    loop(range, i).catch((error: unknown) => {
      failed = error;
      reached?.reject(error);
    }),
  );
  return {
    gate,
    counts: () => ({ leaseWrites, leaseReads: 0, feedReads }),
    async window(changes) {
      if (failed) throw failed;
      target = count + changes;
      idle.fill(false);
      const done = new Promise<void>((resolve, reject) => (reached = { resolve, reject }));
      gate.open();
      await done;
      gate.close();
      if (count !== target) throw new Error(`the loops read ${count - target + changes} changes in a window of ${changes}`);
      if (sum < 0) throw new Error('unreachable');
    },
    async stop() {
      stopped = true;
      gate.open();
      await Promise.all(running);
    },
  };
}

/** Writes `changes` new documents (the same ids and partition keys for either side) into `container`. */
async function write(container: Container, round: string, changes: number): Promise<void> {
  const chunk = 10_000;
  for (let i = 0; i < changes; i += chunk) {
    const ops: OperationInput[] = [];
    for (let j = i; j < Math.min(changes, i + chunk); j++) {
      ops.push({ operationType: 'Create', partitionKey: `k${j % 4093}`, resourceBody: { id: `${round}-${j}`, pk: `k${j % 4093}`, n: j, total: j % 100 } });
    }
    let pending = ops;
    for (let attempt = 0; pending.length > 0; attempt++) {
      const results = await container.items.executeBulkOperations(pending);
      const failed = results.filter((r) => ![201, 409].includes(Number(r.response?.statusCode ?? r.error?.code ?? 0)));
      if (failed.length > 0 && attempt >= 5) throw new Error(`${failed.length} writes failed: ${String(failed[0]?.response?.statusCode ?? failed[0]?.error?.message)}`);
      pending = failed.map((r) => r.operationInput);
    }
  }
}

/**
 * Runs the steady-state mode and prints its lines. BENCH_MARK=1 prints `=== window <side> start|end` around
 * each timed window (to split a `node --trace-opt` log by window); BENCH_PROFILE=path writes a CPU profile of
 * each timed window (`path.rxfeed.r<round>.cpuprofile`, `path.loops.r<round>.cpuprofile`; bench/profileTop.ts
 * sums several given as one comma-separated argument).
 */
export async function steadyState(o: SteadyOptions): Promise<void> {
  const stamp = `${Date.now().toString(36)}-${process.pid}`;
  const mark = process.env.BENCH_MARK === '1' ? (what: string) => console.log(`=== ${what}`) : () => undefined;
  const containerOf = async (name: string) =>
    (await o.database.containers.createIfNotExists({ id: `steady-${name}-${stamp}`, partitionKey: { paths: ['/pk'], version: 2 }, throughput: o.ranges * o.ruPerRange })).container;
  const compare = o.compare;
  const containers = { rxfeed: await containerOf('rxfeed'), fair: await containerOf('loops'), ...(compare ? { other: await containerOf('other') } : {}) } as Record<Name, Container>;
  console.log(
    `steady state: one feed per side, each on a container of its own (${o.ranges} ranges), started once; windows of ${o.changes} new changes each, ` +
      `written untimed while the side's reads wait; ${o.runs} rounds after ${o.warmup} untimed one(s)`,
  );
  try {
    // Bootstrap (timed apart): subscribe → every range's lease owned and its first read waiting at the (closed) gate.
    const bootstrap = async <S extends Side>(start: () => S | Promise<S>) => {
      let side: S | undefined;
      const t = await o.timed(async () => {
        side = await start();
        await side.gate.heldBy(o.ranges);
      });
      return { side: side!, t };
    };
    const rx = await bootstrap(() => rxfeedSide(containers.rxfeed, o, `steady-${stamp}.`));
    const fair = await bootstrap(() => loopsSide(containers.fair, o, `steady-loops-${stamp}`));
    console.log(
      `bootstrap (subscribe → every range's lease owned and its first read sent; timed apart): rxfeed ${rx.t.ms.toFixed(0)} ms, client CPU ${rx.t.cpuMs.toFixed(0)} ms; ` +
        `loops ${fair.t.ms.toFixed(0)} ms, client CPU ${fair.t.cpuMs.toFixed(0)} ms`,
    );
    const otherSide = compare ? await bootstrap(() => rxfeedSide(containers.other, o, `steady-other-${stamp}.`, compare.pkg)) : undefined;
    if (compare && otherSide) console.log(`bootstrap of the other build (${compare.dir}): ${otherSide.t.ms.toFixed(0)} ms, client CPU ${otherSide.t.cpuMs.toFixed(0)} ms`);
    const sides = { rxfeed: rx.side, fair: fair.side, ...(otherSide ? { other: otherSide.side } : {}) } as Record<Name, Side>;
    const names = Object.keys(sides) as Name[];
    const record = () => ({ ms: [] as number[], cpu: [] as number[], main: [] as number[], emulator: [] as number[], feed: [] as number[], other: [] as number[], leaseWrites: [] as number[] });
    const rec = { rxfeed: record(), fair: record(), other: record() };
    /** What the idle sides did during the others' timed windows (lease requests, change feed reads). */
    const idleCounts = () => ({ leaseWrites: 0, leaseReads: 0, feedReads: 0 });
    const idleDuring = { rxfeed: idleCounts(), fair: idleCounts(), other: idleCounts() };
    const window = async (name: Name, round: number, timedRound: boolean): Promise<void> => {
      const side = sides[name];
      const idleNames = names.filter((n) => n !== name);
      await write(containers[name], `w${round}`, o.changes);
      await side.gate.heldBy(o.ranges);
      const own = side.counts();
      const idleBefore = idleNames.map((n) => sides[n].counts());
      mark(`window ${name} start`);
      const t = await o.timed(() => side.window(o.changes), o.profile && timedRound ? `${name === 'fair' ? 'loops' : name}.r${round}` : undefined);
      mark(`window ${name} end`);
      if (!timedRound) return;
      const ownAfter = side.counts();
      idleNames.forEach((n, i) => {
        const after = sides[n].counts();
        for (const key of ['leaseWrites', 'leaseReads', 'feedReads'] as const) idleDuring[n][key] += after[key] - idleBefore[i]![key];
      });
      const r = rec[name];
      r.ms.push(t.ms);
      r.cpu.push(t.cpuMs);
      if (t.mainMs !== undefined) r.main.push(t.mainMs);
      if (t.emulatorMs !== undefined) r.emulator.push(t.emulatorMs);
      r.feed.push(t.sent.changeFeed);
      r.other.push(t.sent.other);
      r.leaseWrites.push(ownAfter.leaseWrites - own.leaseWrites);
    };
    for (let round = 0; round < o.warmup + o.runs; round++) {
      const timedRound = round >= o.warmup;
      // Alternate which side goes first, so neither always follows the other (three sides: rotated by one a round).
      const order: Name[] =
        names.length === 2 ? (round % 2 === 0 ? ['rxfeed', 'fair'] : ['fair', 'rxfeed']) : [...names.slice(round % names.length), ...names.slice(0, round % names.length)];
      for (const name of order) await window(name, round, timedRound);
    }
    const rows: [string, Name][] = [
      [`per-range SDK loops checkpointing every ${o.checkpoint} changes (the fair ceiling), kept running`, 'fair'],
      [`rxfeed: createChangeFeed → mapChanges → checkpointEvery(${o.checkpoint}), one feed`, 'rxfeed'],
      ...(compare ? [[`the same, other build (${compare.dir})`, 'other'] as [string, Name]] : []),
    ];
    const base = median(rec.fair.ms);
    const width = Math.max(...rows.map(([name]) => name.length));
    console.log(`\n${'what (steady state, per window)'.padEnd(width)} | median ms | changes/s | × fair  | client CPU ms`);
    console.log(`${'-'.repeat(width)}-|-----------|-----------|---------|-------------`);
    for (const [name, key] of rows) {
      const ms = median(rec[key].ms);
      console.log(
        `${name.padEnd(width)} | ${ms.toFixed(0).padStart(9)} | ${Math.round(o.changes / (ms / 1000)).toString().padStart(9)} | ` +
          `${(base / ms).toFixed(2).padStart(7)} | ${median(rec[key].cpu).toFixed(0).padStart(12)}`,
      );
    }
    const paired = (a: number[], b: number[]) => `${ratioLine(a.map((x, i) => x / b[i]!))} (rounds ${a.map((x, i) => (x / b[i]!).toFixed(2)).join(' ')})`;
    console.log(
      `against the fair ceiling, steady state, paired in each round, medians: throughput rxfeed ÷ checkpointing loops ${paired(rec.fair.ms, rec.rxfeed.ms)} (target ≥ 0.95); ` +
        `client CPU per change rxfeed ÷ checkpointing loops ${paired(rec.rxfeed.cpu, rec.fair.cpu)} (target ≤ 1.05)`,
    );
    if (rec.rxfeed.main.length === rec.rxfeed.cpu.length && rec.fair.main.length === rec.fair.cpu.length) {
      const share = (key: 'fair' | 'rxfeed') => `${((100 * median(rec[key].main)) / median(rec[key].cpu)).toFixed(0)}%`;
      console.log(
        `client CPU of the main thread alone (without V8's compiler and GC threads), rxfeed ÷ checkpointing loops ${paired(rec.rxfeed.main, rec.fair.main)}; ` +
          `main thread's share of the client CPU (medians): loops ${share('fair')}, rxfeed ${share('rxfeed')}`,
      );
    }
    if (rec.fair.emulator.length > 0 && rec.rxfeed.emulator.length > 0) {
      console.log(`emulator CPU per window (medians): loops ${median(rec.fair.emulator).toFixed(0)} ms; rxfeed ${median(rec.rxfeed.emulator).toFixed(0)} ms`);
    }
    if (compare) {
      console.log(
        `this build ÷ the other build (${compare.dir}), paired in each round: client CPU ${paired(rec.rxfeed.cpu, rec.other.cpu)}; ` +
          `main thread ${rec.rxfeed.main.length === rec.rxfeed.cpu.length && rec.other.main.length === rec.other.cpu.length ? paired(rec.rxfeed.main, rec.other.main) : 'n/a'}; throughput ${paired(rec.other.ms, rec.rxfeed.ms)}`,
      );
      console.log(
        `the other build against the fair ceiling: throughput ${paired(rec.fair.ms, rec.other.ms)}; client CPU per change ${paired(rec.other.cpu, rec.fair.cpu)}` +
          (rec.other.main.length === rec.other.cpu.length && rec.fair.main.length === rec.fair.cpu.length ? `; main thread ${paired(rec.other.main, rec.fair.main)}` : ''),
      );
      console.log(`(other build, rounds, ms: ${rec.other.ms.map((t) => t.toFixed(0)).join(' ')}; client CPU ms: ${rec.other.cpu.map((t) => t.toFixed(0)).join(' ')})`);
    }
    console.log(`(rounds, ms: loops ${rec.fair.ms.map((t) => t.toFixed(0)).join(' ')}; rxfeed ${rec.rxfeed.ms.map((t) => t.toFixed(0)).join(' ')}; client CPU ms: loops ${rec.fair.cpu.map((t) => t.toFixed(0)).join(' ')}; rxfeed ${rec.rxfeed.cpu.map((t) => t.toFixed(0)).join(' ')})`);
    const per100k = (n: number) => ((n * 100_000) / o.changes).toFixed(1);
    console.log(
      `requests per window (medians): loops ${median(rec.fair.feed)} change feed + ${median(rec.fair.other)} other; rxfeed ${median(rec.rxfeed.feed)} change feed + ${median(rec.rxfeed.other)} other; ` +
        `lease writes per 100k changes: loops ${per100k(median(rec.fair.leaseWrites))}, rxfeed ${per100k(median(rec.rxfeed.leaseWrites))}`,
    );
    // Per window of another side (each side is idle during the others' timed windows).
    const othersWindows = (key: Name) => Math.max(1, names.filter((n) => n !== key).reduce((sum, n) => sum + rec[n].ms.length, 0));
    const idle = (key: Name) =>
      `${(idleDuring[key].feedReads / othersWindows(key)).toFixed(1)} change feed reads (sent or waiting at the gate), ` +
      `${(idleDuring[key].leaseWrites / othersWindows(key)).toFixed(1)} lease writes, ${(idleDuring[key].leaseReads / othersWindows(key)).toFixed(1)} lease reads/listings`;
    console.log(
      `the idle side during the other's window (per window, means; its change feed reads wait at its gate): rxfeed ${idle('rxfeed')}; loops ${idle('fair')}` +
        (compare ? `; other build ${idle('other')}` : ''),
    );
    for (const name of names) await sides[name].stop();
  } finally {
    for (const container of Object.values(containers)) await container.delete().catch(() => undefined);
  }
}
