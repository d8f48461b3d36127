/**
 * Where telemetry's cost per batch goes, without the pipeline around it: rxfeed's per-batch calls (a read
 * recorded, a batch emitted, its work activated twice — at emission and, nested, by the operator — and its
 * acknowledgement) on the real SDK, against the bare SDK calls any implementation must make for the same
 * output (a CONSUMER span with the 7 messaging attributes plus the batch size, made active once, and the
 * two duration histograms), and those calls on their own. In CPU microseconds per batch of 100 changes (CPU,
 * not wall: steadier on a shared machine), the median of 7 runs of 100,000 batches.
 *
 * Run: npx tsx bench/telemetryCost.ts   (rxfeed is the built package, dist/esm, built first)
 */
import { context, ROOT_CONTEXT, SpanKind, trace, type Attributes } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type * as Telemetry from '../src/telemetry/FeedTelemetry.js';
import type * as Batches from '../src/core/ChangeBatch.js';

execFileSync(process.execPath, [fileURLToPath(new URL('../scripts/build.mjs', import.meta.url))], { stdio: 'ignore' });
const { FeedTelemetry } = (await import(new URL('../dist/esm/telemetry/FeedTelemetry.js', import.meta.url).href)) as typeof Telemetry;
const { ChangeBatch } = (await import(new URL('../dist/esm/core/ChangeBatch.js', import.meta.url).href)) as typeof Batches;

class NoopExporter implements SpanExporter {
  export(_spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}
class Reader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new NoopExporter())] });
const meterProvider = new MeterProvider({ readers: [new Reader()] });
const BATCHES = 100_000;
const TOKENS = ['0', '1', '2', '3'];
let clock = 0;
let sink = 0;

const feed = FeedTelemetry.create({ tracerProvider, meterProvider }, { system: 'memory', destination: 'bench', consumerGroup: 'bench.', owner: 'bench', now: () => clock })!;
const partitions = TOKENS.map((token) => feed.partition(token));
const sequences = TOKENS.map(() => 0);
const changes = Array.from({ length: 100 }, (_, n) => ({ id: `d${n}`, document: { id: `d${n}`, n }, lsn: n, timestampMs: n, operation: 'create' as const, partitionKey: `d${n}` }));
const page = { changes, position: '100', latestLsn: 1_000 };
const batch = new ChangeBatch({ partition: '0', changes, position: page.position, epoch: 1 } as ConstructorParameters<typeof ChangeBatch>[0]);

function rxfeedBatch(i: number): void {
  const p = partitions[i & 3]!;
  const sequence = sequences[i & 3]!++;
  clock++;
  p.read(1, page);
  p.emitted(sequence, batch as never);
  p.activate(sequence, () => p.activate(sequence, () => sink++));
  p.acknowledged(sequence);
}

const tracer = tracerProvider.getTracer('bare');
const meter = meterProvider.getMeter('bare');
const seconds = { unit: 's', advice: { explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10] } };
const readDuration = meter.createHistogram('read', seconds);
const processDuration = meter.createHistogram('process', seconds);
const attributes = (type: string, name: string, fields: readonly string[]): Attributes[] =>
  TOKENS.map((token) => {
    const all: Attributes = {
      'messaging.system': 'memory',
      'messaging.destination.name': 'bench',
      'messaging.consumer.group.name': 'bench.',
      'messaging.client.id': 'bench',
      'messaging.destination.partition.id': token,
      'messaging.operation.type': type,
      'messaging.operation.name': name,
    };
    return Object.fromEntries(Object.entries(all).filter(([key]) => fields.includes(key)));
  });
const ALL = ['messaging.system', 'messaging.destination.name', 'messaging.consumer.group.name', 'messaging.client.id', 'messaging.destination.partition.id', 'messaging.operation.type', 'messaging.operation.name'];
const process7 = attributes('process', 'process', ALL);
const read7 = attributes('receive', 'read_feed', ALL);
const FIVE = ALL.filter((key) => key !== 'messaging.client.id' && key !== 'messaging.destination.partition.id');
const process5 = attributes('process', 'process', FIVE);
const read5 = attributes('receive', 'read_feed', FIVE);

function span(i: number): void {
  const s = tracer.startSpan('process bench', { kind: SpanKind.CONSUMER, startTime: clock, attributes: process7[i & 3]! }, ROOT_CONTEXT);
  s.setAttribute('messaging.batch.message_count', 100);
  context.with(trace.setSpan(ROOT_CONTEXT, s), () => sink++);
  s.end(clock);
}
const histograms = (read: Attributes[], process: Attributes[]) => (i: number) => {
  readDuration.record(0.001, read[i & 3]);
  processDuration.record(0.001, process[i & 3]);
};
const histograms7 = histograms(read7, process7);
function bare(i: number): void {
  clock++;
  span(i);
  histograms7(i);
}

async function cpuPerBatch(name: string, fn: (i: number) => void): Promise<void> {
  const runs: number[] = [];
  for (let run = 0; run < 8; run++) {
    const before = process.cpuUsage();
    for (let i = 0; i < BATCHES; i++) fn(i);
    const used = process.cpuUsage(before);
    if (run > 0) runs.push((used.user + used.system) / BATCHES);
    await new Promise((resolve) => setImmediate(resolve));
  }
  runs.sort((a, b) => a - b);
  console.log(`${name.padEnd(62)} ${runs[3]!.toFixed(2)} µs CPU per batch (runs ${runs[0]!.toFixed(2)}–${runs[runs.length - 1]!.toFixed(2)})`);
}

console.log(`node ${process.version}; batches of 100 changes, 4 leases`);
await cpuPerBatch('rxfeed: read, emitted, activate ×2 (nested), acknowledged', rxfeedBatch);
await cpuPerBatch('bare SDK: span (8 attributes, made active once) + 2 histograms', bare);
await cpuPerBatch('  span only, made active once', span);
await cpuPerBatch('  2 histogram records, 7 attributes each', histograms7);
await cpuPerBatch('  2 histogram records, 5 (no client.id, no partition.id)', histograms(read5, process5));
await tracerProvider.shutdown();
await meterProvider.shutdown();
