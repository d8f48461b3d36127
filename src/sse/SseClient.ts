import type { SchedulerLike, Subscription } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ViewRow } from '../sinks/ViewStore.js';
import { logger } from '../internal/log.js';
import { formatSseMessage } from './eventFormat.js';

const log = logger('sse');

/**
 * The part of a `node:http` `ServerResponse` (or any `Writable`) a client connection uses. Express, Koa
 * (`ctx.res`) and Fastify (`reply.raw`) all hand you one.
 */
export interface SseResponse {
  /** Writes a chunk; `flushed` runs once it is handed to the operating system (or the write failed). */
  write(chunk: string, flushed?: (error?: Error | null) => void): boolean;
  /** Ends the response (the client may reconnect). */
  end(): unknown;
  /** Closes the connection at once (a client that did not go after `end`). */
  destroy(): unknown;
  /** Bytes accepted by `write` but not yet handed to the operating system. */
  readonly writableLength: number;
  /** Calls `listener` once the connection closed, from either side. */
  once(event: 'close', listener: () => void): unknown;
}

/** What one client receives: its own filter and projection over the hub's changes (and snapshot rows). */
export interface SseClientOptions<T, R = unknown> {
  /** Keep only the changes this returns true for. Default: every change. */
  readonly filter?: (change: Change<T>) => boolean;
  /**
   * What goes in each event's `data` field next to the change's id, operation, partition, LSN and timestamp.
   * Default: the hub's `project`; with neither, no document content is sent.
   */
  readonly project?: (change: Change<T>) => unknown;
  /** Snapshot mode: keep only the view rows this returns true for. Default: every row. */
  readonly filterRow?: (row: ViewRow<R>) => boolean;
  /** Snapshot mode: what a row's entry carries as `data`. Default: the hub's `projectRow`, else the row itself. */
  readonly projectRow?: (row: ViewRow<R>) => unknown;
}

/**
 * Why the server ended a client's stream:
 * - `'slow-client'`: it fell behind what the hub can still replay (it stopped reading, or reads slower than the
 *   feed) while its unsent bytes were at `maxBufferedBytes`;
 * - `'view-error'`: the view store failed while its snapshot was read (the browser reconnects and tries again);
 * - `'hub-closed'`: the server is shutting down.
 */
export type SseDropReason = 'slow-client' | 'view-error' | 'hub-closed';

/** @internal Settings a hub gives each client. */
export interface SseClientSettings<T, R> {
  readonly id: number;
  readonly maxBufferedBytes: number;
  readonly closeGraceMs: number;
  readonly scheduler: SchedulerLike;
  readonly onGone: (client: SseClient<T, R>) => void;
}

/**
 * One browser connection of a hub. The hub writes to it only while its unsent bytes stay under
 * `maxBufferedBytes` (one event may pass it when nothing is unsent); the rest waits in the hub's shared replay
 * buffer until what was written is flushed. A client the buffer leaves behind is dropped with a `dropped` event.
 *
 * In short: a client never holds more than `maxBufferedBytes` (or one event, if larger) plus a small farewell of
 * the server's memory, and never slows the hub or the other clients: writes are never awaited.
 */
export class SseClient<T, R = unknown> {
  /** Hub-local number of this connection (for logs and stats). */
  readonly id: number;
  /** The last event id written to this client (an event, or an id-only position message). */
  lastEventId = '';
  /** Why the server dropped it, once it did. */
  dropReason: SseDropReason | undefined;
  /** @internal `'snapshot'` while its snapshot is sent (changes wait in the replay buffer), then `'live'`. */
  state: 'snapshot' | 'live' = 'live';
  /** @internal Sequence number of the last buffered change this client was given (or passed over). */
  cursor = 0;
  /** @internal LSN marks this client already has beyond the hub's own (a snapshot's positions, a resume). */
  after: Map<string, number> | undefined;
  /** @internal Rows its snapshot sent at LSNs past the snapshot's positions: key → LSN and partition. */
  ahead: Map<string, { readonly lsn: number; readonly partition: string }> | undefined;
  readonly #res: SseResponse;
  readonly #settings: SseClientSettings<T, R>;
  readonly #options: SseClientOptions<T, R>;
  #open = true;
  #waiting = false;
  #inFlight = 0;
  #waiters: (() => void)[] = [];
  #grace: Subscription | undefined;

  /** @internal Created by {@link SseHub.connect}. */
  constructor(res: SseResponse, options: SseClientOptions<T, R>, settings: SseClientSettings<T, R>) {
    this.id = settings.id;
    this.#res = res;
    this.#options = options;
    this.#settings = settings;
    res.once('close', () => this.#gone());
  }

  /** True until the client disconnects or is dropped. */
  get open(): boolean {
    return this.#open;
  }

  /** Bytes written to this client that the operating system has not taken yet. */
  get bufferedBytes(): number {
    return this.#res.writableLength;
  }

  /** @internal The client's filters and projections. */
  get options(): SseClientOptions<T, R> {
    return this.#options;
  }

  /** @internal True while the hub waits for this connection to flush before writing more. */
  get waiting(): boolean {
    return this.#waiting;
  }

  /** @internal Whether `bytes` more may be written now: under the bound, or anything at all when nothing is unsent. */
  fits(bytes: number, alreadyQueued = 0): boolean {
    // Only bytes of writes still in flight count: a response that took everything may report a stale length.
    const unsent = (this.#inFlight === 0 ? 0 : this.#res.writableLength) + alreadyQueued;
    return unsent === 0 || unsent + bytes <= this.#settings.maxBufferedBytes;
  }

  /** @internal Writes framed text (the caller checked {@link SseClient.fits}). */
  write(text: string): void {
    if (!this.#open) return;
    this.#inFlight++;
    this.#res.write(text, () => {
      if (--this.#inFlight === 0) this.#wakeAll();
    });
  }

  /**
   * @internal Runs `then` once everything written so far has been handed to the operating system (or the client
   * is gone): at once when nothing is in flight.
   */
  whenFlushed(then: () => void): void {
    if (!this.#open || this.#inFlight === 0) return then();
    this.#waiting = true;
    this.#waiters.push(then);
  }

  /** @internal {@link SseClient.whenFlushed} as a promise. */
  flushed(): Promise<void> {
    return new Promise((resolve) => this.whenFlushed(resolve));
  }

  #wakeAll(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    this.#waiting = false;
    for (const then of waiters) then();
  }

  /**
   * Ends the stream with an `event: dropped` message (`data` = `{ reason, bufferedBytes, maxBufferedBytes }`),
   * then destroys the connection if it is not closed within the hub's `closeGraceMs`.
   */
  drop(reason: SseDropReason): void {
    if (!this.#open) return;
    const bufferedBytes = this.#res.writableLength;
    log('client %d dropped: %s (%d bytes unsent, bound %d)', this.id, reason, bufferedBytes, this.#settings.maxBufferedBytes);
    this.dropReason = reason;
    this.#open = false;
    this.#res.write(
      formatSseMessage({
        event: 'dropped',
        data: JSON.stringify({ reason, bufferedBytes, maxBufferedBytes: this.#settings.maxBufferedBytes }),
      }),
    );
    this.#res.end();
    // A client that stopped reading never lets `end` finish: free its buffer after a grace period.
    this.#grace = this.#settings.scheduler.schedule(() => this.#res.destroy(), this.#settings.closeGraceMs);
    this.#wakeAll();
    this.#settings.onGone(this);
  }

  #gone(): void {
    this.#grace?.unsubscribe();
    this.#wakeAll();
    if (!this.#open) return;
    this.#open = false;
    log('client %d disconnected', this.id);
    this.#settings.onGone(this);
  }
}
