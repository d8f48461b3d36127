import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isAuthorized } from './auth.js';
import { CosmosHttpError, internalError } from './errors.js';
import type { FaultAction, FaultSet, RequestInfo } from './faults.js';
import type { HandlerContext } from './handlers/context.js';
import { header, parseBody, readRaw, segmentsOf, type Headers, type Reply } from './http.js';
import { matchRequest } from './routes.js';

export type { Reply } from './http.js';

/** One line of the request log. */
export interface LoggedRequest extends RequestInfo {
  /** The answer's status code (0: no answer, a fault hung, reset or lost it). */
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
function authorize(masterKey: string, headers: Headers, method: string, seg: string[]): void {
  if (!isAuthorized(masterKey, method, seg, header(headers, 'authorization'), header(headers, 'x-ms-date'))) {
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

/** A request as the front ends hand it over: over a socket (`handle`) or in this process (`serve`). */
export interface RawRequest {
  method: string;
  /** Path and query, e.g. `/dbs/db/colls/c/docs`. */
  url: string;
  /** Header names in lower case. */
  headers: Headers;
  /** The body as sent (`undefined` or empty: none). */
  body: string | Uint8Array | undefined;
}

/**
 * What a request gets: an answer, no answer at all (`hang`: the client's timeout fires), or a dropped
 * connection (`reset`; `served` when the request took effect first, as when a reply is lost).
 */
export type Outcome =
  | { kind: 'reply'; status: number; headers: Record<string, string>; text: string }
  | { kind: 'hang' }
  | { kind: 'reset'; served: boolean };

/**
 * The emulator's front end: matches a request against the routing table (`routes.ts`), lets the fault set
 * intercept it, runs its handler and answers with the headers the SDK reads (`etag`, `x-ms-request-charge`,
 * `x-ms-activity-id`, `date`…). `handle` serves a socket's request; `serve` the same without one (the in-process
 * HTTP client).
 */
export class RequestHandler {
  /** Requests held open by a `hang` fault; `stop()` destroys them. */
  readonly hanging = new Set<ServerResponse>();
  readonly #ctx: ServerContext;

  constructor(ctx: ServerContext) {
    this.#ctx = ctx;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const outcome = await this.serve({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body: await readRaw(req) });
    if (outcome.kind === 'hang') {
      this.hanging.add(res);
      res.on('close', () => this.hanging.delete(res));
    } else if (outcome.kind === 'reset') {
      req.socket.destroy();
    } else {
      res.writeHead(outcome.status, outcome.headers);
      res.end(outcome.text);
    }
  }

  /** Serves one request: its answer, or what a fault made of it. */
  async serve(req: RawRequest): Promise<Outcome> {
    const ctx = this.#ctx;
    const method = req.method.toUpperCase();
    const seg = segmentsOf(req.url);
    const { info, params, route } = matchRequest(method, seg, req.headers);
    const atMs = ctx.store.now();
    let reply: Reply;
    let fault: FaultAction | undefined;
    try {
      const body = parseBody(req.body);
      if (ctx.masterKey !== undefined && info.kind !== 'admin') authorize(ctx.masterKey, req.headers, method, seg);
      fault = info.kind === 'admin' ? undefined : ctx.faults.pick(info);
      if (fault && 'hang' in fault) {
        ctx.log(`fault: hanging ${method} ${info.path}`);
        ctx.record({ ...info, status: 0, atMs, fault });
        return { kind: 'hang' };
      }
      if (fault && 'reset' in fault) {
        ctx.log(`fault: resetting ${method} ${info.path}`);
        ctx.record({ ...info, status: 0, atMs, fault });
        return { kind: 'reset', served: false };
      }
      if (fault && 'delayMs' in fault) await sleep(fault.delayMs);
      if (fault && 'status' in fault) {
        const headers: Record<string, string> = {};
        if (fault.retryAfterMs !== undefined) headers['x-ms-retry-after-ms'] = String(fault.retryAfterMs);
        throw new CosmosHttpError(fault.status, fault.message ?? `injected fault ${fault.status}`, fault.substatus, headers);
      }
      if (info.kind === 'admin') reply = await ctx.admin(method, seg.slice(1), body);
      else if (route) {
        const operationFault = fault && 'operations' in fault ? fault.operations : undefined;
        reply = await route.handle(ctx, { method, headers: req.headers, body, info, params, ...(operationFault ? { operationFault } : {}) });
      }
      else throw new CosmosHttpError(400, `the emulator does not serve ${method} ${info.path}`);
    } catch (err) {
      if (!(err instanceof CosmosHttpError)) ctx.log(`internal error on ${method} ${info.path}: ${String(err)}`);
      reply = errorReply(err);
    }
    const { outcome, charge } = written(reply, ctx.store.now());
    if (fault && 'lostReply' in fault) {
      ctx.log(`fault: served ${method} ${info.path} (${reply.status}), then lost its reply`);
      ctx.record({ ...info, status: 0, atMs, requestCharge: charge, fault });
      return { kind: 'reset', served: true };
    }
    ctx.record({ ...info, status: reply.status, atMs, requestCharge: charge, ...(fault ? { fault } : {}) });
    return outcome;
  }
}

/** The reply as sent: JSON text, the headers and the request charge it reports. */
function written(reply: Reply, nowMs: number): { outcome: Outcome & { kind: 'reply' }; charge: number } {
  const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
  const bytes = Buffer.byteLength(text);
  const charge = typeof reply.charge === 'function' ? reply.charge(bytes) : (reply.charge ?? (reply.status < 400 ? 1 : 0));
  const headers = {
    // Every answer of the service carries its time (RFC 1123, to the second): by the emulator's clock, the
    // one that stamps `_ts` and changes, not the host's (Node would add the host's otherwise).
    date: new Date(nowMs).toUTCString(),
    'content-type': 'application/json',
    'x-ms-activity-id': randomUUID(),
    'x-ms-request-charge': String(charge),
    'x-ms-gatewayversion': 'rxfeed-emulator',
    'content-length': String(bytes),
    ...reply.headers,
  };
  return { outcome: { kind: 'reply', status: reply.status, headers, text }, charge };
}
