export type { LeaseHealth, ProcessorHealth } from './FeedHealth.js';
export { healthHandler, type HealthHandlerOptions } from './healthHandler.js';
export { stopOnSignals, type StopOnSignalsOptions } from './stopOnSignals.js';
