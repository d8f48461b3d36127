import { interval, type SchedulerLike, type Subscription } from 'rxjs';
import { formatSseComment } from '../eventFormat.js';
import { SseClient, type SseClientOptions, type SseResponse } from '../SseClient.js';
import type { HubCounters } from './counters.js';
import type { Delivery } from './delivery.js';
import type { ResumeLog } from './resumeLog.js';

/** @internal What a hub's clients are made with, and what their heartbeats need. */
export interface ClientRegistryOptions<T, R> {
  readonly maxBufferedBytes: number;
  readonly closeGraceMs: number;
  readonly heartbeatMs: number;
  readonly scheduler: SchedulerLike;
  readonly counters: HubCounters;
  readonly changes: ResumeLog<T>;
  readonly delivery: Delivery<T, R>;
}

/**
 * @internal A hub's connected clients: numbers them, counts connections and drops, and sends heartbeats while any
 * client is connected.
 */
export class ClientRegistry<T, R> {
  readonly #clients = new Set<SseClient<T, R>>();
  #nextClient = 1;
  #heartbeat: Subscription | undefined;

  constructor(private readonly options: ClientRegistryOptions<T, R>) {}

  /** Clients connected now. */
  get size(): number {
    return this.#clients.size;
  }

  [Symbol.iterator](): IterableIterator<SseClient<T, R>> {
    return this.#clients.values();
  }

  /** A client on `res`, with its own filter and projection; it leaves the registry once its connection is gone. */
  add(res: SseResponse, own: SseClientOptions<T, R>): SseClient<T, R> {
    const client = new SseClient<T, R>(res, own, {
      id: this.#nextClient++,
      maxBufferedBytes: this.options.maxBufferedBytes,
      closeGraceMs: this.options.closeGraceMs,
      scheduler: this.options.scheduler,
      onGone: (gone) => this.#remove(gone),
    });
    this.options.counters.connected++;
    this.#clients.add(client);
    return client;
  }

  /** Starts the heartbeats, unless they run. */
  keepAlive(): void {
    if (!this.#heartbeat) this.#startHeartbeat();
  }

  /** Drops every client with reason `hub-closed` and stops the heartbeats. */
  closeAll(): void {
    for (const client of [...this.#clients]) client.drop('hub-closed');
    this.#stopHeartbeat();
  }

  #startHeartbeat(): void {
    const { changes, delivery } = this.options;
    this.#heartbeat = interval(this.options.heartbeatMs, this.options.scheduler).subscribe(() => {
      const beat = formatSseComment('heartbeat');
      for (const client of this.#clients) {
        if (client.waiting || !client.fits(beat.length + 1)) continue;
        // A client whose filter skipped the latest changes learns the position here, so it resumes from there.
        const current = client.state === 'live' && client.cursor === changes.head && client.lastEventId !== changes.eventId && !client.after && !client.ahead;
        client.write(beat + (current ? '' : '\n'));
        if (current) delivery.positionFrame(client);
      }
    });
  }

  #stopHeartbeat(): void {
    this.#heartbeat?.unsubscribe();
    this.#heartbeat = undefined;
  }

  #remove(client: SseClient<T, R>): void {
    if (!this.#clients.delete(client)) return;
    if (client.dropReason) this.options.counters.dropped[client.dropReason]++;
    if (this.#clients.size === 0) this.#stopHeartbeat();
  }
}
