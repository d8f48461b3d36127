/**
 * @summary Server-Sent Events under load (no assertions; figures vary by machine). Clients run in a child process
 * (bench/sseClients.ts, the load generator) over node:http on 127.0.0.1.
 *
 * 1. Live: one change feed read (MemorySource → changeFeed → hub.broadcast() → checkpointEvery) served to 1 client,
 *    then `--clients` (default 10,000) concurrent clients, then the same plus one client that stopped reading and
 *    asked for large events: server heap per client, write → client latency p50/p99, the stalled client dropped
 *    while the others get everything.
 * 2. Snapshot: a `--rows` (default 100,000) row view sent to `--snapshot-clients` (default 100) clients at once by a
 *    snapshot-mode hub: time, and the server's peak heap against one copy of the view's rows.
 *
 * Run: npm run bench:sse [-- --clients 10000 --events 60 --rate 5 --rows 100000 --snapshot-clients 100 --only live|snapshot]
 * (node --expose-gc, so heap figures are after a full collection)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { tap } from 'rxjs';
import { checkpointEvery, createChangeFeed, MemoryLeaseStore, MemorySource, MemoryViewStore } from '../src/index.js';
import { createSseHub, sseHandler } from '../src/sse/index.js';

interface Doc {
  id: string;
  writtenAt: number;
}

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '10000' },
    events: { type: 'string', default: '60' },
    rate: { type: 'string', default: '5' },
    rows: { type: 'string', default: '100000' },
    'snapshot-clients': { type: 'string', default: '100' },
    only: { type: 'string' },
  },
});
if (values.only !== undefined && values.only !== 'live' && values.only !== 'snapshot') throw new Error(`--only must be live or snapshot, got ${values.only}`);
const CLIENTS = Number(values.clients);
const EVENTS = Number(values.events);
const RATE = Number(values.rate); // writes per second
const ROWS = Number(values.rows);
const SNAPSHOT_CLIENTS = Number(values['snapshot-clients']);
const CHILD = fileURLToPath(new URL('./sseClients.ts', import.meta.url));

const gc = (globalThis as { gc?: () => void }).gc;
function heapMiB(): number {
  gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const fmt = (x: number, digits = 1) => x.toFixed(digits).padStart(8);

// --- the live hub -----------------------------------------------------------------------------------------------
const source = new MemorySource<Doc>({ partitions: 4 });
const feed = createChangeFeed<Doc>({ source, leases: new MemoryLeaseStore(), instanceName: 'bench', leasePrefix: 'bench.', pollIntervalMs: 10 });
const small = (c: { document?: Doc }) => ({ writtenAt: c.document?.writtenAt });
const hub = createSseHub<Doc>({ project: small, replayLimit: 20, maxBufferedBytes: 256 * 1024, closeGraceMs: 2_000, heartbeatMs: 5_000 });
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
// The stalled client asks for large events (1 MiB each, made per event, never retained by the hub), so the kernel's
// socket buffers fill within a few events and the hub's bound is what holds it.
const PAD = 'x'.repeat(1024 * 1024);
const live = sseHandler(hub, { client: (req) => (req.url?.includes('full=1') ? { project: (c) => ({ ...c.document, pad: PAD }) } : {}) });

// --- the snapshot hub -------------------------------------------------------------------------------------------
interface Row {
  name: string;
  city: string;
  total: number;
}
const view = new MemoryViewStore<Row>();
const snapshotHub = createSseHub<Row, Row>({ view, project: (c) => c.document, maxBufferedBytes: 256 * 1024 });
const snapshots = sseHandler(snapshotHub);

const server = createServer((req, res) => (req.url?.startsWith('/snapshot') ? snapshots(req, res) : live(req, res)));
server.maxConnections = CLIENTS + 1_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

function startClients(count: number, path: string, env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = fork(CHILD, [], { execArgv: ['--import', 'tsx'], env: { ...process.env, SSE_URL: base + path, SSE_CLIENTS: String(count), ...env } });
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`client process exited with ${code}`)));
  });
}

interface Report {
  latencies: number[];
  events: number;
  duplicates: number;
  dropped: number;
  snapshots: { rows: number; ms: number; bytes: number }[];
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
  await sleep(1_500); // let the last events arrive
}

console.log(`node ${process.version}, ${process.platform}/${process.arch}, load average ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`);
if (values.only !== 'snapshot') await liveBench();
if (values.only !== 'live') await snapshotBench();

hub.close();
snapshotHub.close();
subscription.unsubscribe();
await feed.stop();
server.closeAllConnections();
server.close();

async function liveBench(): Promise<void> {
  console.log(`live: ${EVENTS} writes at ${RATE}/s per phase, feed poll 10 ms, replayLimit 20, maxBufferedBytes 256 KiB\n`);
  const idleHeap = heapMiB();
  await write(5); // warm up the feed and the JIT

  const rows: string[] = [];
  function summarize(phase: string, clients: number, r: Report, heap: number): void {
    const sorted = [...r.latencies].sort((a, b) => a - b);
    const f = [...fanout].sort((a, b) => a - b);
    rows.push(
      `${phase.padEnd(44)} ${String(clients).padStart(6)} ${fmt(heap)} ${fmt(percentile(sorted, 50))} ${fmt(percentile(sorted, 99))} ${fmt(percentile(f, 50), 2)} ${fmt(percentile(f, 99), 2)}  ${r.events}/${clients * EVENTS}${r.duplicates ? ` (${r.duplicates} duplicates)` : ''}`,
    );
  }

  const one = await startClients(1, '/events');
  await write(EVENTS);
  summarize('1 client', 1, await report(one), heapMiB());
  one.send({ kind: 'exit' });

  const many = await startClients(CLIENTS, '/events');
  await sleep(500);
  const connectedHeap = heapMiB();
  await write(EVENTS);
  summarize(`${CLIENTS.toLocaleString('en')} clients`, CLIENTS, await report(many), heapMiB());

  const stalled = await startClients(1, '/events?full=1', { SSE_STALL: '1' });
  await write(EVENTS);
  summarize(`${CLIENTS.toLocaleString('en')} clients + 1 stalled (1 MiB events)`, CLIENTS, await report(many), heapMiB());
  const stats = hub.stats();

  console.log('phase                                        clients heap MiB   p50 ms   p99 ms fan-out p50/p99 ms  delivered');
  for (const row of rows) console.log(row);
  console.log(`\nserver heap: idle ${idleHeap.toFixed(1)} MiB, ${CLIENTS.toLocaleString('en')} clients connected ${connectedHeap.toFixed(1)} MiB: ${(((connectedHeap - idleHeap) * 1024) / CLIENTS).toFixed(2)} KiB per client`);
  console.log(`stalled client: dropped (slow-client) ${stats.dropped['slow-client']} time(s); clients still connected ${stats.clients}; hub head ${stats.head}`);
  for (const child of [many, stalled]) child.send({ kind: 'exit' });
  await sleep(500);
}

async function snapshotBench(): Promise<void> {
  // --- snapshot phase ---------------------------------------------------------------------------------------------
  const CITIES = ['Lisbon', 'Oslo', 'Lyon', 'Kraków', 'Porto', 'Ghent', 'Turin', 'Bergen'];
  for (let i = 0; i < ROWS; i += 1_000) {
    const changes = Array.from({ length: Math.min(1_000, ROWS - i) }, (_, j) => ({
      key: `r${String(i + j).padStart(6, '0')}`,
      row: { name: `customer ${i + j}`, city: CITIES[(i + j) % CITIES.length]!, total: (i + j) % 997 },
      lsn: i + j + 1,
      timestampMs: 0,
      partition: '0',
    }));
    await view.write({ mode: 'guarded', changes, partitions: [{ partition: '0', epoch: 1, position: `p${i + changes.length}`, lsn: i + changes.length, range: { minInclusive: '', maxExclusive: 'FF' } }] });
  }
  const viewHeap = heapMiB();
  const copy = await view.rows();
  const oneCopy = heapMiB() - viewHeap;
  copy.length = 0;
  const baseHeap = heapMiB();
  let peak = 0;
  // Live heap (after a full collection), four times a second: what the snapshots hold, not garbage not yet collected.
  const sampler = setInterval(() => (peak = Math.max(peak, heapMiB())), 250);
  const started = performance.now();
  const readers = await startClients(SNAPSHOT_CLIENTS, '/snapshot', { SSE_MODE: 'snapshot' });
  let done: Report;
  for (;;) {
    done = await report(readers);
    if (done.snapshots.length >= SNAPSHOT_CLIENTS) break;
    await sleep(200);
  }
  const elapsed = performance.now() - started;
  clearInterval(sampler);
  readers.send({ kind: 'exit' });
  const ms = done.snapshots.map((s) => s.ms).sort((a, b) => a - b);
  const bytes = done.snapshots.reduce((sum, s) => sum + s.bytes, 0);
  console.log(`\nsnapshot: ${ROWS.toLocaleString('en')}-row view to ${SNAPSHOT_CLIENTS} clients at once`);
  console.log(`  every client got ${done.snapshots.every((s) => s.rows === ROWS) ? 'all' : 'NOT all'} ${ROWS.toLocaleString('en')} rows; ${(bytes / 2 ** 20).toFixed(0)} MiB sent in ${(elapsed / 1000).toFixed(1)} s; per client p50 ${(percentile(ms, 50) / 1000).toFixed(1)} s, slowest ${(ms.at(-1)! / 1000).toFixed(1)} s`);
  console.log(`  server heap: view held ${viewHeap.toFixed(0)} MiB; one rows() copy ${oneCopy.toFixed(0)} MiB; peak live heap during the snapshots ${peak.toFixed(0)} MiB (+${(peak - baseHeap).toFixed(0)} MiB over idle, vs ${(oneCopy * SNAPSHOT_CLIENTS).toFixed(0)} MiB for a copy per client)`);
  console.log(`  snapshot hub: ${JSON.stringify(snapshotHub.stats())}`);
}
