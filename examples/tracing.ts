/**
 * @summary Tracing: what a processor looks like in OpenTelemetry. Orders written under a checkout trace, processed
 * by rxfeed with a PostgreSQL query per batch, printed as the span tree and the metrics an exporter would send.
 *
 * Run: `npm run demo:trace` (or `npx tsx examples/tracing.ts`)
 *
 * Settings (environment):
 * - `COSMOS_ENDPOINT`, `COSMOS_KEY`: the account to use. Default: start the embedded emulator.
 * - `DATABASE_URL`: PostgreSQL for the per-batch query, traced by `@opentelemetry/instrumentation-pg` (e.g.
 *   `postgresql://postgres@127.0.0.1:5432/test`). Default: no database; the batch work is a span of the app's own.
 *
 * The app sets OpenTelemetry up as any app does (a tracer provider with an exporter, a meter provider with a
 * reader, the async-hooks context manager) and registers them globally: rxfeed finds them with no option.
 * In production the exporters would be OTLP; here they keep everything in memory so the example can print it.
 */
import { CosmosClient } from '@azure/cosmos';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { context, metrics, propagation, trace, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import type * as Instrumentation from '@opentelemetry/instrumentation';
import type * as InstrumentationPg from '@opentelemetry/instrumentation-pg';
import type * as Pg from 'pg';
import { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, eachBatch } from 'rxfeed';
import { CosmosEmulator } from 'rxfeed/emulator';

interface Order {
  id: string;
  customerId: string;
  totalCents: number;
  /** The W3C trace context of the request that wrote the order (rxfeed's default `traceContextField`). */
  traceparent?: string;
}

/** One span as printed: name, kind, duration, attributes, and the spans under it. */
export interface SpanNode {
  readonly name: string;
  readonly kind: string;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly links: number;
  readonly children: readonly SpanNode[];
}

/** What {@link main} found. */
export interface TracingResult {
  /** Every order was processed, under a `process orders` span that links to the checkout trace that wrote it. */
  readonly ok: boolean;
  /** The spans of the run as trees (roots first, each process span with the work done under it). */
  readonly roots: readonly SpanNode[];
  /** Metric name → unit, as the meter provider's reader collected them. */
  readonly metrics: ReadonlyMap<string, string>;
  /** Whether the batch work was a real `pg` query (DATABASE_URL given) or a span of the app's own. */
  readonly pg: boolean;
}

/** A metric reader the example collects from on demand (an exporter would push the same data). */
class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
  async collected(): Promise<MetricData[]> {
    const { resourceMetrics } = await this.collect();
    return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
  }
}

const KINDS = ['INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];

function treeOf(spans: readonly ReadableSpan[]): SpanNode[] {
  const byParent = new Map<string, ReadableSpan[]>();
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  for (const span of spans) {
    const parent = span.parentSpanContext?.spanId;
    const key = parent && ids.has(parent) ? parent : '';
    byParent.set(key, [...(byParent.get(key) ?? []), span]);
  }
  const node = (span: ReadableSpan): SpanNode => ({
    name: span.name,
    kind: KINDS[span.kind] ?? String(span.kind),
    attributes: span.attributes,
    links: span.links.length,
    children: (byParent.get(span.spanContext().spanId) ?? []).map(node),
  });
  return (byParent.get('') ?? []).map(node);
}

function print(nodes: readonly SpanNode[], depth = 0, shown = new Map<string, number>()): void {
  for (const n of nodes) {
    // The same kind of span repeats per batch and per lease: print the first two of each name at each depth.
    const key = `${depth}:${n.name}`;
    const seen = shown.get(key) ?? 0;
    shown.set(key, seen + 1);
    if (seen === 2) console.log(`${'  '.repeat(depth)}… (more "${n.name}" spans)`);
    if (seen >= 2) continue;
    const attributes = Object.entries(n.attributes)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    console.log(`${'  '.repeat(depth)}${n.name} [${n.kind}]${n.links ? ` links=${n.links}` : ''} ${attributes}`);
    print(n.children, depth + 1, shown);
  }
}

/**
 * Runs the example: writes orders under checkout traces, processes them with rxfeed under OpenTelemetry, prints
 * the span tree and the metric names, and checks that every order was processed under a linked process span.
 *
 * @example
 * ```ts
 * const { ok, roots, metrics } = await main(process.env);
 * ```
 */
export async function main(env: NodeJS.ProcessEnv = process.env): Promise<TracingResult> {
  // 1. The app's OpenTelemetry start (what `@opentelemetry/sdk-node` does for you), registered globally.
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  const require = createRequire(import.meta.url);
  let pgClient: Pg.Client | undefined;
  let unregister = (): void => {};
  if (env.DATABASE_URL) {
    const { registerInstrumentations } = require('@opentelemetry/instrumentation') as typeof Instrumentation;
    const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg') as typeof InstrumentationPg;
    unregister = registerInstrumentations({ instrumentations: [new PgInstrumentation()], tracerProvider });
    // Loaded after the instrumentation, through require, which it patches.
    const pg = require('pg') as typeof Pg;
    pgClient = new pg.Client({ connectionString: env.DATABASE_URL });
    await pgClient.connect();
  }
  const app = trace.getTracer('shop');

  const emulator = env.COSMOS_ENDPOINT ? undefined : await CosmosEmulator.start({ initialRangeCount: 2 });
  const client = new CosmosClient(
    emulator ? { endpoint: emulator.endpoint, key: emulator.key } : { endpoint: env.COSMOS_ENDPOINT!, key: env.COSMOS_KEY ?? '' },
  );
  try {
    const { database } = await client.databases.createIfNotExists({ id: env.COSMOS_DATABASE ?? 'rxfeed-examples' });
    const { container: orders } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/customerId'], version: 2 } });
    const { container: leases } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });

    // 2. The shop writes orders, each inside a checkout request's span; the trace context goes into the document.
    const written = new Set<string>();
    const runId = Date.now().toString(36);
    for (let n = 0; n < 12; n++) {
      await app.startActiveSpan('POST /checkout', async (span: Span) => {
        const carrier: Record<string, string> = {};
        propagation.inject(context.active(), carrier, { set: (c, k, v) => void (c[k] = v) });
        const traceparent = carrier.traceparent ?? `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;
        const order: Order = { id: `order-${runId}-${n}`, customerId: `customer-${n % 5}`, totalCents: 1_000 + n * 125, traceparent };
        await orders.items.create(order);
        written.add(order.id);
        span.end();
      });
    }

    // 3. The processor: nothing telemetry-specific to set; the global providers are used.
    const processed = new Set<string>();
    const feed = createChangeFeed<Order>({
      source: new CosmosSource<Order>(orders),
      leases: new CosmosLeaseStore({ container: leases }),
      leasePrefix: `tracing.${runId}.`,
      instanceName: 'tracing-example',
      startFrom: 'beginning',
      pollIntervalMs: 200,
    });
    const subscription = feed.changes$
      .pipe(
        eachBatch(async (batch) => {
          // The batch's work: runs with the batch's span active, so the app's own spans nest under it.
          if (pgClient) await pgClient.query('SELECT $1::int AS orders', [batch.changes.length]);
          else await app.startActiveSpan(`save ${batch.changes.length} orders`, async (span: Span) => span.end());
          for (const change of batch.changes) if (change.document) processed.add(change.document.id);
        }),
        checkpointEvery(1),
      )
      .subscribe({ error: (error: unknown) => console.error('pipeline failed:', error) });
    for (const deadline = Date.now() + 60_000; processed.size < written.size && Date.now() < deadline; ) await sleep(100);
    await feed.stop();
    subscription.unsubscribe();

    // 4. What an exporter would have sent.
    const spans = exporter.getFinishedSpans();
    const roots = treeOf(spans);
    const processSpans = spans.filter((s) => s.name === 'process orders' && Number(s.attributes['messaging.batch.message_count']) > 0);
    const checkoutTraces = new Set(spans.filter((s) => s.name === 'POST /checkout').map((s) => s.spanContext().traceId));
    const linked = processSpans.flatMap((s) => s.links.map((l) => l.context.traceId)).filter((t) => checkoutTraces.has(t));
    const work = spans.filter((s) => (pgClient ? s.name.startsWith('pg.query') : s.name.startsWith('save ')));
    const processIds = new Set(processSpans.map((s) => s.spanContext().spanId));
    const nested = work.every((s) => processIds.has(s.parentSpanContext?.spanId ?? ''));
    const collected = new Map((await reader.collected()).map((m) => [m.descriptor.name, m.descriptor.unit]));

    console.log(`spans (${spans.length}):`);
    print(roots);
    console.log(`metrics (${collected.size}):`);
    for (const [name, unit] of [...collected].sort()) console.log(`  ${name}${unit ? ` (${unit})` : ''}`);
    const ok = processed.size === written.size && linked.length === written.size && work.length > 0 && nested;
    console.log(
      `check: ${ok ? 'OK' : 'FAILED'} (${processed.size}/${written.size} orders processed, ${linked.length} linked to their checkout trace, ` +
        `${work.length} ${pgClient ? 'pg queries' : 'app spans'} ${nested ? 'all' : 'not all'} under a process span)`,
    );
    return { ok, roots, metrics: collected, pg: pgClient !== undefined };
  } finally {
    client.dispose();
    await emulator?.stop();
    await pgClient?.end();
    unregister();
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    trace.disable();
    metrics.disable();
    context.disable();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    (r) => process.exit(r.ok ? 0 : 1),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
