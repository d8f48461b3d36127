/**
 * @summary Server-Sent Events under load, side by side in one run (no assertions; figures vary by machine):
 * one change feed read (MemorySource → changeFeed → hub.broadcast() → checkpointEvery) served by one server
 * process to 1 client, then 1,000 concurrent clients, then the same 1,000 plus one client that stopped reading.
 * Clients run in a child process over node:http on 127.0.0.1. Reports server heap, latency from write to client
 * (p50/p99) and the ratio to the single client.
 *
 * Run: npm run bench:sse   (node --expose-gc, so heap figures are after a full collection)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { tap } from 'rxjs';
import { checkpointEvery, createChangeFeed, MemoryLeaseStore, MemorySource } from '../src/index.js';
import { createSseHub, sseHandler } from '../src/sse/index.js';

interface Doc {
  id: string;
  writtenAt: number;
}

const EVENTS = 200;
const RATE = 50; // writes per second
const CHILD = fileURLToPath(new URL('./sseClients.ts', import.meta.url));

const source = new MemorySource<Doc>({ partitions: 4 });
const leases = new MemoryLeaseStore();
const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'bench', leasePrefix: 'bench.', pollIntervalMs: 10 });
// Normal clients get a small projection; `?full=1` asks for the whole document (large: 16 KiB blob).
const small = (c: { document?: Doc }) => ({ writtenAt: c.document?.writtenAt });
const hub = createSseHub<Doc>({ project: small, replayLimit: 1_000, maxBufferedBytes: 256 * 1024, closeGraceMs: 2_000 });
// Server-side fan-out time per batch (hub.broadcast() writing to every socket), apart from the client process.
let fanoutStart = 0;
const fanout: number[] = [];
const subscription = feed.changes$
  .pipe(
    tap((b) => void (b.isEmpty || (fanoutStart = performance.now()))),
    hub.broadcast(),
    tap((b) => void (b.isEmpty || fanout.push(performance.now() - fanoutStart))),
    checkpointEvery({ count: 100, ms: 200 }),
  )
  .subscribe();
// The stalled client asks for a large projection (64 KiB per event, made per event, not retained by the hub).
const PAD = 'x'.repeat(64 * 1024);
const handler = sseHandler(hub, { client: (req) => (req.url?.includes('full=1') ? { project: (c) => ({ ...c.document, pad: PAD }) } : {}) });
const server = createServer(handler);
server.maxConnections = 10_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;

const gc = (globalThis as { gc?: () => void }).gc;
function heapMiB(): number {
  gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

function startClients(count: number, options: { stall?: boolean; full?: boolean } = {}): Promise<ChildProcess> {
  const child = fork(CHILD, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, SSE_URL: base + (options.full ? '?full=1' : ''), SSE_CLIENTS: String(count), SSE_STALL: options.stall ? '1' : '0' },
  });
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`client process exited with ${code}`)));
  });
}

interface Report {
  latencies: number[];
  events: number;
  outOfOrder: number;
}
function report(child: ChildProcess): Promise<Report> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(m as Report));
    child.send({ kind: 'report' });
  });
}

let n = 0;
async function write(events: number): Promise<void> {
  fanout.length = 0;
  for (let i = 0; i < events; i++) {
    source.write({ id: `d${n++}`, writtenAt: performance.timeOrigin + performance.now() });
    await sleep(1000 / RATE);
  }
  await sleep(500); // let the last events arrive
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
interface Row {
  phase: string;
  clients: number;
  heap: number;
  p50: number;
  p99: number;
  delivered: number;
  expected: number;
  outOfOrder: number;
  fanoutP50: number;
  fanoutP99: number;
}
const rows: Row[] = [];
function summarize(phase: string, clients: number, heap: number, r: Report): Row {
  const sorted = [...r.latencies].sort((a, b) => a - b);
  const f = [...fanout].sort((a, b) => a - b);
  const row = { fanoutP50: percentile(f, 50), fanoutP99: percentile(f, 99), phase, clients, heap, p50: percentile(sorted, 50), p99: percentile(sorted, 99), delivered: r.events, expected: clients * EVENTS, outOfOrder: r.outOfOrder };
  rows.push(row);
  return row;
}

console.log(`node ${process.version}, ${process.platform}/${process.arch}; ${EVENTS} writes at ${RATE}/s per phase, feed poll 10 ms\n`);
const idleHeap = heapMiB();
await write(20); // warm up the feed and the JIT

const one = await startClients(1);
await write(EVENTS);
summarize('1 client', 1, heapMiB(), await report(one));
one.send({ kind: 'exit' });

const many = await startClients(1_000);
const connectedHeap = heapMiB();
await write(EVENTS);
summarize('1,000 clients', 1_000, heapMiB(), await report(many));

const stalled = await startClients(1, { stall: true, full: true });
await write(EVENTS);
const stalledRow = summarize('1,000 clients + 1 stalled (64 KiB events to it)', 1_000, heapMiB(), await report(many));
const stats = hub.stats();

const fmt = (x: number) => x.toFixed(1).padStart(7);
console.log('phase                                           clients  heap MiB   p50 ms   p99 ms  p50 ×1  p99 ×1  fan-out p50/p99 ms  delivered');
const [single] = rows;
for (const r of rows) {
  console.log(
    `${r.phase.padEnd(47)} ${String(r.clients).padStart(7)} ${fmt(r.heap)}  ${fmt(r.p50)}  ${fmt(r.p99)}  ${(r.p50 / single!.p50).toFixed(2).padStart(6)}  ${(r.p99 / single!.p99).toFixed(2).padStart(6)}  ${r.fanoutP50.toFixed(2).padStart(8)} / ${r.fanoutP99.toFixed(2).padEnd(7)}  ${r.delivered}/${r.expected}${r.outOfOrder ? ` (${r.outOfOrder} out of order)` : ''}`,
  );
}
console.log(`\nserver heap: idle ${idleHeap.toFixed(1)} MiB, 1,000 clients connected ${connectedHeap.toFixed(1)} MiB (${(((connectedHeap - idleHeap) * 1024) / 1000).toFixed(1)} KiB per client)`);
console.log(`stalled client: dropped for slow-client ${stats.dropped['slow-client']} time(s) (bound 256 KiB); heap with it ${stalledRow.heap.toFixed(1)} MiB vs ${rows[1]!.heap.toFixed(1)} MiB without`);
console.log(`checkpoints kept moving: hub head ${stats.head}, replay buffer ${stats.replayable}`);

for (const child of [many, stalled]) child.send({ kind: 'exit' });
hub.close();
subscription.unsubscribe();
await feed.stop();
server.closeAllConnections();
server.close();
