import type { Attributes, Counter, Histogram, Meter, Observable, ObservableResult, ProxyTracerProvider, Span, SpanOptions, Tracer } from '@opentelemetry/api';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import type { FeedEvent } from '../core/events.js';
import { openTelemetryApi, type OtelApi } from './openTelemetryApi.js';
import { resolveTelemetryOptions, type TelemetryOptions } from './options.js';
import { PartitionTelemetry } from './PartitionTelemetry.js';
import { traceLinks } from './traceLinks.js';

const NAME = 'rxfeed';
/** Bucket boundaries (s) the messaging semantic conventions advise for durations. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/** Who is consuming what: the attributes every span and metric of one processor carries. @internal */
export interface TelemetryIdentity {
  /** `messaging.system`, e.g. `azure_cosmosdb`. */
  readonly system: string;
  /** `messaging.destination.name`: the container. */
  readonly destination: string;
  /** `messaging.consumer.group.name`: the processor's lease prefix. */
  readonly consumerGroup: string;
  /** `messaging.client.id`: this host's instance name. */
  readonly owner: string;
  /** Milliseconds now (the processor's scheduler clock). */
  readonly now: () => number;
}

/** The instruments of one processor. */
interface Instruments {
  readonly processDuration: Histogram;
  readonly operationDuration: Histogram;
  readonly readRetries: Counter;
  readonly checkpoints: Counter;
  readonly checkpointedChanges: Counter;
  readonly errors: Counter;
  readonly leaseEvents: Counter;
  readonly deadLetters: Counter;
}

/**
 * OpenTelemetry traces and metrics of one processor: created only when `@opentelemetry/api` is installed and
 * telemetry is not turned off. Each owned lease gets a {@link PartitionTelemetry} for its batches.
 *
 * @internal
 */
export class FeedTelemetry {
  readonly #api: OtelApi;
  readonly #tracer: Tracer;
  readonly #instruments: Instruments;
  readonly #common: Attributes;
  /** @internal Attributes of `messaging.process.duration` (and of `messaging.client.operation.duration`). */
  readonly processMetricAttributes: Attributes;
  /** @internal */
  readonly readMetricAttributes: Attributes;
  readonly #now: () => number;
  readonly #linkField: string | null;
  readonly #spanName: string;
  readonly #partitions = new Map<string, PartitionTelemetry>();
  /** Totals of ownerships that ended, by their attributes (counters never go back when a lease moves on). */
  readonly #retired = new Map<Attributes, { consumed: number; readCharge: number }>();
  readonly #retiredByLease = new Map<string, Attributes>();
  readonly #leaseCharges = new Map<string, number>();
  /**
   * The global tracer provider (a proxy) when the tracer is its: until an SDK is registered there, the tracer
   * is a no-op one; `undefined` once one was (or for a provider of the app's own).
   */
  #proxy: ProxyTracerProvider | undefined;
  /** What a no-op tracer gives every batch: a non-recording span with the invalid context. */
  readonly #noopSpan: Span;

  /** Telemetry for a processor, or `undefined` when turned off or `@opentelemetry/api` is not installed. */
  static create(option: TelemetryOptions | false | undefined, identity: TelemetryIdentity): FeedTelemetry | undefined {
    const resolved = resolveTelemetryOptions(option);
    const api = resolved === false ? undefined : openTelemetryApi();
    if (resolved === false || api === undefined) return undefined;
    const tracerProvider = resolved.tracerProvider ?? api.trace.getTracerProvider();
    const tracer = tracerProvider.getTracer(NAME) as Tracer;
    const meter = (resolved.meterProvider ?? api.metrics.getMeterProvider()).getMeter(NAME) as Meter;
    // The API's proxy classes (exported in 1.x; a later major may drop them: then every batch takes the full path).
    const { ProxyTracerProvider: Proxy, ProxyTracer } = api as Partial<Pick<OtelApi, 'ProxyTracerProvider' | 'ProxyTracer'>>;
    const proxy = typeof Proxy === 'function' && typeof ProxyTracer === 'function' && tracerProvider instanceof Proxy && tracer instanceof ProxyTracer ? tracerProvider : undefined;
    return new FeedTelemetry(api, tracer, meter, identity, resolved.traceContextField, proxy);
  }

  private constructor(api: OtelApi, tracer: Tracer, meter: Meter, identity: TelemetryIdentity, linkField: string | null, proxy: ProxyTracerProvider | undefined) {
    this.#api = api;
    this.#tracer = tracer;
    this.#proxy = proxy;
    this.#noopSpan = api.trace.wrapSpanContext(api.INVALID_SPAN_CONTEXT);
    this.#now = identity.now;
    this.#linkField = linkField;
    this.#spanName = `process ${identity.destination}`;
    this.#common = {
      'messaging.system': identity.system,
      'messaging.destination.name': identity.destination,
      'messaging.consumer.group.name': identity.consumerGroup,
      'messaging.client.id': identity.owner,
    };
    // The duration histograms carry the conventions' metric attributes only: no lease (a series per lease and
    // bucket would multiply by the leases) and no client id (the host is the resource's service.instance.id).
    // Fewer attributes also cost less on every record (the SDK hashes them each time).
    const durations = {
      'messaging.system': identity.system,
      'messaging.destination.name': identity.destination,
      'messaging.consumer.group.name': identity.consumerGroup,
    };
    this.processMetricAttributes = { ...durations, 'messaging.operation.type': 'process', 'messaging.operation.name': 'process' };
    this.readMetricAttributes = { ...durations, 'messaging.operation.type': 'receive', 'messaging.operation.name': 'read_feed' };
    const seconds = { unit: 's', advice: { explicitBucketBoundaries: DURATION_BUCKETS } };
    this.#instruments = {
      processDuration: meter.createHistogram('messaging.process.duration', { ...seconds, description: 'Time from a batch being emitted to its acknowledgement at checkpointEvery' }),
      operationDuration: meter.createHistogram('messaging.client.operation.duration', { ...seconds, description: 'Duration of change feed reads' }),
      readRetries: meter.createCounter('rxfeed.read.retries', { unit: '{retry}', description: 'Failed partition reads that are retried, by cause' }),
      checkpoints: meter.createCounter('rxfeed.checkpoints', { unit: '{checkpoint}', description: 'Checkpoints written' }),
      checkpointedChanges: meter.createCounter('rxfeed.checkpointed.changes', { unit: '{change}', description: 'Changes covered by written checkpoints' }),
      errors: meter.createCounter('rxfeed.errors', { unit: '{error}', description: 'Errors reported on the events stream, by type and kind' }),
      leaseEvents: meter.createCounter('rxfeed.lease.events', { unit: '{event}', description: 'Lease ownership events (acquired, released, lost, taken_over, split)' }),
      deadLetters: meter.createCounter('rxfeed.dead_letters', { unit: '{change}', description: 'Changes written to the dead-letter sink (onFailure: { deadLetter })' }),
    };
    // Counted in plain numbers on the hot path, reported when the reader collects (no attribute hashing per batch).
    // The meter holds the callbacks for as long as it lives: they reach this processor through a weak reference,
    // and remove themselves once it was collected, so a processor dropped by the app is not kept (nor observed).
    const self = new WeakRef(this);
    const observe = (instrument: Observable, report: (telemetry: FeedTelemetry, result: ObservableResult) => void): void => {
      const callback = (result: ObservableResult): void => {
        const telemetry = self.deref();
        if (telemetry) report(telemetry, result);
        else instrument.removeCallback(callback);
      };
      instrument.addCallback(callback);
    };
    observe(meter.createObservableCounter('messaging.client.consumed.messages', { unit: '{message}', description: 'Changes delivered to the pipeline' }), (t, result) => {
      for (const p of t.#partitions.values()) result.observe(p.consumed, p.attributes);
      for (const [attributes, total] of t.#retired) result.observe(total.consumed, attributes);
    });
    observe(meter.createObservableCounter('rxfeed.request_charge', { unit: '{request_unit}', description: 'Request units charged, by operation' }), (t, result) => {
      for (const p of t.#partitions.values()) result.observe(p.readCharge, p.readChargeAttributes);
      for (const [attributes, total] of t.#retired) result.observe(total.readCharge, { ...attributes, 'rxfeed.operation': 'read_feed' });
      for (const [operation, charge] of t.#leaseCharges) result.observe(charge, { ...t.#common, 'rxfeed.operation': operation });
    });
    observe(meter.createObservableGauge('rxfeed.lease.lag', { unit: '{change}', description: 'Changes after the last acknowledged one, per owned lease, as of its last read' }), (t, result) => {
      for (const p of t.#partitions.values()) {
        const lag = p.lag;
        if (lag !== undefined) result.observe(lag, p.attributes);
      }
    });
    observe(meter.createObservableGauge('rxfeed.leases.owned', { unit: '{lease}', description: 'Leases this host owns' }), (t, result) => {
      result.observe(t.#partitions.size, t.#common);
    });
  }

  /** The telemetry of one owned lease's batches; `end` it when the ownership ends. */
  partition(leaseToken: string): PartitionTelemetry {
    const attributes = this.#retiredByLease.get(leaseToken) ?? { ...this.#common, 'messaging.destination.partition.id': leaseToken };
    const partition = new PartitionTelemetry(this, leaseToken, attributes, this.#retired.get(attributes));
    this.#retired.delete(attributes);
    this.#partitions.set(leaseToken, partition);
    return partition;
  }

  /** Records what a lease store request cost (`operation`: e.g. `lease.replace`). */
  leaseRequest(operation: string, requestCharge: number): void {
    this.#leaseCharges.set(operation, (this.#leaseCharges.get(operation) ?? 0) + requestCharge);
  }

  /** Metrics and lease life-cycle spans from a processor event. */
  event(event: FeedEvent): void {
    const i = this.#instruments;
    switch (event.type) {
      case 'leaseAcquired':
      case 'leaseReleased':
      case 'leaseLost':
      case 'leaseTakenOver':
      case 'partitionSplit':
        this.#leaseEvent(event);
        break;
      case 'checkpoint':
        i.checkpoints.add(1, this.#common);
        i.checkpointedChanges.add(event.changes, this.#common);
        break;
      case 'error':
        i.errors.add(1, { ...this.#common, 'error.type': event.error.name, 'rxfeed.error.kind': event.kind });
        break;
      case 'readRetry':
        i.readRetries.add(1, { ...this.#common, 'messaging.destination.partition.id': event.lease, 'rxfeed.read.failure': event.failure });
        break;
      case 'deadLettered':
        this.#deadLettered(event);
        break;
      case 'stall':
        break;
    }
  }

  /**
   * Dead-lettered changes: counted, and a short INTERNAL span `dead letter` (under the batch's span when the
   * operator that gave up runs in it, as rxfeed's operators and handlers do).
   */
  #deadLettered(event: Extract<FeedEvent, { type: 'deadLettered' }>): void {
    const attributes: Attributes = { ...this.#common, 'messaging.destination.partition.id': event.lease };
    this.#instruments.deadLetters.add(event.lsns.length, attributes);
    const at = this.#now();
    const span = this.#tracer.startSpan('dead letter', {
      kind: this.#api.SpanKind.INTERNAL,
      attributes: { ...attributes, 'messaging.batch.message_count': event.lsns.length, 'rxfeed.dead_letter.sink': event.sink, 'rxfeed.operator': event.operator, 'rxfeed.dead_letter.lsns': [...event.lsns] },
      startTime: at,
    });
    span.end(at);
  }

  #leaseEvent(event: Extract<FeedEvent, { lease: string }>): void {
    const name = LEASE_EVENT_NAMES[event.type];
    if (name === undefined) return;
    const attributes: Attributes = { ...this.#common, 'messaging.destination.partition.id': event.lease, 'rxfeed.lease.event': name };
    if (event.type === 'leaseAcquired') attributes['rxfeed.lease.epoch'] = event.epoch;
    if (event.type === 'leaseReleased') attributes['rxfeed.lease.close_reason'] = event.reason;
    if (event.type === 'partitionSplit') attributes['rxfeed.lease.children'] = [...event.children];
    this.#instruments.leaseEvents.add(1, { ...this.#common, 'rxfeed.lease.event': name });
    const at = this.#now();
    this.#tracer.startSpan(`lease ${name}`, { kind: this.#api.SpanKind.INTERNAL, attributes, startTime: at }).end(at);
  }

  // ---- used by PartitionTelemetry ------------------------------------------------------------------------

  /** @internal */ get api(): OtelApi {
    return this.#api;
  }

  /** @internal */ get instruments(): Instruments {
    return this.#instruments;
  }

  /** @internal */ now(): number {
    return this.#now();
  }

  /**
   * @internal Starts the CONSUMER span of a batch (`attributes`: its partition's process attributes). With no
   * SDK registered behind the global provider, its proxy tracer answers every span with the no-op tracer's
   * non-recording span of the invalid context, whatever the links and attributes: that span is given without
   * reading the documents for links. Once an SDK is registered there, every batch goes through the tracer
   * (the proxy tracer keeps that SDK's tracer from then on too).
   */
  startBatchSpan(batch: ChangeBatch<unknown>, attributes: Attributes, at: number): Span {
    const proxy = this.#proxy;
    if (proxy !== undefined) {
      if (proxy.getDelegateTracer(NAME) === undefined) return this.#noopSpan;
      this.#proxy = undefined;
    }
    const links = this.#linkField === null ? undefined : traceLinks(this.#api, batch.changes, this.#linkField);
    const options: SpanOptions = links === undefined ? { kind: this.#api.SpanKind.CONSUMER, startTime: at, attributes } : { kind: this.#api.SpanKind.CONSUMER, startTime: at, attributes, links };
    const span = this.#tracer.startSpan(this.#spanName, options, this.#api.ROOT_CONTEXT);
    // A non-recording span (no SDK, or not sampled) takes no attributes: skip the call.
    if (span.isRecording()) span.setAttribute('messaging.batch.message_count', batch.size);
    return span;
  }

  /** @internal An ownership ended: its counts stay in the totals. */
  forget(partition: PartitionTelemetry): void {
    if (this.#partitions.get(partition.leaseToken) !== partition) return;
    this.#partitions.delete(partition.leaseToken);
    this.#retired.set(partition.attributes, { consumed: partition.consumed, readCharge: partition.readCharge });
    this.#retiredByLease.set(partition.leaseToken, partition.attributes);
  }
}

const LEASE_EVENT_NAMES: Partial<Record<FeedEvent['type'], string>> = {
  leaseAcquired: 'acquired',
  leaseReleased: 'released',
  leaseLost: 'lost',
  leaseTakenOver: 'taken_over',
  partitionSplit: 'split',
};
