/**
 * This process's HTTP requests so far, counted through Node's `diagnostics_channel` (whatever sends them:
 * the SDK's own agent included): change feed reads (a GET of `…/docs` with an `A-IM` header) and all the rest
 * (lease reads and writes, queries, metadata), the response bytes they brought (Content-Length), the TCP
 * connections opened, and how many requests are in flight. Benchmarks read differences of these around a window; `maxInFlight` is reset by the caller.
 */
import { subscribe } from 'node:diagnostics_channel';
import type { ClientRequest, IncomingMessage } from 'node:http';

export const requests = { changeFeed: 0, other: 0, bytes: 0, connections: 0, inFlight: 0, maxInFlight: 0 };

/** Connections opened (TCP, by any agent). */
subscribe('net.client.socket', () => void requests.connections++);

subscribe('http.client.request.start', (message) => {
  const request = (message as { request: ClientRequest }).request;
  if (request.method === 'GET' && request.path.endsWith('/docs') && request.getHeader('a-im') !== undefined) requests.changeFeed++;
  else requests.other++;
  requests.maxInFlight = Math.max(requests.maxInFlight, ++requests.inFlight);
  request.once('close', () => requests.inFlight--);
});
subscribe('http.client.response.finish', (message) => {
  requests.bytes += Number((message as { response: IncomingMessage }).response.headers['content-length'] ?? 0);
});
