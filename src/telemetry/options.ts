import { InvalidOptionsError } from '../errors/index.js';

/**
 * Anything with `getTracer`, such as an OpenTelemetry `TracerProvider` (declared structurally, so rxfeed's
 * types do not need `@opentelemetry/api` installed).
 */
export interface TracerProviderLike {
  /** The tracer rxfeed creates its spans with (named `rxfeed`). */
  getTracer(name: string, version?: string): unknown;
}

/** Anything with `getMeter`, such as an OpenTelemetry `MeterProvider`. */
export interface MeterProviderLike {
  /** The meter rxfeed creates its instruments with (named `rxfeed`). */
  getMeter(name: string, version?: string): unknown;
}

/**
 * OpenTelemetry traces and metrics of a processor. rxfeed uses the `@opentelemetry/api` package when it is
 * installed (an optional peer dependency): with no options, the global tracer and meter providers, which do
 * nothing until the app starts an OpenTelemetry SDK. Give `telemetry: false` to a processor to turn it off.
 *
 * What it records: one CONSUMER span per batch (`process {container}`) from the moment the batch is emitted
 * until `checkpointEvery` acknowledges it, with the OpenTelemetry messaging attributes; the user code run by
 * rxfeed's operators and handlers runs with that span active; short INTERNAL spans for lease life-cycle events;
 * and the metrics listed in the README's observability section.
 *
 * @example
 * ```ts
 * import { createChangeFeed } from 'rxfeed';
 * const feed = createChangeFeed({ source, leases, instanceName: 'host-1', leasePrefix: 'orders.', telemetry: { traceContextField: 'traceparent' } });
 * ```
 */
export interface TelemetryOptions {
  /** Where spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  readonly tracerProvider?: TracerProviderLike;
  /** Where metrics go. Default: the global meter provider (`metrics.getMeterProvider()`). */
  readonly meterProvider?: MeterProviderLike;
  /**
   * The document field that carries the trace context of the write that produced it: a W3C `traceparent`
   * string, or an object with `traceparent` (and `tracestate`). Each batch's span links to the trace contexts
   * of its documents (at most 128), so a write's trace continues into its processing. `null`: no links.
   * Default `'traceparent'`.
   */
  readonly traceContextField?: string | null;
}

/** {@link TelemetryOptions} validated, with defaults. @internal */
export interface ResolvedTelemetryOptions {
  readonly tracerProvider: TracerProviderLike | undefined;
  readonly meterProvider: MeterProviderLike | undefined;
  readonly traceContextField: string | null;
}

/** Validates `telemetry`; `false` when turned off. Throws an `InvalidOptionsError` saying what to fix. @internal */
export function resolveTelemetryOptions(option: TelemetryOptions | false | undefined): ResolvedTelemetryOptions | false {
  if (option === false) return false;
  if (option !== undefined && (typeof option !== 'object' || option === null)) {
    throw new InvalidOptionsError('telemetry', 'expected false or { tracerProvider?, meterProvider?, traceContextField? }');
  }
  const { tracerProvider, meterProvider, traceContextField = 'traceparent' } = option ?? {};
  if (tracerProvider !== undefined && typeof (tracerProvider as TracerProviderLike).getTracer !== 'function') {
    throw new InvalidOptionsError('telemetry.tracerProvider', 'expected an OpenTelemetry TracerProvider (an object with getTracer)');
  }
  if (meterProvider !== undefined && typeof (meterProvider as MeterProviderLike).getMeter !== 'function') {
    throw new InvalidOptionsError('telemetry.meterProvider', 'expected an OpenTelemetry MeterProvider (an object with getMeter)');
  }
  if (traceContextField !== null && (typeof traceContextField !== 'string' || traceContextField === '')) {
    throw new InvalidOptionsError('telemetry.traceContextField', `expected a document field name or null, got ${String(traceContextField)}`);
  }
  return { tracerProvider, meterProvider, traceContextField };
}
