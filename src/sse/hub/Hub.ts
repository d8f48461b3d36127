import { type MonoTypeOperatorFunction, tap } from 'rxjs';
import type { BatchOrBatches } from '../../core/ChangeBatch.js';
import { logger } from '../../internal/log.js';
import type { ViewStore } from '../../sinks/ViewStore.js';
import { formatSseMessage } from '../eventFormat.js';
import type { SseClient, SseResponse } from '../SseClient.js';
import { ClientRegistry } from './clients.js';
import { type HubCounters, newCounters } from './counters.js';
import { Delivery, type FrameCache } from './delivery.js';
import { resolveHubOptions } from './options.js';
import { ResumeLog } from './resumeLog.js';
import { Snapshots } from './snapshots.js';
import type { SseConnectOptions, SseHub, SseHubOptions, SseHubStats } from './types.js';

const log = logger('sse');

/**
 * @internal The {@link SseHub}: its changes and positions ({@link ResumeLog}), its clients ({@link ClientRegistry}),
 * the writing of changes to them ({@link Delivery}) and, given a view, snapshots ({@link Snapshots}). This class
 * wires them and decides where each client starts.
 */
export class Hub<T, R> implements SseHub<T, R> {
  readonly streamId: string;
  readonly #retryMs: number;
  readonly #view: ViewStore<R> | undefined;
  readonly #counters: HubCounters = newCounters();
  readonly #changes: ResumeLog<T>;
  readonly #delivery: Delivery<T, R>;
  readonly #clients: ClientRegistry<T, R>;
  readonly #snapshots: Snapshots<T, R> | undefined;
  readonly #startsLoaded: Promise<void>;
  #closed = false;

  constructor(options: SseHubOptions<T, R>) {
    const settings = resolveHubOptions(options);
    this.streamId = settings.streamId;
    this.#retryMs = settings.retryMs;
    this.#view = settings.view;
    this.#changes = new ResumeLog<T>(settings.streamId, settings.replayLimit);
    this.#delivery = new Delivery<T, R>(this.#changes, settings.project, this.#counters);
    this.#clients = new ClientRegistry<T, R>({ ...settings, counters: this.#counters, changes: this.#changes, delivery: this.#delivery });
    this.#snapshots = settings.view
      ? new Snapshots<T, R>({ ...settings, view: settings.view, changes: this.#changes, counters: this.#counters, pump: (client) => this.#delivery.pump(client) })
      : undefined;
    // Snapshot mode: clients start over from a view that holds a re-read the hub does not publish (see ResumeLog).
    this.#changes.holdRereads = settings.view !== undefined;
    this.#changes.onRewind = () => {
      for (const client of this.#clients) if (client.open && client.state === 'live') this.#restart(client);
    };
    this.#delivery.restart = (client) => this.#restart(client);
    this.#startsLoaded = settings.view ? this.#changes.loadStarts(settings.view) : Promise.resolve();
  }

  get lastEventId(): string {
    return this.#changes.eventId;
  }

  broadcast<V extends BatchOrBatches<T>>(): MonoTypeOperatorFunction<V> {
    return tap((value: V) => this.publish(value));
  }

  publish(value: BatchOrBatches<T>): void {
    const fresh = this.#changes.append(value);
    if (fresh.length === 0) return;
    const cache: FrameCache<T> = new Map();
    for (const client of this.#clients) this.#delivery.pump(client, fresh, cache);
  }

  connect(res: SseResponse, options: SseConnectOptions<T, R> = {}): SseClient<T, R> {
    if (this.#closed) throw new Error('this SSE hub is closed; create a new hub to serve clients');
    const { lastEventId, ...own } = options;
    const client = this.#clients.add(res, own);
    client.write(formatSseMessage({ retry: this.#retryMs }));
    this.#clients.keepAlive();
    if (this.#view) {
      // Changes published from now on wait in the buffer until the client's start is known.
      client.state = 'snapshot';
      client.cursor = this.#changes.head;
      void this.#startsLoaded.then(() => this.#start(client, lastEventId));
    } else {
      this.#start(client, lastEventId);
    }
    return client;
  }

  stats(): SseHubStats {
    const counters = this.#counters;
    return {
      clients: this.#clients.size,
      connected: counters.connected,
      dropped: { ...counters.dropped },
      resets: counters.resets,
      resumed: counters.resumed,
      snapshots: counters.snapshots,
      head: this.#changes.head,
      replayable: this.#changes.replayable,
      clientErrors: counters.clientErrors,
    };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#clients.closeAll();
  }

  /**
   * Starts a client over, with a snapshot or a `reset` at the hub's position, rather than send it what it may hold:
   * a reading went back below what it may have been sent (an admin reset or rewind re-reading a range read before
   * in parts at different positions), and neither the hub's buffer nor the client's marks tell.
   */
  #restart(client: SseClient<T, R>): void {
    const changes = this.#changes;
    client.after = undefined;
    client.ahead = undefined;
    client.cursor = changes.head;
    if (this.#snapshots) {
      void this.#snapshots.send(client, 'too-old');
      return;
    }
    this.#counters.resets++;
    log('client %d reset: a reading went back, now %s', client.id, changes.eventId);
    const data = JSON.stringify({ reason: 'too-old', lastEventId: client.lastEventId, resumeFrom: changes.eventId });
    client.write(formatSseMessage({ event: 'reset', id: changes.eventId, data }));
    client.lastEventId = changes.eventId;
  }

  /** Starts a client where it stands: resumed from the buffer, snapshot, reset, or at the head. */
  #start(client: SseClient<T, R>, lastEventId: string | undefined): void {
    if (!client.open) return;
    const changes = this.#changes;
    const resume = changes.resume(lastEventId);
    if (resume.kind === 'replay') {
      this.#counters.resumed++;
      client.after = resume.after;
      client.cursor = (changes.oldestSeq ?? changes.head + 1) - 1;
      client.state = 'live';
      this.#delivery.pump(client);
    } else if (this.#snapshots) {
      void this.#snapshots.send(client, resume.kind === 'reset' ? resume.reason : undefined);
    } else if (resume.kind === 'reset') {
      this.#counters.resets++;
      log('client %d reset (%s): Last-Event-ID %s, now %s', client.id, resume.reason, lastEventId, changes.eventId);
      const data = JSON.stringify({ reason: resume.reason, lastEventId, resumeFrom: changes.eventId });
      client.write(formatSseMessage({ event: 'reset', id: changes.eventId, data }));
      client.lastEventId = changes.eventId;
      client.cursor = changes.head;
    } else {
      // Tell a client with nothing to receive yet where it stands, so its first reconnect can resume.
      client.cursor = changes.head;
      this.#delivery.positionFrame(client);
    }
  }
}
