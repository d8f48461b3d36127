import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProcessorHealth } from './FeedHealth.js';

/** Options of {@link healthHandler}. */
export interface HealthHandlerOptions {
  /** Path of the liveness probe. Default `'/livez'`. */
  readonly livePath?: string;
  /** Path of the readiness probe. Default `'/readyz'`. */
  readonly readyPath?: string;
}

/**
 * A `node:http` request handler answering Kubernetes liveness and readiness probes from a processor's
 * {@link ProcessorHealth}: `GET /livez` is 200 unless a fatal error ended the processor, `GET /readyz` is 200
 * while every owned lease is read and none is stalled; 503 otherwise, with the snapshot as JSON. Other paths
 * get 404 (or are passed to `next`, when given).
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { healthHandler } from 'rxfeed';
 * createServer(healthHandler(feed)).listen(8080);
 * ```
 */
export function healthHandler(
  processor: { health(): ProcessorHealth },
  options: HealthHandlerOptions = {},
): (req: IncomingMessage, res: ServerResponse, next?: () => void) => void {
  const livePath = options.livePath ?? '/livez';
  const readyPath = options.readyPath ?? '/readyz';
  return (req, res, next) => {
    const path = (req.url ?? '/').split('?')[0];
    const probe = path === livePath ? 'live' : path === readyPath ? 'ready' : undefined;
    if (probe === undefined || (req.method !== 'GET' && req.method !== 'HEAD')) {
      if (next) return next();
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    const health = processor.health();
    const ok = probe === 'live' ? health.live : health.ready;
    const body = JSON.stringify(health);
    res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
}
