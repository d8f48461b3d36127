import type { FeedEvent } from '../core/events.js';

/** One owned lease in a {@link ProcessorHealth} snapshot. */
export interface LeaseHealth {
  /** The lease token. */
  readonly lease: string;
  /** The epoch this host owns it at. */
  readonly epoch: number;
  /** When it was acquired (ms since the epoch, the processor's clock). */
  readonly acquiredAt: number;
  /** When its partition was last read successfully; `undefined` before the first read. */
  readonly lastReadAt: number | undefined;
  /** True from a `stall` event of this lease until its next checkpoint. */
  readonly stalled: boolean;
}

/**
 * What a processor is doing, for probes and dashboards: `processor.health()`.
 *
 * @example
 * ```ts
 * const { ready, leases } = feed.health();
 * if (!ready) console.warn('not ready:', leases.filter((l) => l.stalled || l.lastReadAt === undefined));
 * ```
 */
export interface ProcessorHealth {
  /** `'idle'` (not subscribed), `'running'`, `'stopping'`, `'stopped'` or `'failed'` (a fatal error ended it). */
  readonly status: 'idle' | 'running' | 'stopping' | 'stopped' | 'failed';
  /** False only once a fatal error ended the processor (what a liveness probe asks). */
  readonly live: boolean;
  /** Running, and every owned lease was read within `readyReadMs` and none is stalled (what a readiness probe asks). */
  readonly ready: boolean;
  /** This host's name. */
  readonly owner: string;
  /** The leases this host owns. */
  readonly leases: readonly LeaseHealth[];
  /** The last `error` event, if any. */
  readonly lastError: { readonly name: string; readonly message: string; readonly at: number; readonly lease?: string } | undefined;
}

interface LeaseState {
  epoch: number;
  acquiredAt: number;
  lastReadAt: number | undefined;
  stalled: boolean;
}

/**
 * Keeps a processor's {@link ProcessorHealth} current from its events and its readers' reads.
 *
 * @internal
 */
export class FeedHealth {
  readonly #owner: string;
  readonly #now: () => number;
  readonly #readyReadMs: number;
  readonly #leases = new Map<string, LeaseState>();
  #status: ProcessorHealth['status'] = 'idle';
  #lastError: ProcessorHealth['lastError'];

  constructor(owner: string, now: () => number, readyReadMs: number) {
    this.#owner = owner;
    this.#now = now;
    this.#readyReadMs = readyReadMs;
  }

  /** The run began (`'running'`), is stopping, stopped, or failed. */
  set status(status: ProcessorHealth['status']) {
    if (this.#status === 'failed' && status !== 'running') return;
    this.#status = status;
    if (status !== 'running') this.#leases.clear();
  }

  /** A read of `lease` succeeded. */
  read(lease: string): void {
    const state = this.#leases.get(lease);
    if (state) state.lastReadAt = this.#now();
  }

  event(event: FeedEvent): void {
    switch (event.type) {
      case 'leaseAcquired':
        this.#leases.set(event.lease, { epoch: event.epoch, acquiredAt: this.#now(), lastReadAt: undefined, stalled: false });
        break;
      case 'leaseReleased':
      case 'leaseLost':
      case 'partitionSplit':
        this.#leases.delete(event.lease);
        break;
      case 'stall': {
        const state = event.lease === undefined ? undefined : this.#leases.get(event.lease);
        if (state) state.stalled = true;
        break;
      }
      case 'checkpoint': {
        const state = this.#leases.get(event.lease);
        if (state) state.stalled = false;
        break;
      }
      case 'error':
        this.#lastError = {
          name: event.error.name,
          message: event.error.message,
          at: this.#now(),
          ...(event.lease !== undefined ? { lease: event.lease } : {}),
        };
        break;
      default:
        break;
    }
  }

  snapshot(): ProcessorHealth {
    const now = this.#now();
    const leases = [...this.#leases].map(([lease, s]) => ({ lease, epoch: s.epoch, acquiredAt: s.acquiredAt, lastReadAt: s.lastReadAt, stalled: s.stalled }));
    const fresh = (l: LeaseHealth) => !l.stalled && l.lastReadAt !== undefined && now - l.lastReadAt <= this.#readyReadMs;
    return {
      status: this.#status,
      live: this.#status !== 'failed',
      ready: this.#status === 'running' && leases.every(fresh),
      owner: this.#owner,
      leases,
      lastError: this.#lastError,
    };
  }
}
