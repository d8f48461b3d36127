/**
 * `rxfeed/sse`: serve a change feed to browsers as Server-Sent Events. One read of the feed per server process,
 * multicast to every client with its own filter and projection, resumable by `Last-Event-ID` from a bounded
 * replay buffer, with heartbeats and a per-client bound on unsent bytes; given a view, each client first gets the
 * view's rows (snapshot, then live). The browser side is `rxfeed/sse/client`.
 *
 * @example
 * ```ts
 * import { createSseHub, sseHandler } from 'rxfeed/sse';
 * const hub = createSseHub<Order>({ project: (c) => ({ status: c.document?.status }) });
 * changeFeed<Order>(options).pipe(hub.broadcast(), checkpointEvery(100)).subscribe();
 * createServer(sseHandler(hub)).listen(8080);
 * ```
 */
export { createSseHub, type SseHub, type SseHubOptions, type SseConnectOptions, type SseHubStats, type SseResetReason, type SseChangeEvent, type SseSnapshotRow } from './SseHub.js';
export { SseClient, type SseClientOptions, type SseDropReason, type SseResponse } from './SseClient.js';
export { sseHandler, lastEventIdOf, type SseHandlerOptions } from './sseHandler.js';
