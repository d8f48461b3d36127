import type { SseDropReason } from '../SseClient.js';

/** @internal A hub's counters, kept by the parts that see what they count (read by `stats()`). */
export interface HubCounters {
  connected: number;
  readonly dropped: Record<SseDropReason, number>;
  resets: number;
  resumed: number;
  snapshots: number;
  /** Changes (or rows) left out for one client because its filter or projection threw. */
  clientErrors: number;
}

/** @internal Counters at zero. */
export function newCounters(): HubCounters {
  return { connected: 0, dropped: { 'slow-client': 0, 'view-error': 0, 'hub-closed': 0 }, resets: 0, resumed: 0, snapshots: 0, clientErrors: 0 };
}
