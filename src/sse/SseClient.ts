import type { SchedulerLike, Subscription } from 'rxjs';
import type { Change } from '../core/Change.js';
import { logger } from '../internal/log.js';
import { formatSseMessage } from './eventFormat.js';

const log = logger('sse');

/**
 * The part of a `node:http` `ServerResponse` (or any `Writable`) a client connection uses. Express, Koa
 * (`ctx.res`) and Fastify (`reply.raw`) all hand you one.
 */
export interface SseResponse {
  write(chunk: string): boolean;
  end(): unknown;
  destroy(): unknown;
  /** Bytes accepted by `write` but not yet handed to the operating system. */
  readonly writableLength: number;
  once(event: 'close', listener: () => void): unknown;
}

/** What one client receives: its own filter and projection over the hub's changes. */
export interface SseClientOptions<T> {
  /** Keep only the changes this returns true for. Default: every change. */
  readonly filter?: (change: Change<T>) => boolean;
  /**
   * What goes in each event's `data` field next to the change's id, operation, partition, LSN and timestamp.
   * Default: the hub's `project`; with neither, no document content is sent.
   */
  readonly project?: (change: Change<T>) => unknown;
}

/**
 * Why the server ended a client's stream:
 * - `'slow-client'`: its unsent bytes would have passed `maxBufferedBytes` (it stopped reading, or reads slower than the feed);
 * - `'hub-closed'`: the server is shutting down.
 */
export type SseDropReason = 'slow-client' | 'hub-closed';

/** @internal Settings a hub gives each client. */
export interface SseClientSettings<T> {
  readonly id: number;
  readonly maxBufferedBytes: number;
  readonly closeGraceMs: number;
  readonly scheduler: SchedulerLike;
  readonly onGone: (client: SseClient<T>) => void;
}

/**
 * One browser connection of a hub: writes framed events to its response, keeps its unsent bytes under a bound
 * and, past it, ends the stream with a `dropped` event instead of buffering more.
 *
 * In short: a client never holds more than `maxBufferedBytes` (plus one small farewell event) of the server's
 * memory, and never slows the hub or the other clients: writes are never awaited.
 */
export class SseClient<T> {
  /** Hub-local number of this connection (for logs and stats). */
  readonly id: number;
  /** Sequence number of the last event id written to this client (an event, or an id-only position message). */
  lastSeq = 0;
  /** Why the server dropped it, once it did. */
  dropReason: SseDropReason | undefined;
  readonly #res: SseResponse;
  readonly #settings: SseClientSettings<T>;
  readonly #options: SseClientOptions<T>;
  #open = true;
  #grace: Subscription | undefined;

  /** @internal Created by {@link SseHub.connect}. */
  constructor(res: SseResponse, options: SseClientOptions<T>, settings: SseClientSettings<T>) {
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

  /** @internal The client's filter and projection. */
  get options(): SseClientOptions<T> {
    return this.#options;
  }

  /**
   * @internal Writes framed text unless that would pass the bound, in which case the client is dropped.
   * Returns whether it was written.
   */
  write(text: string): boolean {
    if (!this.#open) return false;
    const buffered = this.#res.writableLength;
    if (buffered > 0 && buffered + Buffer.byteLength(text) > this.#settings.maxBufferedBytes) {
      this.drop('slow-client');
      return false;
    }
    this.#res.write(text);
    return true;
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
    this.#settings.onGone(this);
  }

  #gone(): void {
    this.#grace?.unsubscribe();
    if (!this.#open) return;
    this.#open = false;
    log('client %d disconnected', this.id);
    this.#settings.onGone(this);
  }
}
