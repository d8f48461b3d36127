import { Hub } from './hub/Hub.js';
import type { SseHub, SseHubOptions } from './hub/types.js';

export type { SseChangeEvent, SseConnectOptions, SseHub, SseHubOptions, SseHubStats, SseResetReason, SseSnapshotRow } from './hub/types.js';

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
