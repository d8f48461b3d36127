import { createRequire } from 'node:module';
import type * as OpenTelemetryApi from '@opentelemetry/api';

/** The OpenTelemetry API module, as this package sees it. @internal */
export type OtelApi = typeof OpenTelemetryApi;

let loaded: OtelApi | null | undefined;

/**
 * `@opentelemetry/api` when the app installed it (an optional peer dependency), else `undefined`.
 *
 * Loaded synchronously and once. Whichever copy of the API module is found, the tracer and meter providers
 * the app registered are shared: the API keeps them in one global slot per major version.
 *
 * @internal
 */
export function openTelemetryApi(): OtelApi | undefined {
  if (loaded === undefined) {
    try {
      // CommonJS build: `require`; ES modules: a require of our own (the API ships CommonJS too).
      const load = typeof require === 'function' ? require : createRequire(import.meta.url);
      loaded = load('@opentelemetry/api') as OtelApi;
    } catch {
      loaded = null;
    }
  }
  return loaded ?? undefined;
}
