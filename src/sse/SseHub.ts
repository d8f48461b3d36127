import { randomBytes } from 'node:crypto';
import { asyncScheduler, interval, tap, type MonoTypeOperatorFunction, type SchedulerLike, type Subscription } from 'rxjs';
import { asBatches, type BatchOrBatches } from '../core/ChangeBatch.js';
import type { Change } from '../core/Change.js';
import type { FeedRange } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import type { ViewRow, ViewStore } from '../sinks/ViewStore.js';
import { formatSseComment, formatSseMessage } from './eventFormat.js';
import { formatEventId, parseEventId } from './eventId.js';
import { markOf } from './lineage.js';
import { ReplayBuffer, type SseEntry } from './ReplayBuffer.js';
import { SseClient, type SseClientOptions, type SseDropReason, type SseResponse } from './SseClient.js';

const log = logger('sse');

/** Settings of {@link createSseHub}. */
export interface SseHubOptions<T, R = unknown> {
  /**
   * Changes kept for clients that reconnect (`Last-Event-ID`), that read slower than the feed for a while, or
   * whose snapshot is being sent; a client left further behind is dropped (`slow-client`), and a reconnect older
   * than the buffer gets a fresh snapshot (snapshot mode) or a `reset` event. Default 1000.
   */
  readonly replayLimit?: number;
  /** Interval of heartbeat comment lines to every client, in ms, so proxies keep idle connections. Default 15 000. */
  readonly heartbeatMs?: number;
  /**
   * Most unsent bytes per client: past it the hub stops writing to that client until what it was sent is flushed
   * (one event larger than the bound is still written when nothing else is unsent). Default 262 144 (256 KiB).
   */
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
  /** Id of this hub's event stream, the part of every event id before the dot. Default: random, new for each hub. */
  readonly streamId?: string;
  /** Clock and timers (heartbeats, drop grace). Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /**
   * Snapshot mode: the view the pipeline materializes before `hub.broadcast()`. A client that connects with no
   * position (or one the hub can no longer serve) gets the view's rows, an `up-to-date` event carrying the
   * positions they reflect, then only the changes after those positions. Default: none (changes only).
   */
  readonly view?: ViewStore<R>;
  /** Snapshot mode: what a row's entry carries as `data`, unless a client asks for its own. Default: the row. */
  readonly projectRow?: (row: ViewRow<R>) => unknown;
  /** Snapshot mode: rows per `snapshot` event. Default 500. */
  readonly snapshotChunkRows?: number;
}

/** Where a connecting client starts: the `Last-Event-ID` it sent back, if any. */
export interface SseConnectOptions<T, R = unknown> extends SseClientOptions<T, R> {
  /** The id of the last event the client saw (`Last-Event-ID` header); absent for a first connection. */
  readonly lastEventId?: string;
}

/**
 * Why a reconnecting client got a fresh snapshot (snapshot mode) or a `reset` instead of what it missed:
 * - `'too-old'`: some of what it missed is no longer in the replay buffer (or was read before this hub started);
 * - `'unknown-stream'`: the id is not an event id, or names a partition (or, from another hub, a position) this
 *   hub cannot vouch for.
 */
export type SseResetReason = 'too-old' | 'unknown-stream';

/** Counters of a hub. */
export interface SseHubStats {
  /** Clients connected now. */
  readonly clients: number;
  /** Connections accepted since the hub started. */
  readonly connected: number;
  /** Clients dropped, by reason. */
  readonly dropped: Readonly<Record<SseDropReason, number>>;
  /** Reconnections answered with a `reset` (changes-only mode). */
  readonly resets: number;
  /** Reconnections served from the replay buffer. */
  readonly resumed: number;
  /** Snapshots sent (first connections and reconnections the buffer could not serve). */
  readonly snapshots: number;
  /** Changes published since the hub started. */
  readonly head: number;
  /** Changes held for replay. */
  readonly replayable: number;
  /** Changes (or rows) left out for one client because its filter or projection threw. */
  readonly clientErrors: number;
}

/**
 * One read of a change feed multicast to any number of Server-Sent Events clients, with resume and, given a
 * view, snapshot-then-live.
 *
 * In short: put `hub.broadcast()` in the pipeline before `checkpointEvery` (and after `materializeToView` in
 * snapshot mode); it keeps the last `replayLimit` changes, writes to every client without waiting and passes
 * each batch on at once, so checkpoints never wait for browsers.
 *
 * @see {@link createSseHub}, {@link sseHandler}
 */
export interface SseHub<T, R = unknown> {
  /** This hub's stream id (the part before the dot in event ids). */
  readonly streamId: string;
  /** Event id of the newest change: the positions (LSN per lease token) of everything published. */
  readonly lastEventId: string;
  /** An operator that publishes each batch (or array of batches) and passes it on unchanged, at once. */
  broadcast<V extends BatchOrBatches<T>>(): MonoTypeOperatorFunction<V>;
  /** Publishes the changes of a batch, or of an array of batches, to every client. */
  publish(batches: BatchOrBatches<T>): void;
  /**
   * Attaches a response whose headers are sent: replays what `lastEventId` missed, or (snapshot mode) sends a
   * snapshot, or (changes only) a `reset`.
   */
  connect(res: SseResponse, options?: SseConnectOptions<T, R>): SseClient<T, R>;
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

/** A view row as it travels in a `snapshot` event's `data` (a JSON array of these). */
export interface SseSnapshotRow<D = unknown> {
  /** Row key (the document id, when the view is keyed by it). */
  readonly id: string;
  readonly partition: string;
  readonly lsn: number;
  readonly timestampMs: number;
  readonly data: D;
}

type Projection<X> = ((value: X) => unknown) | undefined;

function integerOption(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidOptionsError(name, `must be an integer >= ${min}, got ${String(value)}`);
  }
  return value;
}

function functionOption(name: string, value: unknown, what: string): void {
  if (value !== undefined && typeof value !== 'function') throw new InvalidOptionsError(name, `must be a function ${what}`);
}

/** Per-publish cache: frames of the new entries by projection, built once however many clients share one. */
type FrameCache<T> = Map<Projection<Change<T>>, (string | null | undefined)[]>;

/**
 * What a snapshot reads, shared by the clients of one read: the view's positions first (`after`: LSN per token),
 * then its rows (so they reflect at least those positions); the rows already past them (`ahead`); and the frames
 * of the chunks, built once for the clients that share the hub's row projection.
 */
interface SnapshotRead<R> {
  readonly rows: readonly ViewRow<R>[];
  readonly after: ReadonlyMap<string, number>;
  readonly ahead: ReadonlyMap<string, { readonly lsn: number; readonly partition: string }>;
  readonly frames: string[];
}

class Hub<T, R> implements SseHub<T, R> {
  readonly streamId: string;
  readonly #replay: ReplayBuffer<T>;
  readonly #clients = new Set<SseClient<T, R>>();
  readonly #heartbeatMs: number;
  readonly #maxBufferedBytes: number;
  readonly #closeGraceMs: number;
  readonly #retryMs: number;
  readonly #chunkRows: number;
  readonly #project: Projection<Change<T>>;
  readonly #projectRow: (row: ViewRow<R>) => unknown;
  readonly #scheduler: SchedulerLike;
  readonly #view: ViewStore<R> | undefined;
  /** Highest LSN published per lease token: the hub's position, and what a re-read (along lineage) is checked against. */
  readonly #marks = new Map<string, number>();
  /** Key range per lease token, from batches and view positions: what lineage is worked out from. */
  readonly #ranges = new Map<string, FeedRange>();
  /** Highest LSN per token pushed out of the replay buffer: a client must have reached it to be replayed to. */
  readonly #evicted = new Map<string, number>();
  /**
   * What a client of another hub (a previous server process) must have reached per token to be replayed to: the
   * view's positions when this hub started (snapshot mode), or the first change this hub published for a partition
   * whose lineage it does not know.
   */
  readonly #starts = new Map<string, number>();
  readonly #startsLoaded: Promise<void>;
  /**
   * The changes in the buffer by document id and LSN → seq: a re-read that lineage cannot rule out (a batch without
   * a key range; a merged range, whose mark is its least advanced parent's) is not sent twice while it is held.
   */
  readonly #held = new Map<string, number>();
  #eventId: string;
  #head = 0;
  #nextClient = 1;
  #heartbeat: Subscription | undefined;
  #closed = false;
  #wave: Promise<SnapshotRead<R>> | undefined;
  #connected = 0;
  #dropped: Record<SseDropReason, number> = { 'slow-client': 0, 'view-error': 0, 'hub-closed': 0 };
  #resets = 0;
  #resumed = 0;
  #snapshots = 0;
  #clientErrors = 0;

  constructor(options: SseHubOptions<T, R>) {
    this.#replay = new ReplayBuffer<T>(integerOption('replayLimit', options.replayLimit, 1000, 0), (entry) => this.#evict(entry));
    this.#heartbeatMs = integerOption('heartbeatMs', options.heartbeatMs, 15_000, 1);
    this.#maxBufferedBytes = integerOption('maxBufferedBytes', options.maxBufferedBytes, 256 * 1024, 1);
    this.#closeGraceMs = integerOption('closeGraceMs', options.closeGraceMs, 5000, 0);
    this.#retryMs = integerOption('retryMs', options.retryMs, 1000, 0);
    this.#chunkRows = integerOption('snapshotChunkRows', options.snapshotChunkRows, 500, 1);
    functionOption('project', options.project, 'from a change to what its event carries');
    functionOption('projectRow', options.projectRow, 'from a view row to what its snapshot entry carries');
    if (options.view !== undefined && (typeof options.view.rows !== 'function' || typeof options.view.positions !== 'function')) {
      throw new InvalidOptionsError('view', 'must be a ViewStore (with rows() and positions())');
    }
    this.#project = options.project;
    this.#projectRow = options.projectRow ?? ((row) => row.row);
    this.#scheduler = options.scheduler ?? asyncScheduler;
    this.#view = options.view;
    const streamId = options.streamId ?? randomBytes(6).toString('base64url');
    if (!/^[A-Za-z0-9_-]+$/.test(streamId)) {
      throw new InvalidOptionsError('streamId', `must be letters, digits, '-' or '_', got ${JSON.stringify(streamId)}`);
    }
    this.streamId = streamId;
    this.#eventId = formatEventId(streamId, this.#marks);
    this.#startsLoaded = this.#view ? this.#loadStarts(this.#view) : Promise.resolve();
  }

  get lastEventId(): string {
    return this.#eventId;
  }

  broadcast<V extends BatchOrBatches<T>>(): MonoTypeOperatorFunction<V> {
    return tap((value: V) => this.publish(value));
  }

  publish(value: BatchOrBatches<T>): void {
    const fresh: SseEntry<T>[] = [];
    for (const batch of asBatches(value)) {
      const token = batch.partition;
      if (batch.range) this.#ranges.set(token, batch.range);
      if (batch.isEmpty) continue;
      // Along lineage: a split child's first batch is checked against its parent's mark.
      const seen = markOf(token, this.#marks, this.#ranges);
      const floor = seen ?? -1;
      for (const change of batch.changes) {
        // Changes of one transaction share an LSN, so compare with what earlier batches published.
        if (change.lsn <= floor) continue;
        const identity = `${change.id}\u0000${change.lsn}`;
        if (this.#held.has(identity)) continue;
        if (seen === undefined && !this.#starts.has(token) && markOf(token, this.#starts, this.#ranges) === undefined) {
          this.#starts.set(token, change.lsn);
        }
        this.#marks.set(token, Math.max(this.#marks.get(token) ?? -1, change.lsn));
        this.#eventId = formatEventId(this.streamId, this.#marks);
        const entry: SseEntry<T> = { seq: ++this.#head, partition: token, change, eventId: this.#eventId };
        this.#held.set(identity, entry.seq);
        this.#replay.push(entry);
        fresh.push(entry);
      }
      // A child that re-read only what its parent published still takes the parent's mark as its own.
      if (seen !== undefined && !this.#marks.has(token)) this.#marks.set(token, seen);
    }
    if (fresh.length === 0) return;
    const cache: FrameCache<T> = new Map();
    for (const client of this.#clients) this.#pump(client, fresh, cache);
  }

  connect(res: SseResponse, options: SseConnectOptions<T, R> = {}): SseClient<T, R> {
    if (this.#closed) throw new Error('this SSE hub is closed; create a new hub to serve clients');
    const { lastEventId, ...own } = options;
    const client = new SseClient<T, R>(res, own, {
      id: this.#nextClient++,
      maxBufferedBytes: this.#maxBufferedBytes,
      closeGraceMs: this.#closeGraceMs,
      scheduler: this.#scheduler,
      onGone: (gone) => this.#remove(gone),
    });
    this.#connected++;
    this.#clients.add(client);
    client.write(formatSseMessage({ retry: this.#retryMs }));
    if (!this.#heartbeat) this.#startHeartbeat();
    if (this.#view) {
      // Changes published from now on wait in the buffer until the client's start is known.
      client.state = 'snapshot';
      client.cursor = this.#head;
      void this.#startsLoaded.then(() => this.#start(client, lastEventId));
    } else {
      this.#start(client, lastEventId);
    }
    return client;
  }

  stats(): SseHubStats {
    return {
      clients: this.#clients.size,
      connected: this.#connected,
      dropped: { ...this.#dropped },
      resets: this.#resets,
      resumed: this.#resumed,
      snapshots: this.#snapshots,
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

  /** Starts a client where it stands: resumed from the buffer, snapshot, reset, or at the head. */
  #start(client: SseClient<T, R>, lastEventId: string | undefined): void {
    if (!client.open) return;
    const resume = this.#resume(lastEventId);
    if (resume.kind === 'replay') {
      this.#resumed++;
      client.after = resume.after;
      client.cursor = (this.#replay.oldestSeq ?? this.#head + 1) - 1;
      client.state = 'live';
      this.#pump(client);
    } else if (this.#view) {
      void this.#snapshot(client, this.#view, resume.kind === 'reset' ? resume.reason : undefined);
    } else if (resume.kind === 'reset') {
      this.#resets++;
      log('client %d reset (%s): Last-Event-ID %s, now %s', client.id, resume.reason, lastEventId, this.#eventId);
      const data = JSON.stringify({ reason: resume.reason, lastEventId, resumeFrom: this.#eventId });
      client.write(formatSseMessage({ event: 'reset', id: this.#eventId, data }));
      client.lastEventId = this.#eventId;
      client.cursor = this.#head;
    } else {
      // Tell a client with nothing to receive yet where it stands, so its first reconnect can resume.
      client.cursor = this.#head;
      this.#positionFrame(client);
    }
  }

  /** Whether the buffer holds everything after `lastEventId`, and the marks to skip what the client has. */
  #resume(lastEventId: string | undefined):
    | { kind: 'live' }
    | { kind: 'replay'; after: Map<string, number> }
    | { kind: 'reset'; reason: SseResetReason } {
    if (lastEventId === undefined || lastEventId === '') return { kind: 'live' };
    const position = parseEventId(lastEventId);
    if (!position) return { kind: 'reset', reason: 'unknown-stream' };
    const have = position.positions;
    const ours = position.stream === this.streamId;
    // Ids may run ahead of what this hub published (a snapshot's positions, a previous process's changes that come
    // again): the client's marks skip those. But the hub must know where each partition's replay starts.
    for (const token of have.keys()) {
      if (markOf(token, this.#marks, this.#ranges) === undefined && markOf(token, this.#starts, this.#ranges) === undefined) {
        return { kind: 'reset', reason: 'unknown-stream' };
      }
    }
    const tokens = new Set([...this.#evicted.keys(), ...(ours ? [] : this.#starts.keys())]);
    for (const token of tokens) {
      const need = Math.max(this.#evicted.get(token) ?? -1, ours ? -1 : (this.#starts.get(token) ?? -1));
      const reached = markOf(token, have, this.#ranges);
      if (reached === undefined || reached < need) return { kind: 'reset', reason: 'too-old' };
    }
    return { kind: 'replay', after: new Map(have) };
  }

  /**
   * Writes to a live client what it has not had yet, from its cursor, while it stays under the bound; when it is
   * full, the rest waits in the buffer until what was written is flushed. Drops a client the buffer left behind.
   */
  #pump(client: SseClient<T, R>, fresh?: readonly SseEntry<T>[], cache?: FrameCache<T>): void {
    if (!client.open) return;
    const firstFresh = fresh?.[0]?.seq ?? Infinity;
    const lastFresh = firstFresh + (fresh?.length ?? 0) - 1;
    const entryAt = (seq: number) => (seq >= firstFresh && seq <= lastFresh ? fresh![seq - firstFresh] : this.#replay.get(seq));
    if (client.cursor < this.#head && entryAt(client.cursor + 1) === undefined) {
      client.drop('slow-client');
      return;
    }
    if (client.state !== 'live' || client.waiting) return;
    let text = '';
    let bytes = 0;
    while (client.cursor < this.#head) {
      const seq = client.cursor + 1;
      const entry = entryAt(seq);
      if (!entry) break; // left behind while it waited: dropped below
      const inFresh = seq >= firstFresh && seq <= lastFresh;
      const frame = this.#frame(client, entry, inFresh ? cache : undefined, seq - firstFresh);
      if (frame !== null) {
        const size = Buffer.byteLength(frame);
        if (!client.fits(size, bytes)) break;
        text += frame;
        bytes += size;
      }
      client.cursor = seq;
    }
    if (text) client.write(text);
    if (client.cursor < this.#head) {
      client.whenFlushed(() => this.#pump(client, fresh, cache));
    } else if (client.after || client.ahead) {
      this.#forget(client);
    }
  }

  /** The frame of `entry` for `client`, or `null` when it has it already or its filter leaves it out. */
  #frame(client: SseClient<T, R>, entry: SseEntry<T>, cache: FrameCache<T> | undefined, index: number): string | null {
    const { change } = entry;
    if (client.after && change.lsn <= (markOf(entry.partition, client.after, this.#ranges) ?? -1)) return null;
    const ahead = client.ahead?.get(change.id);
    if (ahead && change.lsn <= ahead.lsn) return null;
    const { filter, project: own } = client.options;
    const project = own ?? this.#project;
    try {
      if (filter && !filter(change)) return null;
      // Until the stream has passed the rows its snapshot read ahead of the positions, no id can say what the
      // client holds: events go without one, so a reconnect gets a fresh snapshot, not those changes again.
      if (client.ahead) return this.#changeFrame(entry, project, undefined);
      const id = client.after ? formatEventId(this.streamId, this.#merged(entry.eventId, client.after)) : entry.eventId;
      client.lastEventId = id;
      if (!cache || client.after) return this.#changeFrame(entry, project, id);
      let frames = cache.get(project);
      if (!frames) cache.set(project, (frames = []));
      return (frames[index] ??= this.#changeFrame(entry, project, id));
    } catch (error) {
      this.#clientErrors++;
      log('client %d: change %s (LSN %d) left out: %s', client.id, change.id, change.lsn, (error as Error).message);
      return null;
    }
  }

  #changeFrame(entry: SseEntry<T>, project: Projection<Change<T>>, id: string | undefined): string {
    const { change } = entry;
    const event: SseChangeEvent = {
      id: change.id,
      operation: change.operation,
      partition: entry.partition,
      lsn: change.lsn,
      timestampMs: change.timestampMs,
      ...(project ? { data: project(change) } : {}),
    };
    return formatSseMessage({ ...(id === undefined ? {} : { id }), data: JSON.stringify(event) });
  }

  /** The hub's positions in `eventId` with a client's own marks where they are further. */
  #merged(eventId: string, after: ReadonlyMap<string, number>): Map<string, number> {
    const positions = new Map(parseEventId(eventId)?.positions);
    for (const [token, lsn] of after) if (lsn > (positions.get(token) ?? -1)) positions.set(token, lsn);
    return positions;
  }

  /** Once the hub has published past a client's own marks (and rows), the client needs them no more. */
  #forget(client: SseClient<T, R>): void {
    for (const [token, lsn] of client.after ?? []) {
      if ((markOf(token, this.#marks, this.#ranges) ?? -1) >= lsn) client.after!.delete(token);
    }
    if (client.after?.size === 0) client.after = undefined;
    for (const [key, row] of client.ahead ?? []) {
      if ((markOf(row.partition, this.#marks, this.#ranges) ?? -1) >= row.lsn) client.ahead!.delete(key);
    }
    if (client.ahead?.size === 0) client.ahead = undefined;
  }

  /**
   * Sends the view to a client: `snapshot-begin` (which also clears the browser's last event id, so a cut during
   * the snapshot starts over), the rows in chunks paced by the connection, then `up-to-date` with the positions
   * they reflect; meanwhile changes wait in the buffer, and afterwards the client gets those after the positions.
   */
  async #snapshot(client: SseClient<T, R>, view: ViewStore<R>, reason: SseResetReason | undefined): Promise<void> {
    this.#snapshots++;
    log('client %d: snapshot of %s%s', client.id, view.description, reason ? ` (${reason})` : '');
    client.state = 'snapshot';
    client.write(formatSseMessage({ event: 'snapshot-begin', id: '', data: JSON.stringify(reason ? { reason } : {}) }));
    let read: SnapshotRead<R>;
    try {
      read = await this.#read(view);
    } catch (error) {
      log('client %d: the snapshot read of %s failed: %s', client.id, view.description, (error as Error).message);
      client.drop('view-error');
      return;
    }
    const { filterRow, projectRow } = client.options;
    // A client with the hub's row projection and no row filter gets the frames every such client of the read gets.
    const shared = !filterRow && !projectRow;
    const project = projectRow ?? this.#projectRow;
    for (let chunk = 0; chunk * this.#chunkRows < read.rows.length; chunk++) {
      let frame = shared ? read.frames[chunk] : undefined;
      if (frame === undefined) {
        const items: SseSnapshotRow[] = [];
        for (const row of read.rows.slice(chunk * this.#chunkRows, (chunk + 1) * this.#chunkRows)) {
          try {
            if (filterRow && !filterRow(row)) continue;
            items.push({ id: row.key, partition: row.partition, lsn: row.lsn, timestampMs: row.timestampMs, data: project(row) });
          } catch (error) {
            this.#clientErrors++;
            log('client %d: row %s left out of the snapshot: %s', client.id, row.key, (error as Error).message);
          }
        }
        frame = items.length === 0 ? '' : formatSseMessage({ event: 'snapshot', data: JSON.stringify(items) });
        if (shared) read.frames[chunk] = frame;
      }
      if (frame === '') continue;
      const size = Buffer.byteLength(frame);
      while (client.open && !client.fits(size)) await client.flushed();
      // Changes published meanwhile must still be in the buffer when the snapshot is done.
      if (client.open && client.cursor + 1 <= this.#head && this.#replay.get(client.cursor + 1) === undefined) client.drop('slow-client');
      if (!client.open) return;
      client.write(frame);
    }
    const { after } = read;
    const id = formatEventId(this.streamId, after);
    const positions = Object.fromEntries(after);
    // Rows past the positions are in no id: until the stream has passed them, the client's id stays the empty one
    // `snapshot-begin` gave it (a reconnect gets a fresh snapshot rather than those changes again).
    const resumable = read.ahead.size === 0;
    client.write(formatSseMessage({ event: 'up-to-date', ...(resumable ? { id } : {}), data: JSON.stringify({ positions, rows: read.rows.length }) }));
    client.lastEventId = resumable ? id : '';
    client.after = new Map(after);
    client.ahead = read.ahead.size > 0 ? new Map(read.ahead) : undefined;
    client.state = 'live';
    this.#pump(client);
  }

  /**
   * The view's positions, then its rows, read once for every client that asks in the same turn of the event loop
   * (a burst of page loads shares one read instead of holding a copy of the view each).
   */
  #read(view: ViewStore<R>): Promise<SnapshotRead<R>> {
    if (this.#wave) return this.#wave;
    const wave: Promise<SnapshotRead<R>> = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      // Later clients start a new read: their changes since connecting may be newer than these positions.
      if (this.#wave === wave) this.#wave = undefined;
      const positions = await view.positions();
      const rows = await view.rows();
      const after = new Map<string, number>();
      for (const [token, state] of positions) {
        if (state.range) this.#ranges.set(token, state.range);
        if (state.lsn !== undefined) after.set(token, state.lsn);
      }
      // Rows already past the positions (written between the two reads): their changes, held meanwhile, are not sent.
      const ahead = new Map<string, { lsn: number; partition: string }>();
      for (const row of rows) {
        if (row.lsn > (markOf(row.partition, after, this.#ranges) ?? -1)) ahead.set(row.key, { lsn: row.lsn, partition: row.partition });
      }
      return { rows, after, ahead, frames: [] };
    });
    this.#wave = wave;
    return wave;
  }

  /** Snapshot mode: a previous process's clients are served from the buffer only from the view's positions on. */
  async #loadStarts(view: ViewStore<R>): Promise<void> {
    try {
      for (const [token, state] of await view.positions()) {
        if (state.range) this.#ranges.set(token, state.range);
        if (state.lsn !== undefined) this.#starts.set(token, Math.max(state.lsn, this.#starts.get(token) ?? -1));
      }
    } catch (error) {
      // Without them a previous process's client cannot be vouched for: it gets a snapshot.
      log('could not read the positions of %s: %s', view.description, (error as Error).message);
      this.#starts.set('\u0000unknown', Number.MAX_SAFE_INTEGER);
    }
  }

  #evict(entry: SseEntry<T>): void {
    const { partition, change, seq } = entry;
    if (change.lsn > (this.#evicted.get(partition) ?? -1)) this.#evicted.set(partition, change.lsn);
    const identity = `${change.id}\u0000${change.lsn}`;
    if (this.#held.get(identity) === seq) this.#held.delete(identity);
  }

  /** An id-only message: moves the browser's last event id to the hub's position without dispatching an event. */
  #positionFrame(client: SseClient<T, R>): string {
    const id = client.after ? formatEventId(this.streamId, this.#merged(this.#eventId, client.after)) : this.#eventId;
    client.lastEventId = id;
    const frame = formatSseMessage({ id });
    client.write(frame);
    return frame;
  }

  #startHeartbeat(): void {
    this.#heartbeat = interval(this.#heartbeatMs, this.#scheduler).subscribe(() => {
      const beat = formatSseComment('heartbeat');
      for (const client of this.#clients) {
        if (client.waiting || !client.fits(beat.length + 1)) continue;
        // A client whose filter skipped the latest changes learns the position here, so it resumes from there.
        const current = client.state === 'live' && client.cursor === this.#head && client.lastEventId !== this.#eventId && !client.after && !client.ahead;
        client.write(beat + (current ? '' : '\n'));
        if (current) this.#positionFrame(client);
      }
    });
  }

  #stopHeartbeat(): void {
    this.#heartbeat?.unsubscribe();
    this.#heartbeat = undefined;
  }

  #remove(client: SseClient<T, R>): void {
    if (!this.#clients.delete(client)) return;
    if (client.dropReason) this.#dropped[client.dropReason]++;
    if (this.#clients.size === 0) this.#stopHeartbeat();
  }
}

/**
 * Creates a hub: one read of a change feed shared by any number of Server-Sent Events clients, each with its
 * own filter and projection, resumable by `Last-Event-ID`; given a `view`, each client first gets the view's rows.
 *
 * In short: event ids carry, per partition, the LSN a client has reached (`<streamId>.<token>:<lsn>,…`), so they
 * keep their meaning across splits and server restarts. A client that reconnects gets exactly the changes it
 * missed from a bounded replay buffer; when they are gone it gets a fresh snapshot (snapshot mode) or an
 * `event: reset` (changes only).
 *
 * Snapshot mode (`view`): put `hub.broadcast()` after `materializeToView(view)`, in the one process that reads
 * every partition. A client gets `snapshot-begin`, `snapshot` events (JSON arrays of {@link SseSnapshotRow}),
 * `up-to-date` (with `positions`), then change events after those positions only; a change that was written
 * while the rows were read is neither lost nor sent twice. Rows are matched to changes by key = document id.
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery, materializeToView, MemoryViewStore } from 'rxfeed';
 * import { createSseHub, sseHandler } from 'rxfeed/sse';
 * const view = new MemoryViewStore<Card>();
 * const hub = createSseHub<Order, Card>({ view, project: (c) => c.document && toCard(c.document) });
 * changeFeed<Order>(options).pipe(materializeToView(view, { project: (c) => toCard(c.document!) }), hub.broadcast(), checkpointEvery(100)).subscribe();
 * http.createServer(sseHandler(hub)).listen(8080);
 * ```
 * @throws InvalidOptionsError for a negative or fractional number, a `project`/`projectRow` that is not a
 * function, a `view` that is not a ViewStore, or a bad `streamId`.
 */
export function createSseHub<T, R = unknown>(options: SseHubOptions<T, R> = {}): SseHub<T, R> {
  return new Hub<T, R>(options);
}
