import type { Change } from '../../core/Change.js';
import { logger } from '../../internal/log.js';
import { formatSseMessage } from '../eventFormat.js';
import type { SseEntry } from '../ReplayBuffer.js';
import type { SseClient } from '../SseClient.js';
import type { HubCounters } from './counters.js';
import { changeFrame, clientEventId } from './frames.js';
import type { Projection } from './options.js';
import type { ResumeLog } from './resumeLog.js';

const log = logger('sse');

/** @internal Per-publish cache: frames of the new entries by projection, built once however many clients share one. */
export type FrameCache<T> = Map<Projection<Change<T>>, (string | null | undefined)[]>;

/**
 * @internal Writes the published changes to live clients: each from its cursor, through its filter and projection,
 * paced by what its connection has flushed, never sending what the client already has (its own marks and rows).
 */
export class Delivery<T, R> {
  /** Starts a client over (a snapshot, or a `reset`) when the hub cannot tell whether it holds a change. */
  restart: ((client: SseClient<T, R>) => void) | undefined;

  constructor(
    private readonly changes: ResumeLog<T>,
    private readonly project: Projection<Change<T>>,
    private readonly counters: HubCounters,
  ) {}

  /**
   * Writes to a live client what it has not had yet, from its cursor, while it stays under the bound; when it is
   * full, the rest waits in the buffer until what was written is flushed. Drops a client the buffer left behind.
   */
  pump(client: SseClient<T, R>, fresh?: readonly SseEntry<T>[], cache?: FrameCache<T>): void {
    if (!client.open) return;
    const firstFresh = fresh?.[0]?.seq ?? Infinity;
    const lastFresh = firstFresh + (fresh?.length ?? 0) - 1;
    const entryAt = (seq: number) => (seq >= firstFresh && seq <= lastFresh ? fresh![seq - firstFresh] : this.changes.entry(seq));
    if (client.cursor < this.changes.head && entryAt(client.cursor + 1) === undefined) {
      client.drop('slow-client');
      return;
    }
    if (client.state !== 'live' || client.waiting) return;
    let text = '';
    let bytes = 0;
    while (client.cursor < this.changes.head) {
      const seq = client.cursor + 1;
      const entry = entryAt(seq);
      if (!entry) break; // left behind while it waited: dropped below
      const inFresh = seq >= firstFresh && seq <= lastFresh;
      if (client.after && this.restart && undecidable(entry, client.after, this.changes)) {
        if (text) client.write(text);
        this.restart(client);
        return;
      }
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
    if (client.cursor < this.changes.head) {
      client.whenFlushed(() => this.pump(client, fresh, cache));
    } else if (client.after || client.ahead) {
      this.#forget(client);
    }
  }

  /** An id-only message: moves the browser's last event id to the hub's position without dispatching an event. */
  positionFrame(client: SseClient<T, R>): string {
    const id = clientEventId(this.changes.streamId, this.changes.eventId, client.after);
    client.lastEventId = id;
    const frame = formatSseMessage({ id });
    client.write(frame);
    return frame;
  }

  /** The frame of `entry` for `client`, or `null` when it has it already or its filter leaves it out. */
  #frame(client: SseClient<T, R>, entry: SseEntry<T>, cache: FrameCache<T> | undefined, index: number): string | null {
    const { change } = entry;
    if (client.after && change.lsn <= (this.changes.reachedBefore(entry, client.after) ?? -1)) return null;
    const ahead = client.ahead?.get(change.id);
    if (ahead && change.lsn <= ahead.lsn) return null;
    const { filter, project: own } = client.options;
    const project = own ?? this.project;
    try {
      if (filter && !filter(change)) return null;
      // Until the stream has passed the rows its snapshot read ahead of the positions, no id can say what the
      // client holds: events go without one, so a reconnect gets a fresh snapshot, not those changes again.
      if (client.ahead) return changeFrame(entry, project, undefined);
      const id = clientEventId(this.changes.streamId, entry.eventId, client.after);
      client.lastEventId = id;
      if (!cache || client.after) return changeFrame(entry, project, id);
      let frames = cache.get(project);
      if (!frames) cache.set(project, (frames = []));
      return (frames[index] ??= changeFrame(entry, project, id));
    } catch (error) {
      this.counters.clientErrors++;
      log('client %d: change %s (LSN %d) left out: %s', client.id, change.id, change.lsn, (error as Error).message);
      return null;
    }
  }

  /** Once the hub has published past a client's own marks (and rows), the client needs them no more. */
  #forget(client: SseClient<T, R>): void {
    // All at once: while some are ahead of the hub, the others still tell what the client may hold over a range
    // that a token read later inherits at a lower position (see ResumeLog.mayHold).
    if ([...(client.after ?? [])].every(([token, lsn]) => this.changes.published(token, lsn))) client.after = undefined;
    for (const [key, row] of client.ahead ?? []) {
      if (this.changes.published(row.partition, row.lsn)) client.ahead!.delete(key);
    }
    if (client.ahead?.size === 0) client.ahead = undefined;
  }
}

/**
 * Whether `entry` is past what the client's marks `after` say it has, yet may be held by it: the marks do not tell
 * (see {@link ResumeLog.mayHold}).
 */
function undecidable<T>(entry: SseEntry<T>, after: ReadonlyMap<string, number>, changes: ResumeLog<T>): boolean {
  return entry.change.lsn > (changes.reachedBefore(entry, after) ?? -1) && changes.mayHold(entry, after);
}
