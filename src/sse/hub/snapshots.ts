import { logger } from '../../internal/log.js';
import type { ViewRow, ViewStore } from '../../sinks/ViewStore.js';
import { formatSseMessage } from '../eventFormat.js';
import { formatEventId } from '../eventId.js';
import type { SseClient } from '../SseClient.js';
import type { HubCounters } from './counters.js';
import type { ResumeLog } from './resumeLog.js';
import type { SseResetReason, SseSnapshotRow } from './types.js';

const log = logger('sse');

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
  /** {@link ResumeLog.startsOver} when the positions were read: a read across a start-over is read again. */
  readonly startsOver: number;
}

/** @internal How a hub sends snapshots: its view, rows per event, row projection, and what goes live after. */
export interface SnapshotOptions<T, R> {
  readonly view: ViewStore<R>;
  readonly chunkRows: number;
  readonly projectRow: (row: ViewRow<R>) => unknown;
  readonly changes: ResumeLog<T>;
  readonly counters: HubCounters;
  /** Starts sending changes to a client that went live. */
  readonly pump: (client: SseClient<T, R>) => void;
}

/**
 * @internal Snapshot mode: sends a client the view's rows, then the changes after the positions they reflect. A
 * burst of clients shares one read of the view.
 */
export class Snapshots<T, R> {
  #wave: Promise<SnapshotRead<R>> | undefined;

  constructor(private readonly options: SnapshotOptions<T, R>) {}

  /**
   * Sends the view to a client: `snapshot-begin` (which also clears the browser's last event id, so a cut during
   * the snapshot starts over), the rows in chunks paced by the connection, then `up-to-date` with the positions
   * they reflect; meanwhile changes wait in the buffer, and afterwards the client gets those after the positions.
   */
  async send(client: SseClient<T, R>, reason: SseResetReason | undefined): Promise<void> {
    const { view, chunkRows, changes, counters } = this.options;
    counters.snapshots++;
    log('client %d: snapshot of %s%s', client.id, view.description, reason ? ` (${reason})` : '');
    client.state = 'snapshot';
    client.write(formatSseMessage({ event: 'snapshot-begin', id: '', data: JSON.stringify(reason ? { reason } : {}) }));
    let read: SnapshotRead<R>;
    try {
      read = await this.#read();
      // The hub's position passed a re-read it did not publish while the view was read: the view may lack it.
      while (client.open && read.startsOver !== changes.startsOver) read = await this.#read();
    } catch (error) {
      log('client %d: the snapshot read of %s failed: %s', client.id, view.description, (error as Error).message);
      client.drop('view-error');
      return;
    }
    // A client with the hub's row projection and no row filter gets the frames every such client of the read gets.
    const shared = !client.options.filterRow && !client.options.projectRow;
    for (let chunk = 0; chunk * chunkRows < read.rows.length; chunk++) {
      let frame = shared ? read.frames[chunk] : undefined;
      if (frame === undefined) {
        frame = this.#chunkFrame(client, read.rows.slice(chunk * chunkRows, (chunk + 1) * chunkRows));
        if (shared) read.frames[chunk] = frame;
      }
      if (frame === '') continue;
      const size = Buffer.byteLength(frame);
      while (client.open && !client.fits(size)) await client.flushed();
      // Changes published meanwhile must still be in the buffer when the snapshot is done.
      if (client.open && client.cursor + 1 <= changes.head && changes.entry(client.cursor + 1) === undefined) client.drop('slow-client');
      if (!client.open) return;
      if (this.#passedSince(client, read)) return this.send(client, 'too-old');
      client.write(frame);
    }
    if (this.#passedSince(client, read)) return this.send(client, 'too-old');
    const { after } = read;
    const id = formatEventId(changes.streamId, after);
    const positions = Object.fromEntries(after);
    // Rows past the positions are in no id: until the stream has passed them, the client's id stays the empty one
    // `snapshot-begin` gave it (a reconnect gets a fresh snapshot rather than those changes again).
    const resumable = read.ahead.size === 0;
    client.write(formatSseMessage({ event: 'up-to-date', ...(resumable ? { id } : {}), data: JSON.stringify({ positions, rows: read.rows.length }) }));
    client.lastEventId = resumable ? id : '';
    client.after = new Map(after);
    client.ahead = read.ahead.size > 0 ? new Map(read.ahead) : undefined;
    client.state = 'live';
    this.options.pump(client);
  }

  /**
   * Whether the hub's position passed a re-read it did not publish since `read` read the view (see
   * {@link ResumeLog.startsOver}): the rows may lack some of it, which no change will bring. The live clients start
   * over then; one still being sent its rows does too (seed 5149 of the simulation: the rows waited on a slow
   * connection while the re-read's last pages were read, and the browser went live without them).
   */
  #passedSince(client: SseClient<T, R>, read: SnapshotRead<R>): boolean {
    if (read.startsOver === this.options.changes.startsOver) return false;
    log('client %d: the hub passed a re-read it did not publish while the snapshot was sent: it starts over', client.id);
    return true;
  }

  /** The `snapshot` event of some rows for a client (its row filter and projection), or `''` when none is left. */
  #chunkFrame(client: SseClient<T, R>, rows: readonly ViewRow<R>[]): string {
    const { filterRow, projectRow } = client.options;
    const project = projectRow ?? this.options.projectRow;
    const items: SseSnapshotRow[] = [];
    for (const row of rows) {
      try {
        if (filterRow && !filterRow(row)) continue;
        items.push({ id: row.key, partition: row.partition, lsn: row.lsn, timestampMs: row.timestampMs, data: project(row) });
      } catch (error) {
        this.options.counters.clientErrors++;
        log('client %d: row %s left out of the snapshot: %s', client.id, row.key, (error as Error).message);
      }
    }
    return items.length === 0 ? '' : formatSseMessage({ event: 'snapshot', data: JSON.stringify(items) });
  }

  /**
   * The view's positions, then its rows, read once for every client that asks in the same turn of the event loop
   * (a burst of page loads shares one read instead of holding a copy of the view each).
   */
  #read(): Promise<SnapshotRead<R>> {
    if (this.#wave) return this.#wave;
    const { view, changes } = this.options;
    const wave: Promise<SnapshotRead<R>> = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      // Later clients start a new read: their changes since connecting may be newer than these positions.
      if (this.#wave === wave) this.#wave = undefined;
      const startsOver = changes.startsOver;
      const positions = await view.positions();
      const rows = await view.rows();
      const after = new Map<string, number>();
      for (const [token, state] of positions) {
        if (state.range) changes.learnRange(token, state.range);
        if (state.lsn !== undefined) {
          after.set(token, state.lsn);
          changes.snapshotHolds(token);
        }
      }
      // Rows already past the positions (written between the two reads): their changes, held meanwhile, are not sent.
      const ahead = new Map<string, { lsn: number; partition: string }>();
      for (const row of rows) {
        if (row.lsn > (changes.reached(row.partition, after) ?? -1)) ahead.set(row.key, { lsn: row.lsn, partition: row.partition });
      }
      return { rows, after, ahead, frames: [], startsOver };
    });
    this.#wave = wave;
    return wave;
  }
}
