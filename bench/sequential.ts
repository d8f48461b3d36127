/**
 * Ahead of the sequential model (issue 28). The .NET and Java change feed processors read a page, wait for
 * the handler, write the checkpoint, then read the next page. rxfeed reads ahead under credit and checkpoints
 * in the background, so with a handler that takes time it should approach max(read, handle) per page instead
 * of read + handle + checkpoint.
 *
 * Both sides: 4 ranges, pages of 100, a handler of 20 ms per batch, a checkpoint per batch, and a round trip
 * of `BENCH_LATENCY_MS` (default 10 ms) on every request (the emulator's latency fault: the service is never
 * on loopback). The sequential side is one loop per range (as the processors run one per lease): read a page
 * with the SDK, run the handler, replace the range's lease document conditionally (ETag), repeat until the
 * range answers 304. rxfeed: createChangeFeed (CosmosSource, CosmosLeaseStore) → eachBatch(handler) →
 * checkpointEvery(1), from subscribe (lease bootstrap included) until every change reached the checkpoint.
 * Rounds alternate; the ratio is the median of per-round ratios (sequential time / rxfeed time), with the
 * middle half's spread. Target ≥ 2.0× (ideal ≈ (read + handle + checkpoint) / handle less start-up).
 *
 * Also printed: where rxfeed's time goes (start-up to the first batch, the steady part, stop), and start-up
 * on existing leases (a second processor on the leases the first one released: subscribe → first batch of
 * changes written after). The emulator runs in this process (the bench is bound by waits, not CPU).
 *
 * Run: npx tsx bench/sequential.ts   (env: BENCH_ROUNDS=10 BENCH_PAGES=20 (per range) BENCH_LATENCY_MS=10 BENCH_HANDLER_MS=20)
 *
 * Before → after in one run: `BENCH_BASELINE=/path/to/other/dist/esm/index.js` (another checkout's build) runs that
 * build's rxfeed too, in the same rounds (the order of the three sides rotates), and prints it against this one.
 */
import { ChangeFeedStartFrom, CosmosClient, StatusCodes, type Container } from '@azure/cosmos';
import { setTimeout as delay } from 'node:timers/promises';
import { filter, firstValueFrom, scan } from 'rxjs';
import { CosmosEmulator, EMULATOR_KEY } from '../src/emulator/CosmosEmulator.js';
import { faults } from '../src/emulator/faults.js';
import { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, eachBatch } from './built.js';
import { median, paired, ratioLine } from './stats.js';
import type * as RxfeedApi from '../src/index.js';

type Rxfeed = Pick<typeof RxfeedApi, 'checkpointEvery' | 'CosmosLeaseStore' | 'CosmosSource' | 'createChangeFeed' | 'eachBatch'>;
const current: Rxfeed = { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, eachBatch };
const BASELINE = process.env.BENCH_BASELINE;
const baseline = BASELINE ? ((await import(BASELINE)) as Rxfeed) : undefined;

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const PAGES = Number(process.env.BENCH_PAGES ?? 20);
const LATENCY_MS = Number(process.env.BENCH_LATENCY_MS ?? 10);
const HANDLER_MS = Number(process.env.BENCH_HANDLER_MS ?? 20);
const RANGES = 4;
const PAGE = 100;
const CHANGES = RANGES * PAGES * PAGE;

interface Doc {
  id: string;
  pk: string;
  n: number;
}

const handler = () => delay(HANDLER_MS);
let runId = 0;
const stamp = Date.now().toString(36);

/** The sequential model: per range, read → handle → checkpoint (conditional replace), until 304. */
async function sequential(container: Container, leases: Container): Promise<SequentialRun> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const ranges = await container.getFeedRanges();
  let pages = 0;
  let longest = 0;
  const handlerMs: number[] = [];
  const run = ++runId;
  await Promise.all(
    ranges.map(async (range, i) => {
      const id = `seq-${stamp}-${run}-${i}`;
      let { resource: lease } = await leases.items.create<{ id: string; owner: string; continuation: string | null }>({ id, owner: 'bench', continuation: null });
      const iterator = container.items.getChangeFeedIterator<Doc>({ maxItemCount: PAGE, changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) });
      for (let own = 0; ; ) {
        const page = await iterator.readNext();
        if (page.statusCode === StatusCodes.NotModified) return;
        pages++;
        longest = Math.max(longest, ++own);
        const handling = performance.now();
        await handler();
        handlerMs.push(performance.now() - handling);
        const { resource } = await leases.item(id, id).replace<{ id: string; owner: string; continuation: string | null }>(
          { ...lease!, continuation: page.continuationToken },
          { accessCondition: { type: 'IfMatch', condition: lease!._etag } },
        );
        lease = resource;
      }
    }),
  );
  return { ms: performance.now() - started, pages, longest, handlerMs, cpuMs: cpuMsSince(cpu) };
}

interface SequentialRun {
  ms: number;
  pages: number;
  /** Pages (handler calls) of the range with the most. */
  longest: number;
  /** How long each handler call took (a `setTimeout` of HANDLER_MS overshoots it a little). */
  handlerMs: number[];
  /** CPU of this process (the emulator included) during the run. */
  cpuMs: number;
}

const cpuMsSince = (since: NodeJS.CpuUsage): number => {
  const { user, system } = process.cpuUsage(since);
  return (user + system) / 1000;
};

interface RxfeedRun {
  ms: number;
  startupMs: number;
  stopMs: number;
  prefix: string;
  batches: number;
  /** Per partition, the waits between one handler call's end and the next one's start (ms): waiting for reads. */
  gaps: number[];
  /** Handler calls (non-empty batches) of the partition with the most: the steady part is that many calls long. */
  longest: number;
  handlerMs: number[];
  cpuMs: number;
}

/** rxfeed: subscribe → every change at the checkpoint (start-up included; stop timed apart). */
async function rxfeed(container: Container, leases: Container, prefix = `rx-${stamp}-${++runId}.`, expected = CHANGES, lib: Rxfeed = current): Promise<RxfeedRun> {
  const { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, eachBatch } = lib;
  const cpu = process.cpuUsage();
  const started = performance.now();
  let firstBatchAt: number | undefined;
  let batches = 0;
  const ended = new Map<string, number>();
  const calls = new Map<string, number>();
  const gaps: number[] = [];
  const handlerMs: number[] = [];
  const feed = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases: new CosmosLeaseStore({ container: leases, partitionKeyPath: '/id' }),
    instanceName: 'bench',
    leasePrefix: prefix,
    startFrom: 'beginning',
    maxItemCount: PAGE,
    leaseAcquireIntervalMs: 200,
  });
  await firstValueFrom(
    feed.changes$.pipe(
      eachBatch(async (batch) => {
        if (batch.size === 0) return;
        const now = performance.now();
        firstBatchAt ??= now;
        const last = ended.get(batch.partition);
        if (last !== undefined) gaps.push(now - last);
        batches++;
        calls.set(batch.partition, (calls.get(batch.partition) ?? 0) + 1);
        await handler();
        const end = performance.now();
        handlerMs.push(end - now);
        ended.set(batch.partition, end);
      }),
      checkpointEvery(1),
      scan((n, b) => n + b.size, 0),
      filter((n) => n >= expected),
    ),
  );
  const ms = performance.now() - started;
  const cpuMs = cpuMsSince(cpu);
  const stopping = performance.now();
  await feed.stop();
  const longest = Math.max(...calls.values());
  return { ms, startupMs: (firstBatchAt ?? performance.now()) - started, stopMs: performance.now() - stopping, prefix, batches, gaps, longest, handlerMs, cpuMs };
}

const emulator = await CosmosEmulator.start({ initialRangeCount: (_db, id) => (id === 'orders' ? RANGES : 1) });
const client = new CosmosClient({ endpoint: emulator.endpoint, key: EMULATOR_KEY });
try {
  const { database } = await client.databases.createIfNotExists({ id: 'sequential' });
  const { container } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/pk'], version: 2 } });
  const { container: leases } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });
  // At least PAGES pages of 100 per range: documents are written until each range holds that many.
  const ranges = await container.getFeedRanges();
  const per = new Map<number, number>();
  for (let n = 0; per.size < RANGES || [...per.values()].some((c) => c < PAGES * PAGE); n += 500) {
    await Promise.all(Array.from({ length: 500 }, (_, j) => container.items.create({ id: `o${n + j}`, pk: `k${n + j}`, n: n + j })));
    {
      per.clear();
      for (const [i, range] of ranges.entries()) {
        let count = 0;
        const it = container.items.getChangeFeedIterator<Doc>({ maxItemCount: 10_000, changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) });
        for (let page = await it.readNext(); page.statusCode !== StatusCodes.NotModified; page = await it.readNext()) count += page.result.length;
        per.set(i, count);
      }
      if (n >= CHANGES * 2) break;
    }
  }
  const total = [...per.values()].reduce((a, b) => a + b, 0);
  emulator.injectFault(faults.latency(LATENCY_MS));
  console.log(
    `node ${process.version}; ${RANGES} ranges holding ${[...per.values()].join(' / ')} changes (${total}), pages of ${PAGE}, handler ${HANDLER_MS} ms per batch, ` +
      `checkpoint per batch, ${LATENCY_MS} ms latency on every request; ${ROUNDS} alternating rounds after one unmeasured`,
  );
  const seq: SequentialRun[] = [];
  const rx: RxfeedRun[] = [];
  const base: RxfeedRun[] = [];
  await paired<void>(
    ROUNDS,
    async () => void seq.push(await sequential(container, leases)),
    async () => {
      // With a baseline, it runs in every round too: before this build in even rounds, after it in odd ones.
      if (baseline && rx.length % 2 === 0) base.push(await rxfeed(container, leases, undefined, total, baseline));
      rx.push(await rxfeed(container, leases, undefined, total));
      if (baseline && rx.length % 2 === 0) base.push(await rxfeed(container, leases, undefined, total, baseline));
    },
  );
  base.shift();
  // The unmeasured warm-up round is the first of each.
  seq.shift();
  rx.shift();
  const seqMs = median(seq.map((s) => s.ms));
  const rxMs = median(rx.map((r) => r.ms));
  console.log(`sequential loops (read → handle → checkpoint): median ${seqMs.toFixed(0)} ms (${seq[0]!.pages} pages), CPU ${median(seq.map((s) => s.cpuMs)).toFixed(0)} ms`);
  console.log(`rxfeed eachBatch → checkpointEvery(1):          median ${rxMs.toFixed(0)} ms (${rx[0]!.batches} batches), CPU ${median(rx.map((r) => r.cpuMs)).toFixed(0)} ms`);
  console.log(`throughput rxfeed ÷ sequential: ${ratioLine(seq.map((s, i) => s.ms / rx[i]!.ms))} (target ≥ 2.0×)`);
  // Per page: the longest range's handler calls (its last, partial page is a call of HANDLER_MS too).
  const calls = Math.max(...rx.map((r) => r.longest));
  const startup = median(rx.map((r) => r.startupMs));
  const steady = median(rx.map((r) => r.ms - r.startupMs));
  const handlerOwn = median(rx.flatMap((r) => r.handlerMs));
  const seqPage = median(seq.map((s) => s.ms / s.longest));
  console.log(
    `where rxfeed's time goes (medians): start-up (subscribe → first batch, fresh leases) ${startup.toFixed(0)} ms; steady ${steady.toFixed(0)} ms for ` +
      `${calls} handler calls on the longest range = ${(steady / calls).toFixed(1)} ms per call (the handler's own delay(${HANDLER_MS}) took ${handlerOwn.toFixed(1)} ms; ` +
      `ideal max(read, handle) = ${Math.max(HANDLER_MS, LATENCY_MS)} ms); stop() ${median(rx.map((r) => r.stopMs)).toFixed(0)} ms, not counted`,
  );
  console.log(
    `sequential per page on the longest range: ${seqPage.toFixed(1)} ms (${seq[0]!.longest} pages; handler ${median(seq.flatMap((s) => s.handlerMs)).toFixed(1)} ms, ` +
      `ideal read + handle + checkpoint = ${2 * LATENCY_MS + HANDLER_MS} ms)`,
  );
  const gaps = rx.flatMap((r) => r.gaps);
  const late = (q: number) => [...gaps].sort((a, b) => a - b)[Math.floor(q * (gaps.length - 1))]?.toFixed(1);
  console.log(
    `a partition's handler waiting for its next batch (end of one call → start of the next, ${gaps.length} waits): median ${late(0.5)} ms, p90 ${late(0.9)} ms, max ${late(1)} ms ` +
      `(0 when reads keep ahead; a read is ${LATENCY_MS} ms)`,
  );
  const page = Math.max(HANDLER_MS, LATENCY_MS); // rxfeed's ideal page: max(read, handle)
  console.log(
    `ideal ratio for these ranges: (${calls} × ${2 * LATENCY_MS + HANDLER_MS} ms) ÷ (start-up ${startup.toFixed(0)} ms + ${calls} × ${page} ms) = ` +
      `${((calls * (2 * LATENCY_MS + HANDLER_MS)) / (startup + calls * page)).toFixed(2)}× given that start-up; ` +
      `${((2 * LATENCY_MS + HANDLER_MS) / page).toFixed(2)}× without; with the measured pages on both sides ` +
      `(sequential ${seqPage.toFixed(1)} ms, handler ${handlerOwn.toFixed(1)} ms): ${((calls * seqPage) / (startup + calls * Math.max(handlerOwn, LATENCY_MS))).toFixed(2)}×`,
  );
  if (baseline) {
    console.log(`baseline (${BASELINE}) ÷ sequential, same rounds: ${ratioLine(seq.map((s, i) => s.ms / base[i]!.ms))}`);
    console.log(`this build's time ÷ the baseline's, same rounds: ${ratioLine(rx.map((r, i) => r.ms / base[i]!.ms), 3)} (below 1: faster)`);
    console.log(
      `start-up on fresh leases, median: this build ${startup.toFixed(0)} ms, baseline ${median(base.map((r) => r.startupMs)).toFixed(0)} ms; ` +
        `steady per call: ${(steady / calls).toFixed(1)} vs ${(median(base.map((r) => r.ms - r.startupMs)) / calls).toFixed(1)} ms`,
    );
  }
  // Start-up on existing leases: the leases of the last run (released by its stop), one new change per range.
  const restart = async (i: number, lib: Rxfeed): Promise<number> => {
    const prefix = rx.at(-1)!.prefix;
    for (let k = 0; k < 64; k++) await container.items.create({ id: `late-${lib === current ? '' : 'b'}${i}-${k}`, pk: `late-${i}-${k}`, n: -1 });
    const started = performance.now();
    const feed = lib.createChangeFeed<Doc>({ source: new lib.CosmosSource<Doc>(container), leases: new lib.CosmosLeaseStore({ container: leases, partitionKeyPath: '/id' }), instanceName: 'bench', leasePrefix: prefix, maxItemCount: PAGE, leaseAcquireIntervalMs: 200 });
    await firstValueFrom(feed.changes$.pipe(filter((b) => b.size > 0), lib.checkpointEvery(1)));
    const ms = performance.now() - started;
    await feed.stop();
    return ms;
  };
  const restarts: number[] = [];
  const baseRestarts: number[] = [];
  for (let i = 0; i < Math.min(ROUNDS, 5); i++) {
    if (baseline && i % 2 === 1) baseRestarts.push(await restart(i, baseline));
    restarts.push(await restart(i, current));
    if (baseline && i % 2 === 0) baseRestarts.push(await restart(i, baseline));
  }
  console.log(`start-up on existing leases (subscribe → first batch of new changes, ${restarts.length} runs): median ${median(restarts).toFixed(0)} ms (${restarts.map((r) => r.toFixed(0)).join(' ')})`);
  if (baseline) console.log(`  baseline: median ${median(baseRestarts).toFixed(0)} ms (${baseRestarts.map((r) => r.toFixed(0)).join(' ')})`);
  console.log(`start-up on fresh leases (per round): ${rx.map((r) => r.startupMs.toFixed(0)).join(' ')} ms`);
} finally {
  client.dispose();
  await emulator.stop();
}
