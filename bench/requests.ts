/**
 * This process's HTTP requests so far, counted through Node's `diagnostics_channel` (whatever sends them:
 * the SDK's own agent included): change feed reads (a GET of `…/docs` with an `A-IM` header) and all the rest
 * (lease reads and writes, queries, metadata), the response bytes they brought (Content-Length), the TCP
 * connections opened, and how many requests are in flight. Benchmarks read differences of these around a window; `maxInFlight` is reset by the caller.
 */
import { subscribe } from 'node:diagnostics_channel';
import type { ClientRequest, IncomingMessage } from 'node:http';

export const requests = { changeFeed: 0, other: 0, bytes: 0, connections: 0, inFlight: 0, maxInFlight: 0 };

/**
 * The non-change-feed requests by kind: `query` (a POST of `…/docs` with the query header: lease listings),
 * `batch` (a POST of `…/docs` with the batch header: grouped lease writes), `create` (another POST of `…/docs`),
 * `replace` (PUT of a document), `read` (GET of a document), `delete`, and `meta` (databases, containers,
 * partition key ranges). Benchmarks read differences around a window.
 */
export const requestKinds = { query: 0, batch: 0, create: 0, replace: 0, read: 0, delete: 0, meta: 0 };

/** The kind of a request that is not a change feed read (see {@link requestKinds}). */
function kindOf(request: ClientRequest): keyof typeof requestKinds {
  const path = request.path.split('?')[0] ?? '';
  const onDocs = path.endsWith('/docs');
  const onDoc = /\/docs\/[^/]+$/.test(path);
  if (request.method === 'POST' && onDocs) {
    if (request.getHeader('x-ms-documentdb-isquery') !== undefined) return 'query';
    if (request.getHeader('x-ms-cosmos-is-batch-request') !== undefined) return 'batch';
    return 'create';
  }
  if (onDoc && request.method === 'PUT') return 'replace';
  if (onDoc && request.method === 'GET') return 'read';
  if (onDoc && request.method === 'DELETE') return 'delete';
  return 'meta';
}

/** Connections opened (TCP, by any agent). */
subscribe('net.client.socket', () => void requests.connections++);

subscribe('http.client.request.start', (message) => {
  const request = (message as { request: ClientRequest }).request;
  if (request.method === 'GET' && request.path.endsWith('/docs') && request.getHeader('a-im') !== undefined) requests.changeFeed++;
  else {
    requests.other++;
    requestKinds[kindOf(request)]++;
  }
  requests.maxInFlight = Math.max(requests.maxInFlight, ++requests.inFlight);
  request.once('close', () => requests.inFlight--);
});
subscribe('http.client.response.finish', (message) => {
  requests.bytes += Number((message as { response: IncomingMessage }).response.headers['content-length'] ?? 0);
});
