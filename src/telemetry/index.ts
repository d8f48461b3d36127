export { inBatchContext } from './inBatchContext.js';
export type { MeterProviderLike, TelemetryOptions, TracerProviderLike } from './options.js';
