import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isAuthorized } from './auth.js';
import { CosmosHttpError, internalError } from './errors.js';
import type { FaultAction, FaultSet, RequestInfo } from './faults.js';
import type { HandlerContext } from './handlers/context.js';
import { header, readBody, segmentsOf, type Reply } from './http.js';
import { matchRequest } from './routes.js';

export type { Reply } from './http.js';

/** One line of the request log. */
export interface LoggedRequest extends RequestInfo {
  status: number;
  /** When the request arrived, by the emulator's clock (ms). */
  atMs: number;
  /** The request charge the answer reported (`x-ms-request-charge`, RU). */
  requestCharge?: number;
  /** The fault that answered it, if one did. */
  fault?: FaultAction;
}

/** What the HTTP front end needs from the emulator. */
export interface ServerContext extends HandlerContext {
  faults: FaultSet;
  /** When set, every non-admin request must carry a valid master-key signature for it. */
  masterKey: string | undefined;
  record(entry: LoggedRequest): void;
  /** Handles `/_emulator/...` admin requests. */
  admin(method: string, segments: string[], body: unknown): Promise<Reply> | Reply;
  /** Called with `log` lines for the `rxfeed:emulator` namespace. */
  log(message: string): void;
}

/** Throws 401 unless the request is signed with the master key, as the service checks it. */
function authorize(masterKey: string, req: IncomingMessage, method: string, seg: string[]): void {
  if (!isAuthorized(masterKey, method, seg, header(req.headers, 'authorization'), header(req.headers, 'x-ms-date'))) {
    throw new CosmosHttpError(
      401,
      'The input authorization token cannot serve the request: the key is wrong or the signature was not built as the protocol says',
    );
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function errorReply(err: unknown): Reply {
  const e = err instanceof CosmosHttpError ? err : internalError(err);
  return {
    status: e.status,
    body: { code: e.code, message: e.message, ...e.details },
    headers: { ...e.headers, ...(e.substatus !== undefined ? { 'x-ms-substatus': String(e.substatus) } : {}) },
    charge: 0,
  };
}

/**
 * The HTTP front end: matches a request against the routing table (`routes.ts`), lets the fault set
 * intercept it, runs its handler and writes the reply with the headers the SDK reads (`etag`,
 * `x-ms-request-charge`, `x-ms-activity-id`, `date`…).
 */
export class RequestHandler {
  /** Requests held open by a `hang` fault; `stop()` destroys them. */
  readonly hanging = new Set<ServerResponse>();
  readonly #ctx: ServerContext;

  constructor(ctx: ServerContext) {
    this.#ctx = ctx;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ctx = this.#ctx;
    const method = (req.method ?? 'GET').toUpperCase();
    const seg = segmentsOf(req.url ?? '/');
    const { info, params, route } = matchRequest(method, seg, req.headers);
    const atMs = ctx.store.now();
    let reply: Reply;
    let fault: FaultAction | undefined;
    try {
      const body = await readBody(req);
      if (ctx.masterKey !== undefined && info.kind !== 'admin') authorize(ctx.masterKey, req, method, seg);
      fault = info.kind === 'admin' ? undefined : ctx.faults.pick(info);
      if (fault && 'hang' in fault) {
        ctx.log(`fault: hanging ${method} ${info.path}`);
        this.hanging.add(res);
        res.on('close', () => this.hanging.delete(res));
        ctx.record({ ...info, status: 0, atMs, fault });
        return;
      }
      if (fault && 'reset' in fault) {
        ctx.log(`fault: resetting ${method} ${info.path}`);
        ctx.record({ ...info, status: 0, atMs, fault });
        req.socket.destroy();
        return;
      }
      if (fault && 'delayMs' in fault) await sleep(fault.delayMs);
      if (fault && 'status' in fault) {
        const headers: Record<string, string> = {};
        if (fault.retryAfterMs !== undefined) headers['x-ms-retry-after-ms'] = String(fault.retryAfterMs);
        throw new CosmosHttpError(fault.status, fault.message ?? `injected fault ${fault.status}`, fault.substatus, headers);
      }
      if (info.kind === 'admin') reply = await ctx.admin(method, seg.slice(1), body);
      else if (route) reply = await route.handle(ctx, { method, headers: req.headers, body, info, params });
      else throw new CosmosHttpError(400, `the emulator does not serve ${method} ${info.path}`);
    } catch (err) {
      if (!(err instanceof CosmosHttpError)) ctx.log(`internal error on ${method} ${info.path}: ${String(err)}`);
      reply = errorReply(err);
    }
    const requestCharge = this.#write(res, reply);
    ctx.record({ ...info, status: reply.status, atMs, requestCharge, ...(fault ? { fault } : {}) });
  }

  /** Writes the reply and returns the request charge it reported. */
  #write(res: ServerResponse, reply: Reply): number {
    const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
    const bytes = Buffer.byteLength(text);
    const charge = typeof reply.charge === 'function' ? reply.charge(bytes) : (reply.charge ?? (reply.status < 400 ? 1 : 0));
    res.writeHead(reply.status, {
      // Every answer of the service carries its time (RFC 1123, to the second): by the emulator's clock, the
      // one that stamps `_ts` and changes, not the host's (Node would add the host's otherwise).
      date: new Date(this.#ctx.store.now()).toUTCString(),
      'content-type': 'application/json',
      'x-ms-activity-id': randomUUID(),
      'x-ms-request-charge': String(charge),
      'x-ms-gatewayversion': 'rxfeed-emulator',
      'content-length': String(bytes),
      ...reply.headers,
    });
    res.end(text);
    return charge;
  }
}
