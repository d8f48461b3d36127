/**
 * What OpenTelemetry costs: MemorySource → eachBatch → checkpointEvery through the whole engine, with
 * telemetry off and with the OpenTelemetry SDK recording every span and metric (a batch span processor
 * exporting to a no-op exporter, a meter provider with a reader), side by side in one process, rounds
 * alternating; the ratio is the median of the per-round ratios (throughput with telemetry / without).
 * Target: ≥ 0.95.
 *
 * Pages of 100 and of 1000 by default (BENCH_PAGES=100,1000), each size in a child process of its own (in one
 * process the second size ran out of heap). rxfeed is the built package (bench/built.ts).
 *
 * Run: npx tsx bench/telemetry.ts   (BENCH_CHANGES, BENCH_ROUNDS, BENCH_PAGES to change the sizes;
 * BENCH_PROFILE=path writes CPU profiles of the measured part of 5 more runs of each side:
 * path.telemetry-<page>.{off,on}.cpuprofile)
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { filter, firstValueFrom, scan } from 'rxjs';
import type { MemorySource as Source, TelemetryOptions } from '../src/index.js';
import { checkpointEvery, createChangeFeed, eachBatch, MemoryLeaseStore, MemorySource } from './built.js';
import { paired, ratioLine } from './stats.js';
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface Doc {
  id: string;
  n: number;
}

const TOTAL = Number(process.env['BENCH_CHANGES'] ?? 200_000);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 11);
const PAGES = (process.env['BENCH_PAGES'] ?? process.env['BENCH_PAGE'] ?? '100,1000').split(',').map(Number);

/** Exports nothing, as fast as it can: what the SDK costs without any exporter's own cost. */
class NoopExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}

class Reader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

function source(): Source<Doc> {
  const s = new MemorySource<Doc>({ partitions: 4, description: 'bench' });
  for (let n = 0; n < TOTAL; n++) s.write({ id: `d${n}`, n });
  return s;
}

/** Where a profiled run says its measured part starts and stops. */
interface Measured {
  start(): Promise<void>;
  stop(): Promise<void>;
}

interface CpuProfile {
  nodes: { id: number; callFrame: { url: string }; children?: number[] }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Profiles the measured part of 5 runs (not the writing of their sources, nor the forced GC before each) and
 * writes them as one profile to `file` (the runs' nodes side by side, for bench/profileTop.ts).
 */
async function profile(file: string, fn: (measured: Measured) => Promise<unknown>): Promise<void> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  const merged: CpuProfile = { nodes: [], startTime: 0, endTime: 0, samples: [], timeDeltas: [] };
  for (let i = 0; i < 5; i++) {
    await fn({
      start: async () => void (await session.post('Profiler.start')),
      stop: async () => {
        const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: CpuProfile };
        const offset = merged.nodes.reduce((max, n) => Math.max(max, n.id), 0);
        // Samples taken while the inspector itself answers Profiler.stop are not the run's: left out.
        const inspector = new Set<number>();
        const mark = (n: CpuProfile['nodes'][number], under: boolean) => {
          const inside = under || n.callFrame.url === 'node:inspector';
          if (inside) inspector.add(n.id);
          for (const c of n.children ?? []) mark(byId.get(c)!, inside);
        };
        const byId = new Map(profile.nodes.map((n) => [n.id, n]));
        mark(profile.nodes[0]!, false);
        merged.nodes.push(...profile.nodes.map((n) => ({ ...n, id: n.id + offset, ...(n.children ? { children: n.children.map((c) => c + offset) } : {}) })));
        profile.samples.forEach((sample, i) => {
          if (inspector.has(sample)) return;
          merged.samples.push(sample + offset);
          merged.timeDeltas.push(profile.timeDeltas[i]!);
        });
        merged.endTime += profile.endTime - profile.startTime;
      },
    });
  }
  session.disconnect();
  writeFileSync(file, JSON.stringify(merged));
}

/** One run: wall ms and this process's CPU ms (CPU is the steadier figure on a shared machine). */
async function run(telemetry: TelemetryOptions | false, PAGE: number, measured?: Measured): Promise<{ wall: number; cpu: number }> {
  const written = source();
  const feed = createChangeFeed<Doc>({
    source: written,
    leases: new MemoryLeaseStore(),
    instanceName: 'bench',
    leasePrefix: 'bench.',
    maxItemCount: PAGE,
    maxInFlightChanges: PAGE * 32,
    telemetry,
  });
  let sink = 0;
  gc();
  await measured?.start();
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await firstValueFrom(
    feed.changes$.pipe(
      eachBatch(async (batch) => {
        for (const c of batch) sink += c.document?.n ?? 0;
      }),
      checkpointEvery({ count: 10_000, ms: 1_000 }),
      scan((n, b) => n + b.size, 0),
      filter((n) => n >= TOTAL),
    ),
  );
  const wall = performance.now() - started;
  await measured?.stop();
  const cpu = process.cpuUsage(cpuBefore);
  await feed.stop();
  if (sink < 0) throw new Error('unreachable');
  return { wall, cpu: (cpu.user + cpu.system) / 1000 };
}

import { median } from './stats.js';

/** Measures the page sizes given, in this process. */
async function measure(pages: readonly number[]): Promise<void> {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new NoopExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  const reader = new Reader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const on: TelemetryOptions = { tracerProvider, meterProvider };

  console.log(`node ${process.version}; ${TOTAL} changes, 4 partitions, ${ROUNDS} paired rounds alternating, after one unmeasured round`);
  for (const page of pages) {
    const { a: offs, b: ons } = await paired(ROUNDS, () => run(false, page), () => run(on, page));
    if (process.env['BENCH_VERBOSE']) offs.forEach((off, i) => console.log(`round ${i}: off ${off.wall.toFixed(0)} ms (cpu ${off.cpu.toFixed(0)}), on ${ons[i]!.wall.toFixed(0)} ms (cpu ${ons[i]!.cpu.toFixed(0)})`));
    console.log(
      `telemetry overhead, pages of ${page}: off ${median(offs.map((r) => r.wall)).toFixed(0)} ms, on ${median(ons.map((r) => r.wall)).toFixed(0)} ms; ` +
        `throughput on/off ${ratioLine(offs.map((off, i) => off.wall / ons[i]!.wall), 3)}; CPU per change on/off ${ratioLine(offs.map((off, i) => ons[i]!.cpu / off.cpu), 3)}`,
    );
    const path = process.env['BENCH_PROFILE'];
    if (path) for (const [side, telemetry] of [['off', false], ['on', on]] as const) await profile(`${path}.telemetry-${page}.${side}.cpuprofile`, (measured) => run(telemetry, page, measured));
  }
  await reader.collect();
  await tracerProvider.forceFlush();
  console.log(`${exporter.spans} spans exported in all`);
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
}

/** Runs this bench again in a child process for one page size; resolves with its exit code. */
function child(page: number): Promise<number> {
  return new Promise((resolve, reject) => {
    spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
      stdio: 'inherit',
      // The package was built by this process (bench/built.ts): the child loads it as it is.
      env: { ...process.env, BENCH_PAGES: String(page), RXFEED_BENCH_BUILT: '1' },
    })
      .on('error', reject)
      .on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

// One process per page size: the spans, metrics and garbage of one size's rounds stay out of the other's
// measurements, and both sizes in one process ran out of heap (the default 200,000 changes × 11 rounds × 2 sides each).
if (PAGES.length > 1) {
  for (const page of PAGES) {
    const code = await child(page);
    if (code !== 0) {
      console.error(`pages of ${page}: the child process exited with ${code}`);
      process.exitCode = code;
    }
  }
} else {
  await measure(PAGES);
}
