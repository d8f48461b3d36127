/**
 * What OpenTelemetry costs: MemorySource → eachBatch → checkpointEvery through the whole engine, with
 * telemetry off and with the OpenTelemetry SDK recording every span and metric (a batch span processor
 * exporting to a no-op exporter, a meter provider with a reader), side by side in one process, rounds
 * alternating; the ratio is the median of the per-round ratios (throughput with telemetry / without).
 * Target: ≥ 0.95.
 *
 * Run: npx tsx bench/telemetry.ts   (BENCH_CHANGES, BENCH_ROUNDS, BENCH_PAGE to change the sizes)
 */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { filter, firstValueFrom, scan } from 'rxjs';
import { checkpointEvery, createChangeFeed, eachBatch, MemoryLeaseStore, MemorySource, type TelemetryOptions } from '../src/index.js';

interface Doc {
  id: string;
  n: number;
}

const TOTAL = Number(process.env['BENCH_CHANGES'] ?? 200_000);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 7);
const PAGE = Number(process.env['BENCH_PAGE'] ?? 100);

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

function source(): MemorySource<Doc> {
  const s = new MemorySource<Doc>({ partitions: 4, description: 'bench' });
  for (let n = 0; n < TOTAL; n++) s.write({ id: `d${n}`, n });
  return s;
}

/** One run: wall ms and this process's CPU ms (CPU is the steadier figure on a shared machine). */
async function run(telemetry: TelemetryOptions | false): Promise<{ wall: number; cpu: number }> {
  const feed = createChangeFeed<Doc>({
    source: source(),
    leases: new MemoryLeaseStore(),
    instanceName: 'bench',
    leasePrefix: 'bench.',
    maxItemCount: PAGE,
    maxInFlightChanges: PAGE * 32,
    telemetry,
  });
  let sink = 0;
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
  const cpu = process.cpuUsage(cpuBefore);
  await feed.stop();
  if (sink < 0) throw new Error('unreachable');
  return { wall, cpu: (cpu.user + cpu.system) / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new NoopExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
const reader = new Reader();
const meterProvider = new MeterProvider({ readers: [reader] });
const on: TelemetryOptions = { tracerProvider, meterProvider };

await run(false); // warm-up, unmeasured
await run(on);
const wallRatios: number[] = [];
const cpuRatios: number[] = [];
const offs: number[] = [];
const ons: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which side goes first, so drift in the machine's speed falls on both.
  let off;
  let withTelemetry;
  if (round % 2 === 0) {
    off = await run(false);
    withTelemetry = await run(on);
  } else {
    withTelemetry = await run(on);
    off = await run(false);
  }
  offs.push(off.wall);
  ons.push(withTelemetry.wall);
  wallRatios.push(off.wall / withTelemetry.wall);
  cpuRatios.push(withTelemetry.cpu / off.cpu);
  if (process.env["BENCH_VERBOSE"]) console.log(`round ${round}: off ${off.wall.toFixed(0)} ms (cpu ${off.cpu.toFixed(0)}), on ${withTelemetry.wall.toFixed(0)} ms (cpu ${withTelemetry.cpu.toFixed(0)})`);
}
await reader.collect();
await tracerProvider.forceFlush();
const spread = (xs: number[]) => {
  const sorted = [...xs].sort((x, y) => x - y);
  const quarter = Math.floor(sorted.length / 4);
  return `${median(xs).toFixed(3)}× (middle half ${sorted[quarter]!.toFixed(3)}–${sorted[sorted.length - 1 - quarter]!.toFixed(3)})`;
};
console.log(
  `telemetry overhead: ${TOTAL} changes, pages of ${PAGE}, 4 partitions, ${ROUNDS} paired rounds: off ${median(offs).toFixed(0)} ms, ` +
    `on ${median(ons).toFixed(0)} ms; throughput on/off ${spread(wallRatios)}; CPU per change on/off ${spread(cpuRatios)}; ` +
    `${exporter.spans} spans exported`,
);
await tracerProvider.shutdown();
await meterProvider.shutdown();
