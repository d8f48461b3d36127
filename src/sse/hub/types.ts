import { type MonoTypeOperatorFunction, type SchedulerLike } from 'rxjs';
import type { BatchOrBatches } from '../../core/ChangeBatch.js';
import type { Change } from '../../core/Change.js';
import type { ViewRow, ViewStore } from '../../sinks/ViewStore.js';
import type { SseClient, SseClientOptions, SseDropReason, SseResponse } from '../SseClient.js';

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
 * - `'too-old'`: some of what it missed is no longer in the replay buffer (or was read before this hub started), or
 *   a partition was re-read from below what it may have been sent (an admin reset or rewind) and the hub cannot
 *   tell which of those changes it has (then also a live client gets one);
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
  /** `create`, `replace`, `upsert` or `delete`, as the change says. */
  readonly operation: Change<unknown>['operation'];
  /** Lease token of the partition that read the change. */
  readonly partition: string;
  /** The change's LSN. */
  readonly lsn: number;
  /** When the change was written to the source, in ms since the epoch. */
  readonly timestampMs: number;
  /** The projection's output, when there is a projection. */
  readonly data?: D;
}

/** A view row as it travels in a `snapshot` event's `data` (a JSON array of these). */
export interface SseSnapshotRow<D = unknown> {
  /** Row key (the document id, when the view is keyed by it). */
  readonly id: string;
  /** Lease token of the partition whose change wrote the row. */
  readonly partition: string;
  /** LSN of that change. */
  readonly lsn: number;
  /** When that change was written to the source, in ms since the epoch. */
  readonly timestampMs: number;
  /** The row as `projectRow` made it (the row itself by default). */
  readonly data: D;
}
