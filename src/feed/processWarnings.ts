import type { FeedEvent } from '../core/events.js';
import { classifyFailure } from '../errors/classify.js';
import { LeaseGapError } from '../leases/coordinator/Coverage.js';

/** What a process warning is about; its `code` is `RXFEED_<KIND>`. */
export type WarningKind = 'REPEATED_FAILURE' | 'STALL' | 'HALTED' | 'FATAL' | 'LEASE_GAP';

/** First wait before a kind is warned about again, in ms; it doubles after each warning, up to {@link MAX_INTERVAL_MS}. */
const FIRST_INTERVAL_MS = 60_000;
/** Longest wait between two warnings of one kind, in ms. */
const MAX_INTERVAL_MS = 3_600_000;

/**
 * Turns the important events of a processor nobody listens to into `process.emitWarning(message,
 * { type: 'RxfeedWarning', code: 'RXFEED_<KIND>' })`, Node's convention for a library to be heard: a failure
 * that repeats (an `error` event at its 3rd attempt or later), a stall, a halted partition, a key range found
 * without a lease (and given leases: `LeaseGapError`), a fatal stop. Each kind is warned about at once, then at
 * a falling rate: at most once a minute, then every 2, 4, … minutes (up to an hour), each warning counting the
 * events of its kind it stood for.
 *
 * @example
 * ```ts
 * const warnings = new ProcessWarnings('host-1', () => scheduler.now());
 * const emit = (event: FeedEvent) => { if (!events.observed) warnings.consider(event); events.next(event); };
 * ```
 *
 * @internal
 */
export class ProcessWarnings {
  readonly #owner: string;
  readonly #now: () => number;
  readonly #kinds = new Map<WarningKind, { nextAtMs: number; intervalMs: number; unsaid: number }>();

  constructor(owner: string, now: () => number) {
    this.#owner = owner;
    this.#now = now;
  }

  /** Warns about `event` if it is important and its kind is due. */
  consider(event: FeedEvent): void {
    const kind = warningKind(event);
    if (!kind) return;
    const now = this.#now();
    const state = this.#kinds.get(kind);
    if (state && now < state.nextAtMs) {
      state.unsaid++;
      return;
    }
    const intervalMs = state ? Math.min(MAX_INTERVAL_MS, state.intervalMs * 2) : FIRST_INTERVAL_MS;
    const more = state?.unsaid ? ` (${state.unsaid} more like it since the last warning)` : '';
    this.#kinds.set(kind, { nextAtMs: now + intervalMs, intervalMs, unsaid: 0 });
    const hint = 'subscribe to events$ (or pass the events option) to handle these; until then they are warned about at a falling rate';
    const what = describe(kind, event).replace(/\.+$/, '');
    process.emitWarning(`rxfeed [owner=${this.#owner}${'lease' in event && event.lease !== undefined ? ` lease=${event.lease}` : ''}]: ${what}${more}. ${hint}`, {
      type: 'RxfeedWarning',
      code: `RXFEED_${kind}`,
    });
  }
}

/** The kind of warning `event` calls for, or `undefined` when it is not important enough to be heard unasked. */
export function warningKind(event: FeedEvent): WarningKind | undefined {
  switch (event.type) {
    case 'stall':
      return 'STALL';
    case 'leaseReleased':
      return event.reason === 'Halted' ? 'HALTED' : undefined;
    case 'error':
      if (event.kind === 'fencing' || event.kind === 'corrupt') return undefined;
      // A key range that had no lease (its changes were read by nobody) and was repaired.
      if (event.error instanceof LeaseGapError) return 'LEASE_GAP';
      // Configuration mistakes and sinks that refuse for good stop the processor.
      if (event.kind === 'infrastructure' && event.attempts === undefined && classifyFailure(event.error) === 'permanent') return 'FATAL';
      return (event.attempts ?? 1) >= 3 ? 'REPEATED_FAILURE' : undefined;
    default:
      return undefined;
  }
}

function describe(kind: WarningKind, event: FeedEvent): string {
  switch (kind) {
    case 'STALL':
      return `stall: ${(event as Extract<FeedEvent, { type: 'stall' }>).message}`;
    case 'HALTED':
      return `partition halted by its failure policy (onFailure): nothing past the failing change is checkpointed and the lease was given back (close reason Halted)`;
    case 'LEASE_GAP':
      return (event as Extract<FeedEvent, { type: 'error' }>).error.message;
    case 'FATAL':
      return `stopping: ${(event as Extract<FeedEvent, { type: 'error' }>).error.message}`;
    case 'REPEATED_FAILURE': {
      const e = event as Extract<FeedEvent, { type: 'error' }>;
      return `a failure keeps repeating (${e.attempts} attempts, ${e.kind}): ${e.error.message}`;
    }
  }
}
