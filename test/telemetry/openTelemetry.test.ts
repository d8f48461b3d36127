/**
 * OpenTelemetry through the real SDK (in-memory span exporter, a metric reader collected on demand, the async
 * hooks context manager): a span per batch from emission to acknowledgement with the messaging attributes,
 * user work nested under it, links to the documents' trace contexts, lease life-cycle spans, and the metrics.
 */
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { context, createContextKey, ROOT_CONTEXT, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, ParentBasedSampler, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import type * as Instrumentation from '@opentelemetry/instrumentation';
import type * as InstrumentationPg from '@opentelemetry/instrumentation-pg';
import type * as Pg from 'pg';
import { concatMap, from } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkpointEvery,
  createChangeFeed,
  eachBatch,
  eachChange,
  MemoryDeadLetterStore,
  inBatchContext,
  MemoryLeaseStore,
  MemorySource,
  type Change,
  type ChangeFeedOptions,
} from '../../src/index.js';
import { VirtualClock } from '../support/faults/clock.js';

interface Doc {
  id: string;
  n: number;
  traceparent?: string;
}

class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
  async metrics(): Promise<Map<string, MetricData>> {
    const { resourceMetrics } = await this.collect();
    return new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
  }
}

const TIMINGS = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000 } as const;
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  context.disable();
});

function world() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const clock = new VirtualClock(1_700_000_000_000);
  const source = new MemorySource<Doc>({ partitions: 2, description: 'orders' });
  const options: ChangeFeedOptions<Doc> = {
    source,
    leases: new MemoryLeaseStore(),
    instanceName: 'host-a',
    leasePrefix: 'orders.',
    scheduler: clock,
    ...TIMINGS,
    telemetry: { tracerProvider, meterProvider },
  };
  return { exporter, tracerProvider, reader, clock, source, options };
}

const processSpans = (spans: readonly ReadableSpan[]) => spans.filter((s) => s.name === 'process orders');
const sum = (metric: MetricData | undefined) =>
  (metric?.dataPoints as { value: number | { count: number } }[] | undefined)?.reduce((n, p) => n + (typeof p.value === 'number' ? p.value : p.value.count), 0) ?? 0;

describe('OpenTelemetry', () => {
  it('gives each batch a CONSUMER span from emission to acknowledgement, with user work nested under it', async () => {
    const { exporter, tracerProvider, clock, source, options } = world();
    const userTracer = tracerProvider.getTracer('app');
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    for (let n = 0; n < 10; n++) source.write({ id: `d${n}`, n, ...(n === 3 ? { traceparent: parent } : {}) });
    const feed = createChangeFeed<Doc>(options);
    const nested: string[] = [];
    const subscription = feed.changes$
      .pipe(
        eachBatch(async (batch) => {
          // The user's own instrumented call: its span must be a child of the batch's span.
          const span = userTracer.startSpan(`save ${batch.partition}`);
          nested.push(span.spanContext().spanId);
          await Promise.resolve();
          span.end();
        }),
        checkpointEvery(1),
      )
      .subscribe();
    await clock.advance(2_000);
    await feed.stop();
    subscription.unsubscribe();

    const spans = exporter.getFinishedSpans();
    const batches = processSpans(spans).filter((s) => (s.attributes['messaging.batch.message_count'] as number) > 0);
    expect(batches.length).toBeGreaterThanOrEqual(2);
    for (const span of batches) {
      expect(span.kind).toBe(SpanKind.CONSUMER);
      expect(span.status.code).not.toBe(SpanStatusCode.ERROR);
      expect(span.attributes).toMatchObject({
        'messaging.system': 'rxfeed',
        'messaging.operation.type': 'process',
        'messaging.operation.name': 'process',
        'messaging.destination.name': 'orders',
        'messaging.consumer.group.name': 'orders.',
        'messaging.client.id': 'host-a',
      });
      expect(['0', '1']).toContain(span.attributes['messaging.destination.partition.id']);
    }
    expect(batches.reduce((n, s) => n + (s.attributes['messaging.batch.message_count'] as number), 0)).toBe(10);
    // The document written under a trace continues into the batch that processed it.
    const linked = batches.filter((s) => s.links.some((l) => l.context.traceId === '0af7651916cd43dd8448eb211c80319c'));
    expect(linked).toHaveLength(1);
    expect(linked[0]!.links[0]!.context.spanId).toBe('b7ad6b7169203331');
    // Each user span is a child of one of the process spans.
    const children = spans.filter((s) => s.name.startsWith('save '));
    expect(children).toHaveLength(nested.length);
    const processIds = new Set(processSpans(spans).map((s) => s.spanContext().spanId));
    for (const child of children) expect(processIds.has(child.parentSpanContext?.spanId ?? '')).toBe(true);
    // Lease life-cycle as short internal spans.
    const leaseSpans = spans.filter((s) => s.name.startsWith('lease '));
    expect(leaseSpans.filter((s) => s.name === 'lease acquired')).toHaveLength(2);
    expect(leaseSpans.filter((s) => s.name === 'lease released')).toHaveLength(2);
    expect(leaseSpans.every((s) => s.kind === SpanKind.INTERNAL)).toBe(true);
  });

  it('runs user code in the batch span through inBatchContext, also when the work starts later', async () => {
    const { exporter, tracerProvider, clock, source, options } = world();
    for (let n = 0; n < 6; n++) source.write({ id: `d${n}`, n });
    const feed = createChangeFeed<Doc>(options);
    const userTracer = tracerProvider.getTracer('app');
    const subscription = feed.changes$
      .pipe(
        // concatMap queues batches: the work for a later batch starts in an earlier batch's completion.
        concatMap((batch) =>
          from(
            new Promise<typeof batch>((resolve) =>
              clock.schedule(() => resolve(inBatchContext(batch, () => (userTracer.startSpan('later').end(), batch))), 10),
            ),
          ),
        ),
        checkpointEvery(1),
      )
      .subscribe();
    await clock.advance(2_000);
    await feed.stop();
    subscription.unsubscribe();
    const spans = exporter.getFinishedSpans();
    const processIds = new Set(processSpans(spans).map((s) => s.spanContext().spanId));
    const later = spans.filter((s) => s.name === 'later');
    expect(later.length).toBeGreaterThanOrEqual(2);
    for (const span of later) expect(processIds.has(span.parentSpanContext?.spanId ?? '')).toBe(true);
  });

  it('activates the batch span on top of the caller\'s context, wherever and however often it is activated', async () => {
    const { clock, source, options } = world();
    for (let n = 0; n < 4; n++) source.write({ id: `d${n}`, n });
    const feed = createChangeFeed<Doc>(options);
    const key = createContextKey('an app value');
    const activeSpanId = () => trace.getSpan(context.active())?.spanContext().spanId;
    const seen: { batch: string | undefined; from: unknown[] }[] = [];
    const subscription = feed.changes$
      .pipe(
        eachBatch(async (batch) => {
          const batchSpan = activeSpanId();
          const from: unknown[] = [];
          // From contexts of the app's own (one after another, then none): the app's value stays, the batch
          // span is active on top of it, and a nested activation changes nothing.
          for (const value of [1, 2, 1, undefined]) {
            const parent = value === undefined ? ROOT_CONTEXT : ROOT_CONTEXT.setValue(key, value);
            from.push(context.with(parent, () => inBatchContext(batch, () => [context.active().getValue(key), activeSpanId(), inBatchContext(batch, activeSpanId)])));
          }
          seen.push({ batch: batchSpan, from });
        }),
        checkpointEvery(1),
      )
      .subscribe();
    await clock.advance(2_000);
    await feed.stop();
    subscription.unsubscribe();
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const { batch, from } of seen) {
      expect(batch).toBeDefined();
      expect(from).toEqual([
        [1, batch, batch],
        [2, batch, batch],
        [1, batch, batch],
        [undefined, batch, batch],
      ]);
    }
  });

  it('ends the span of a batch that left the pipeline unacknowledged with error.type', async () => {
    const { exporter, clock, source, options } = world();
    source.write({ id: 'a', n: 1 });
    const feed = createChangeFeed<Doc>(options);
    // Never acknowledged: the ownership ends at stop() with the batch still out.
    const subscription = feed.changes$.subscribe();
    await clock.advance(500);
    const stopping = feed.stop();
    await clock.advance(options.drainTimeoutMs ?? 35_000);
    await stopping;
    subscription.unsubscribe();
    const unacked = processSpans(exporter.getFinishedSpans()).filter((s) => (s.attributes['messaging.batch.message_count'] as number) > 0);
    expect(unacked).toHaveLength(1);
    expect(unacked[0]!.status.code).toBe(SpanStatusCode.ERROR);
    expect(unacked[0]!.attributes['error.type']).toBe('ownership_ended');
  });

  it('lets the telemetry of a processor the app dropped be collected: its metric callbacks do not keep it', () => {
    // In a process of its own, with a garbage collection it can ask for; it counts the telemetry objects left.
    const script = fileURLToPath(new URL('./fixtures/droppedProcessor.ts', import.meta.url));
    const out = execFileSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8', timeout: 60_000 });
    expect(JSON.parse(out.trim().split('\n').at(-1)!)).toEqual({ before: 2, after: 1, kept: 'kept' });
  });

  it('makes dead-lettering visible: a dead letter span under the batch span, and rxfeed.dead_letters', async () => {
    const { exporter, reader, clock, source, options } = world();
    for (let n = 0; n < 6; n++) source.write({ id: `d${n}`, n });
    const feed = createChangeFeed<Doc>(options);
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const subscription = feed.changes$
      .pipe(
        eachChange(
          concatMap(async (c: Change<Doc>) => {
            if (c.document?.n === 4) throw new Error('poison');
            return c;
          }),
          { onFailure: { retry: { attempts: 1 }, deadLetter } },
        ),
        checkpointEvery(1),
      )
      .subscribe();
    await clock.advance(2_000);
    await feed.stop();
    subscription.unsubscribe();
    expect(deadLetter.size).toBe(1);
    const spans = exporter.getFinishedSpans();
    const letters = spans.filter((s) => s.name === 'dead letter');
    expect(letters).toHaveLength(1);
    expect(letters[0]!.attributes).toMatchObject({ 'messaging.batch.message_count': 1, 'rxfeed.dead_letter.sink': deadLetter.description, 'rxfeed.operator': 'eachChange' });
    // Under the process span of the batch the change came in.
    const parent = processSpans(spans).find((s) => s.spanContext().spanId === letters[0]!.parentSpanContext?.spanId);
    expect(parent?.attributes['messaging.destination.partition.id']).toBe(letters[0]!.attributes['messaging.destination.partition.id']);
    expect(sum((await reader.metrics()).get('rxfeed.dead_letters'))).toBe(1);
  });

  it('keeps a sampled-out batch span active around the work, so what the work calls stays in its trace', async () => {
    const { clock, source, options } = world();
    // rxfeed's spans are never sampled; the app's own follow their parent (sampled out too) or start traces.
    const exporter = new InMemorySpanExporter();
    const sampledOut = new BasicTracerProvider({ sampler: new AlwaysOffSampler(), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const app = new BasicTracerProvider({ sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    for (let n = 0; n < 4; n++) source.write({ id: `d${n}`, n });
    const feed = createChangeFeed<Doc>({ ...options, telemetry: { ...options.telemetry, tracerProvider: sampledOut } });
    const traces: string[] = [];
    let calls = 0;
    const subscription = feed.changes$
      .pipe(
        eachBatch(async (batch) => {
          if (batch.size === 0) return;
          calls++;
          traces.push(trace.getActiveSpan()?.spanContext().traceId ?? 'none');
          app.getTracer('app').startSpan('save').end();
        }),
        checkpointEvery(1),
      )
      .subscribe();
    await clock.advance(2_000);
    await feed.stop();
    subscription.unsubscribe();
    expect(calls).toBeGreaterThanOrEqual(2);
    // Every call saw a batch span (a valid, sampled-out context), and the app's spans under it were not sampled.
    expect(traces.every((t) => /^[0-9a-f]{32}$/.test(t) && t !== '0'.repeat(32))).toBe(true);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('records the semantic-convention metrics and rxfeed\'s own', async () => {
    const { reader, clock, source, options } = world();
    for (let n = 0; n < 25; n++) source.write({ id: `d${n}`, n });
    const feed = createChangeFeed<Doc>(options);
    const subscription = feed.changes$.pipe(checkpointEvery(5)).subscribe();
    await clock.advance(2_000);
    const metrics = await reader.metrics();
    expect(sum(metrics.get('messaging.client.consumed.messages'))).toBe(25);
    expect(metrics.get('messaging.client.consumed.messages')?.descriptor.unit).toBe('{message}');
    expect(sum(metrics.get('messaging.process.duration'))).toBeGreaterThanOrEqual(2);
    expect(metrics.get('messaging.process.duration')?.descriptor.unit).toBe('s');
    expect(sum(metrics.get('messaging.client.operation.duration'))).toBeGreaterThanOrEqual(2);
    // The duration histograms carry the conventions' metric attributes, not the lease nor the client id (a series
    // per lease and bucket would multiply by the leases; the host is the resource's service.instance.id).
    for (const name of ['messaging.process.duration', 'messaging.client.operation.duration']) {
      for (const point of metrics.get(name)!.dataPoints) {
        expect(point.attributes).toMatchObject({ 'messaging.system': 'rxfeed', 'messaging.destination.name': 'orders', 'messaging.consumer.group.name': 'orders.' });
        expect(point.attributes).not.toHaveProperty('messaging.destination.partition.id');
        expect(point.attributes).not.toHaveProperty('messaging.client.id');
      }
    }
    expect(sum(metrics.get('rxfeed.leases.owned'))).toBe(2);
    expect(sum(metrics.get('rxfeed.checkpoints'))).toBeGreaterThanOrEqual(2);
    expect(sum(metrics.get('rxfeed.checkpointed.changes'))).toBe(25);
    expect(sum(metrics.get('rxfeed.lease.events'))).toBe(2);
    // Everything read was acknowledged: the lag of both leases is 0.
    const lag = metrics.get('rxfeed.lease.lag');
    expect(lag?.dataPoints).toHaveLength(2);
    expect(sum(lag)).toBe(0);
    await feed.stop();
    subscription.unsubscribe();
  });

  it('is off with telemetry: false, and rejects a provider that is not one', () => {
    const { options } = world();
    expect(() => createChangeFeed<Doc>({ ...options, telemetry: { tracerProvider: {} as never } })).toThrow(/telemetry.tracerProvider/);
    expect(() => createChangeFeed<Doc>({ ...options, telemetry: false })).not.toThrow();
  });

  it('nests a pg query made inside eachBatch under the batch span (instrumentation-pg)', async (ctx) => {
    const { exporter, tracerProvider, clock, source, options } = world();
    const require = createRequire(import.meta.url);
    const { registerInstrumentations } = require('@opentelemetry/instrumentation') as typeof Instrumentation;
    const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg') as typeof InstrumentationPg;
    const unregister = registerInstrumentations({ instrumentations: [new PgInstrumentation()], tracerProvider });
    // Loaded after the instrumentation, through require, which it patches.
    const pg = require('pg') as typeof Pg;
    const client = new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' });
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      unregister();
      if (process.env['CI'] === 'true') throw error;
      console.log(`skipped: PostgreSQL is not reachable on 127.0.0.1:5432 (${(error as Error).message})`);
      ctx.skip();
      return;
    }
    try {
      source.write({ id: 'a', n: 1 });
      const feed = createChangeFeed<Doc>(options);
      const subscription = feed.changes$
        .pipe(
          eachBatch(async (batch) => {
            if (batch.size > 0) await client.query('SELECT $1::int AS n', [batch.size]);
          }),
          checkpointEvery(1),
        )
        .subscribe();
      // The query runs on real I/O: let virtual time and the event loop both move.
      for (let i = 0; i < 100 && !exporter.getFinishedSpans().some((s) => s.name.startsWith('pg.query')); i++) {
        await clock.advance(50);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await feed.stop();
      subscription.unsubscribe();
      const spans = exporter.getFinishedSpans();
      const query = spans.find((s) => s.name.startsWith('pg.query'));
      expect(query).toBeDefined();
      const parent = processSpans(spans).find((s) => s.spanContext().spanId === query!.parentSpanContext?.spanId);
      expect(parent?.attributes['messaging.batch.message_count']).toBe(1);
    } finally {
      unregister();
      await client.end();
    }
  });

  it('uses the global providers by default', async () => {
    const { exporter, tracerProvider, clock, source, options } = world();
    trace.setGlobalTracerProvider(tracerProvider);
    try {
      source.write({ id: 'a', n: 1 });
      const feed = createChangeFeed<Doc>({ ...options, telemetry: undefined });
      const subscription = feed.changes$.pipe(checkpointEvery(1)).subscribe();
      await clock.advance(1_000);
      await feed.stop();
      subscription.unsubscribe();
      expect(processSpans(exporter.getFinishedSpans()).length).toBeGreaterThan(0);
    } finally {
      trace.disable();
    }
  });

  it('gives batches no-op spans until an SDK is registered globally, and real ones, with their links, from then on', async () => {
    const { exporter, tracerProvider, clock, source, options } = world();
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    source.write({ id: 'before', n: 1, traceparent: parent });
    const feed = createChangeFeed<Doc>({ ...options, telemetry: undefined });
    const subscription = feed.changes$.pipe(checkpointEvery(1)).subscribe();
    try {
      await clock.advance(1_000);
      trace.setGlobalTracerProvider(tracerProvider);
      expect(processSpans(exporter.getFinishedSpans())).toEqual([]);
      source.write({ id: 'after', n: 2, traceparent: parent });
      await clock.advance(1_000);
      const spans = processSpans(exporter.getFinishedSpans());
      expect(spans.map((s) => s.attributes['messaging.batch.message_count'])).toEqual([1]);
      expect(spans[0]!.links.map((l) => l.context.spanId)).toEqual(['b7ad6b7169203331']);
    } finally {
      await feed.stop();
      subscription.unsubscribe();
      trace.disable();
    }
  });
});
