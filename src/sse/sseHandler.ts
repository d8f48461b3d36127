import type { IncomingMessage, ServerResponse } from 'node:http';
import { logger } from '../internal/log.js';
import type { SseClientOptions } from './SseClient.js';
import type { SseHub } from './SseHub.js';

const log = logger('sse');

/** Settings of {@link sseHandler}. */
export interface SseHandlerOptions<T, R = unknown> {
  /**
   * This request's filter and projection (read the query string, the user, …). Throw to refuse the request
   * with 400 and the error's message. Default: every change, with the hub's projection.
   */
  readonly client?: (req: IncomingMessage) => SseClientOptions<T, R>;
  /** `Access-Control-Allow-Origin` to send, for pages served from another origin. Default: none. */
  readonly allowOrigin?: string;
}

/**
 * The `Last-Event-ID` a request resumes from: the header a browser sends on reconnect, else `?lastEventId=`.
 *
 * @example
 * ```ts
 * import { lastEventIdOf } from 'rxfeed/sse';
 * hub.connect(res, { lastEventId: lastEventIdOf(req) });
 * ```
 */
export function lastEventIdOf(req: IncomingMessage): string | undefined {
  const header = req.headers['last-event-id'];
  if (typeof header === 'string' && header !== '') return header;
  const query = new URL(req.url ?? '/', 'http://localhost').searchParams.get('lastEventId');
  return query === null || query === '' ? undefined : query;
}

/**
 * A `node:http` request handler that streams a hub's changes as `text/event-stream`.
 *
 * In short: works unchanged under Express (`app.get('/events', handler)`), Koa
 * (`ctx.respond = false; handler(ctx.req, ctx.res)`) and Fastify (`reply.hijack(); handler(req.raw, reply.raw)`). A reconnecting
 * browser's `Last-Event-ID` header (or a `lastEventId` query parameter, for the first connection after a
 * snapshot) picks where it resumes. Only `GET` is served (405 otherwise).
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { createSseHub, sseHandler } from 'rxfeed/sse';
 * const events = sseHandler(hub, { client: (req) => ({ filter: (c) => c.document?.customerId === new URL(req.url!, 'http://x').searchParams.get('customer') }) });
 * createServer((req, res) => (req.url?.startsWith('/events') ? events(req, res) : res.writeHead(404).end())).listen(8080);
 * ```
 */
export function sseHandler<T, R = unknown>(hub: SseHub<T, R>, options: SseHandlerOptions<T, R> = {}): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (req.method !== 'GET') {
      res.writeHead(405, { Allow: 'GET', 'Content-Type': 'text/plain; charset=utf-8' }).end('Server-Sent Events are served to GET only\n');
      return;
    }
    let client: SseClientOptions<T, R> = {};
    try {
      client = options.client?.(req) ?? {};
    } catch (error) {
      res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`${(error as Error).message}\n`);
      return;
    }
    const headers: Record<string, string> = {
      'Content-Type': 'text/event-stream; charset=utf-8',
      // no-transform: compression proxies must not buffer the stream.
      'Cache-Control': 'no-cache, no-transform',
      // nginx: do not buffer this response.
      'X-Accel-Buffering': 'no',
    };
    if (req.httpVersionMajor < 2) headers.Connection = 'keep-alive';
    if (options.allowOrigin !== undefined) headers['Access-Control-Allow-Origin'] = options.allowOrigin;
    res.writeHead(200, headers);
    res.flushHeaders();
    // Small events should leave at once, not wait for Nagle's algorithm.
    req.socket.setNoDelay(true);
    try {
      hub.connect(res, { ...client, lastEventId: lastEventIdOf(req) });
    } catch (error) {
      log('refused a client: %s', (error as Error).message);
      res.end();
    }
  };
}
