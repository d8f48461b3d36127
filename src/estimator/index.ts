export { estimateLag, UNKNOWN_LAG, type EstimateLagOptions, type LeaseLag } from './estimateLag.js';
export { lag$, type LagPollOptions } from './lag.js';
