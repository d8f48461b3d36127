import { randomBytes } from 'node:crypto';
import { asyncScheduler, interval, tap, type MonoTypeOperatorFunction, type SchedulerLike, type Subscription } from 'rxjs';
import { asBatches, type BatchOrBatches } from '../core/ChangeBatch.js';
import type { Change } from '../core/Change.js';
import { InvalidOptionsError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import { formatSseComment, formatSseMessage } from './eventFormat.js';
import { formatEventId, parseEventId } from './eventId.js';
import { ReplayBuffer, type SseEntry } from './ReplayBuffer.js';
import { SseClient, type SseClientOptions, type SseDropReason, type SseResponse } from './SseClient.js';

const log = logger('sse');

/** Settings of {@link createSseHub}. */
export interface SseHubOptions<T> {
  /** Changes kept for clients that reconnect (`Last-Event-ID`); an older gap gets a `reset` event. Default 1000. */
  readonly replayLimit?: number;
  /** Interval of heartbeat comment lines to every client, in ms, so proxies keep idle connections. Default 15 000. */
  readonly heartbeatMs?: number;
  /** Most unsent bytes per client before it is dropped with reason `slow-client`. Default 262 144 (256 KiB). */
  readonly maxBufferedBytes?: number;
  /** After a drop, ms to wait for the connection to close before destroying it. Default 5000. */
  readonly closeGraceMs?: number;
  /** `retry:` sent to each new client: ms a browser waits before reconnecting. Default 1000. */
  readonly retryMs?: number;
  /**
   * What each event's `data` carries besides the change's id, operation, partition, LSN and timestamp, unless a
   * client asks for its own. Default: nothing (documents are only sent when you ask).
   */
  readonly project?: (change: Change<T>) => unknown;
  /** Id of this hub's event stream, part of every event id. Default: random, new for each hub. */
  readonly streamId?: string;
  /** Clock and timers (heartbeats, drop grace). Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

/** Where a connecting client starts: the `Last-Event-ID` it sent back, if any. */
export interface SseConnectOptions<T> extends SseClientOptions<T> {
  /** The id of the last event the client saw (`Last-Event-ID` header); absent for a first connection. */
  readonly lastEventId?: string;
}

/**
 * Why a reconnecting client got a `reset` instead of what it missed:
 * - `'too-old'`: its last event is older than the replay buffer;
 * - `'unknown-stream'`: the id is not from this hub (the server restarted) or is not an event id;
 * - `'ahead'`: the id is past the newest event.
 */
export type SseResetReason = 'too-old' | 'unknown-stream' | 'ahead';

/** Counters of a hub. */
export interface SseHubStats {
  /** Clients connected now. */
  readonly clients: number;
  /** Connections accepted since the hub started. */
  readonly connected: number;
  /** Clients dropped, by reason. */
  readonly dropped: Readonly<Record<SseDropReason, number>>;
  /** Reconnections answered with a `reset`. */
  readonly resets: number;
  /** Reconnections served from the replay buffer. */
  readonly resumed: number;
  /** Sequence number of the newest change (0 before the first). */
  readonly head: number;
  /** Changes held for replay. */
  readonly replayable: number;
  /** Changes left out for one client because its filter or projection threw. */
  readonly clientErrors: number;
}

/**
 * One read of a change feed multicast to any number of Server-Sent Events clients, with resume.
 *
 * In short: put `hub.broadcast()` in the pipeline before `checkpointEvery`; it numbers each change, keeps the
 * last `replayLimit` for reconnecting clients, writes to every client without waiting, and passes each batch on
 * at once, so checkpoints never wait for browsers.
 *
 * @see {@link createSseHub}, {@link sseHandler}
 */
export interface SseHub<T> {
  /** This hub's stream id (the part before the dot in event ids). */
  readonly streamId: string;
  /** Event id of the newest change: a snapshot taken now is up to date with it. */
  readonly lastEventId: string;
  /** An operator that publishes each batch (or array of batches) and passes it on unchanged, at once. */
  broadcast<V extends BatchOrBatches<T>>(): MonoTypeOperatorFunction<V>;
  /** Publishes the changes of a batch, or of an array of batches, to every client. */
  publish(batches: BatchOrBatches<T>): void;
  /** Attaches a response whose headers are sent; replays what `lastEventId` missed, or sends a `reset`. */
  connect(res: SseResponse, options?: SseConnectOptions<T>): SseClient<T>;
  /** Counters. */
  stats(): SseHubStats;
  /** Drops every client with reason `hub-closed` and stops heartbeats; later `connect` calls are refused. */
  close(): void;
}

/** A change as it travels in an event's `data` (JSON). */
export interface SseChangeEvent<D = unknown> {
  /** Document id. */
  readonly id: string;
  readonly operation: Change<unknown>['operation'];
  readonly partition: string;
  readonly lsn: number;
  readonly timestampMs: number;
  /** The projection's output, when there is a projection. */
  readonly data?: D;
}

function integerOption(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidOptionsError(name, `must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

class Hub<T> implements SseHub<T> {
  readonly streamId: string;
  readonly #replay: ReplayBuffer<T>;
  readonly #clients = new Set<SseClient<T>>();
  readonly #heartbeatMs: number;
  readonly #maxBufferedBytes: number;
  readonly #closeGraceMs: number;
  readonly #retryMs: number;
  readonly #project: ((change: Change<T>) => unknown) | undefined;
  readonly #scheduler: SchedulerLike;
  /** Highest LSN published per partition: a change re-read after a restart or rebalance is not sent twice. */
  readonly #lsnByPartition = new Map<string, number>();
  #head = 0;
  #nextClient = 1;
  #heartbeat: Subscription | undefined;
  #closed = false;
  #connected = 0;
  #dropped: Record<SseDropReason, number> = { 'slow-client': 0, 'hub-closed': 0 };
  #resets = 0;
  #resumed = 0;
  #clientErrors = 0;

  constructor(options: SseHubOptions<T>) {
    this.#replay = new ReplayBuffer(integerOption('replayLimit', options.replayLimit, 1000, 0));
    this.#heartbeatMs = integerOption('heartbeatMs', options.heartbeatMs, 15_000, 1);
    this.#maxBufferedBytes = integerOption('maxBufferedBytes', options.maxBufferedBytes, 256 * 1024, 1);
    this.#closeGraceMs = integerOption('closeGraceMs', options.closeGraceMs, 5000, 0);
    this.#retryMs = integerOption('retryMs', options.retryMs, 1000, 0);
    if (options.project !== undefined && typeof options.project !== 'function') {
      throw new InvalidOptionsError('project', 'must be a function from a change to what its event carries');
    }
    this.#project = options.project;
    this.#scheduler = options.scheduler ?? asyncScheduler;
    const streamId = options.streamId ?? randomBytes(6).toString('base64url');
    if (!/^[A-Za-z0-9_-]+$/.test(streamId)) {
      throw new InvalidOptionsError('streamId', `must be letters, digits, '-' or '_', got ${JSON.stringify(streamId)}`);
    }
    this.streamId = streamId;
  }

  get lastEventId(): string {
    return formatEventId(this.streamId, this.#head);
  }

  broadcast<V extends BatchOrBatches<T>>(): MonoTypeOperatorFunction<V> {
    return tap((value: V) => this.publish(value));
  }

  publish(value: BatchOrBatches<T>): void {
    const entries: SseEntry<T>[] = [];
    for (const batch of asBatches(value)) {
      if (batch.isEmpty) continue;
      const seen = this.#lsnByPartition.get(batch.partition) ?? -1;
      let highest = seen;
      for (const change of batch.changes) {
        // Changes of one transaction share an LSN, so compare with what earlier batches published.
        if (change.lsn <= seen) continue;
        highest = Math.max(highest, change.lsn);
        const entry: SseEntry<T> = { seq: ++this.#head, partition: batch.partition, change };
        this.#replay.push(entry);
        entries.push(entry);
      }
      this.#lsnByPartition.set(batch.partition, highest);
    }
    if (entries.length === 0 || this.#clients.size === 0) return;
    // Frames depend only on the projection: build each once per publish, however many clients share it.
    const frames = new Map<((change: Change<T>) => unknown) | undefined, (string | null)[]>();
    for (const client of this.#clients) {
      const text = this.#framesFor(client, entries, frames);
      if (text) client.write(text);
    }
  }

  connect(res: SseResponse, options: SseConnectOptions<T> = {}): SseClient<T> {
    if (this.#closed) throw new Error('this SSE hub is closed; create a new hub to serve clients');
    const client: SseClient<T> = new SseClient<T>(
      res,
      { filter: options.filter, project: options.project },
      {
        id: this.#nextClient++,
        maxBufferedBytes: this.#maxBufferedBytes,
        closeGraceMs: this.#closeGraceMs,
        scheduler: this.#scheduler,
        onGone: (gone) => this.#remove(gone),
      },
    );
    this.#connected++;
    let text = formatSseMessage({ retry: this.#retryMs });
    const resume = this.#resume(options.lastEventId);
    if (resume.kind === 'replay') {
      this.#resumed++;
      text += this.#framesFor(client, resume.entries, new Map());
    } else if (resume.kind === 'reset') {
      this.#resets++;
      log('client %d reset (%s): Last-Event-ID %s, head %d', client.id, resume.reason, options.lastEventId, this.#head);
      const data = JSON.stringify({ reason: resume.reason, lastEventId: options.lastEventId, resumeFrom: this.lastEventId });
      text += formatSseMessage({ event: 'reset', id: this.lastEventId, data });
      client.lastSeq = this.#head;
    }
    // Tell a client with nothing to receive where it stands, so its first reconnect can resume.
    if (client.lastSeq !== this.#head) text += this.#positionFrame(client);
    this.#clients.add(client);
    client.write(text);
    if (!this.#heartbeat && client.open) this.#startHeartbeat();
    return client;
  }

  stats(): SseHubStats {
    return {
      clients: this.#clients.size,
      connected: this.#connected,
      dropped: { ...this.#dropped },
      resets: this.#resets,
      resumed: this.#resumed,
      head: this.#head,
      replayable: this.#replay.size,
      clientErrors: this.#clientErrors,
    };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const client of [...this.#clients]) client.drop('hub-closed');
    this.#stopHeartbeat();
  }

  #resume(lastEventId: string | undefined):
    | { kind: 'live' }
    | { kind: 'replay'; entries: readonly SseEntry<T>[] }
    | { kind: 'reset'; reason: SseResetReason } {
    if (lastEventId === undefined || lastEventId === '') return { kind: 'live' };
    const position = parseEventId(lastEventId);
    if (!position || position.stream !== this.streamId) return { kind: 'reset', reason: 'unknown-stream' };
    if (position.seq > this.#head) return { kind: 'reset', reason: 'ahead' };
    const entries = this.#replay.after(position.seq, this.#head);
    return entries === 'gap' ? { kind: 'reset', reason: 'too-old' } : { kind: 'replay', entries };
  }

  /** The frames of `entries` that pass the client's filter, in one string; `client.lastSeq` follows what it includes. */
  #framesFor(
    client: SseClient<T>,
    entries: readonly SseEntry<T>[],
    cache: Map<((change: Change<T>) => unknown) | undefined, (string | null)[]>,
  ): string {
    const { filter, project: own } = client.options;
    const project = own ?? this.#project;
    let frames = cache.get(project);
    if (!frames) cache.set(project, (frames = new Array<string | null>(entries.length)));
    let text = '';
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]!;
      try {
        if (filter && !filter(entry.change)) continue;
        let frame = frames[i];
        if (frame === undefined) frames[i] = frame = this.#frame(entry, project);
        text += frame;
        client.lastSeq = entry.seq;
      } catch (error) {
        this.#clientErrors++;
        log('client %d: change %s at seq %d left out: %s', client.id, entry.change.id, entry.seq, (error as Error).message);
      }
    }
    return text;
  }

  #frame(entry: SseEntry<T>, project: ((change: Change<T>) => unknown) | undefined): string {
    const { change } = entry;
    const event: SseChangeEvent = {
      id: change.id,
      operation: change.operation,
      partition: entry.partition,
      lsn: change.lsn,
      timestampMs: change.timestampMs,
      ...(project ? { data: project(change) } : {}),
    };
    return formatSseMessage({ id: formatEventId(this.streamId, entry.seq), data: JSON.stringify(event) });
  }

  /** An id-only message: moves the browser's last event id to the head without dispatching an event. */
  #positionFrame(client: SseClient<T>): string {
    client.lastSeq = this.#head;
    return formatSseMessage({ id: this.lastEventId });
  }

  #startHeartbeat(): void {
    this.#heartbeat = interval(this.#heartbeatMs, this.#scheduler).subscribe(() => {
      const beat = formatSseComment('heartbeat');
      for (const client of this.#clients) {
        // A client whose filter skipped the latest changes learns the head here, so it resumes from there.
        client.write(client.lastSeq === this.#head ? beat + '\n' : beat + this.#positionFrame(client));
      }
    });
  }

  #stopHeartbeat(): void {
    this.#heartbeat?.unsubscribe();
    this.#heartbeat = undefined;
  }

  #remove(client: SseClient<T>): void {
    if (!this.#clients.delete(client)) return;
    if (client.dropReason) this.#dropped[client.dropReason]++;
    if (this.#clients.size === 0) this.#stopHeartbeat();
  }
}

/**
 * Creates a hub: one read of a change feed shared by any number of Server-Sent Events clients, each with its
 * own filter and projection, resumable by `Last-Event-ID`.
 *
 * In short: events carry ids `<streamId>.<seq>`; a client reconnecting with one gets exactly the changes after
 * it (from a bounded replay buffer), or an `event: reset` when they are gone, so it reloads its snapshot.
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery } from 'rxfeed';
 * import { createSseHub, sseHandler } from 'rxfeed/sse';
 * const hub = createSseHub<Order>({ project: (c) => ({ status: c.document?.status }) });
 * changeFeed<Order>(options).pipe(hub.broadcast(), checkpointEvery(100)).subscribe();
 * http.createServer(sseHandler(hub)).listen(8080);
 * ```
 * @throws InvalidOptionsError for a negative or fractional number, a `project` that is not a function, or a bad `streamId`.
 */
export function createSseHub<T>(options: SseHubOptions<T> = {}): SseHub<T> {
  return new Hub<T>(options);
}
