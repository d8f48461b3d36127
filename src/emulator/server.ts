import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isAuthorized } from './auth.js';
import { ALL_VERSIONS_AND_DELETES, allVersionsItem, LATEST_VERSION, lsnEtag, parseStart, readChanges } from './changeFeed.js';
import { CosmosHttpError, internalError } from './errors.js';
import type { FaultAction, FaultSet, RequestInfo, RequestKind } from './faults.js';
import { effectivePartitionKey, type PartitionKeyComponent } from './hash.js';
import { runQuery } from './query.js';
import {
  inRange,
  parsePartitionKeyHeader,
  partitionKeyMatcher,
  type ContainerState,
  type Doc,
  type LogEntry,
  type RangeState,
  type Store,
} from './store.js';

/** An answer before it is written: status, JSON body (or none) and headers. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** One line of the request log. */
export interface LoggedRequest extends RequestInfo {
  status: number;
  /** When the request arrived, by the emulator's clock (ms). */
  atMs: number;
  /** The fault that answered it, if one did. */
  fault?: FaultAction;
}

/** What the HTTP front end needs from the emulator. */
export interface ServerContext {
  store: Store;
  faults: FaultSet;
  changeFeedPageSize: number;
  queryPageSize: number;
  strictAllVersionsStart: boolean;
  /** When set, every non-admin request must carry a valid master-key signature for it. */
  masterKey: string | undefined;
  record(entry: LoggedRequest): void;
  /** Handles `/_emulator/...` admin requests. */
  admin(method: string, segments: string[], body: unknown): Promise<Reply> | Reply;
  /** Called with `log` lines for the `rxfeed:emulator` namespace. */
  log(message: string): void;
}

type Headers = IncomingMessage['headers'];

function header(h: Headers, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

function isTrue(v: string | undefined): boolean {
  return v !== undefined && v.toLowerCase() === 'true';
}

/** Splits and decodes the path; ids arrive percent-encoded. */
function segmentsOf(url: string): string[] {
  const path = url.split('?')[0] ?? '';
  return path
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
}

function classify(method: string, seg: string[], h: Headers): RequestInfo {
  const info: RequestInfo = { method, path: '/' + seg.join('/'), kind: 'unknown' };
  if (seg[0] === '_emulator') return { ...info, kind: 'admin' };
  if (seg[0] === 'offers') return { ...info, kind: 'offer' };
  if (seg[0] !== 'dbs') return { ...info, kind: seg.length === 0 ? 'account' : 'unknown' };
  if (seg[1] !== undefined) info.databaseId = seg[1];
  if (seg[3] !== undefined) info.containerId = seg[3];
  const rangeId = header(h, 'x-ms-documentdb-partitionkeyrangeid');
  if (rangeId !== undefined) info.rangeId = rangeId;
  const isQuery = isTrue(header(h, 'x-ms-documentdb-isquery')) || (header(h, 'content-type') ?? '').includes('query+json');
  let kind: RequestKind = 'unknown';
  if (seg.length <= 2) kind = isQuery ? 'query' : 'database';
  else if (seg.length <= 4) kind = isQuery ? 'query' : 'container';
  else if (seg[4] === 'pkranges') kind = 'pkranges';
  else if (seg[4] === 'docs' && seg.length === 5) {
    if (method === 'GET') kind = header(h, 'a-im') !== undefined ? 'changeFeed' : 'readFeed';
    else if (method === 'POST') {
      if (isTrue(header(h, 'x-ms-cosmos-is-batch-request'))) kind = 'batch';
      else if (isQuery || isTrue(header(h, 'x-ms-cosmos-is-query-plan-request'))) kind = 'query';
      else kind = isTrue(header(h, 'x-ms-documentdb-is-upsert')) ? 'upsert' : 'create';
    }
  } else if (seg[4] === 'docs' && seg.length === 6) {
    const byMethod: Record<string, RequestKind> = { GET: 'read', PUT: 'replace', PATCH: 'patch', DELETE: 'delete' };
    kind = byMethod[method] ?? 'unknown';
  }
  return { ...info, kind };
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new CosmosHttpError(400, 'the request body is not valid JSON');
  }
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

/**
 * The HTTP front end: classifies a request, lets the fault set intercept it, dispatches it to the store and
 * writes the reply with the headers the SDK reads (`etag`, `x-ms-request-charge`, `x-ms-activity-id`…).
 */
export class RequestHandler {
  /** Requests held open by a `hang` fault; `stop()` destroys them. */
  readonly hanging = new Set<ServerResponse>();

  constructor(private readonly ctx: ServerContext) {}

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase();
    const seg = segmentsOf(req.url ?? '/');
    const info = classify(method, seg, req.headers);
    const atMs = this.ctx.store.now();
    let reply: Reply;
    let fault: FaultAction | undefined;
    try {
      const body = await readBody(req);
      if (this.ctx.masterKey !== undefined && info.kind !== 'admin') authorize(this.ctx.masterKey, req, method, seg);
      fault = info.kind === 'admin' ? undefined : this.ctx.faults.pick(info);
      if (fault && 'hang' in fault) {
        this.ctx.log(`fault: hanging ${method} ${info.path}`);
        this.hanging.add(res);
        res.on('close', () => this.hanging.delete(res));
        this.ctx.record({ ...info, status: 0, atMs, fault });
        return;
      }
      if (fault && 'reset' in fault) {
        this.ctx.log(`fault: resetting ${method} ${info.path}`);
        this.ctx.record({ ...info, status: 0, atMs, fault });
        req.socket.destroy();
        return;
      }
      if (fault && 'delayMs' in fault) await sleep(fault.delayMs);
      if (fault && 'status' in fault) {
        const headers: Record<string, string> = {};
        if (fault.retryAfterMs !== undefined) headers['x-ms-retry-after-ms'] = String(fault.retryAfterMs);
        throw new CosmosHttpError(fault.status, fault.message ?? `injected fault ${fault.status}`, fault.substatus, headers);
      }
      reply = info.kind === 'admin' ? await this.ctx.admin(method, seg.slice(1), body) : await this.dispatch(method, seg, info, req.headers, body);
    } catch (err) {
      const e = err instanceof CosmosHttpError ? err : internalError(err);
      if (!(err instanceof CosmosHttpError)) this.ctx.log(`internal error on ${method} ${info.path}: ${String(err)}`);
      reply = {
        status: e.status,
        body: { code: e.code, message: e.message },
        headers: { ...e.headers, ...(e.substatus !== undefined ? { 'x-ms-substatus': String(e.substatus) } : {}) },
      };
    }
    this.ctx.record({ ...info, status: reply.status, atMs, ...(fault ? { fault } : {}) });
    this.write(res, reply);
  }

  private write(res: ServerResponse, reply: Reply): void {
    const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
    res.writeHead(reply.status, {
      'content-type': 'application/json',
      'x-ms-activity-id': randomUUID(),
      'x-ms-request-charge': String(reply.status < 400 ? 1 : 0),
      'x-ms-gatewayversion': 'rxfeed-emulator',
      'content-length': String(Buffer.byteLength(text)),
      ...reply.headers,
    });
    res.end(text);
  }

  private async dispatch(method: string, seg: string[], info: RequestInfo, h: Headers, body: unknown): Promise<Reply> {
    const { store } = this.ctx;
    if (info.kind === 'account') {
      if (method !== 'GET') throw new CosmosHttpError(400, 'only GET is served on /');
      return { status: 200, body: this.account(header(h, 'host')) };
    }
    if (info.kind === 'offer') return this.offer(method, seg[1], h, body);
    if (seg[0] !== 'dbs') {
      throw new CosmosHttpError(400, `the emulator does not serve ${method} ${info.path}`);
    }
    const [, dbId, , collId, , docId] = seg;
    if (dbId === undefined) {
      if (info.kind === 'query') return this.feedQuery('Databases', body, [...store.databases.values()].map((d) => d.resource), h);
      if (method === 'GET') return feed('Databases', '', [...store.databases.values()].map((d) => d.resource));
      if (method === 'POST') return resource(201, store.createDatabase(asDoc(body)).resource);
    }
    if (dbId !== undefined && seg.length === 2) {
      if (method === 'GET') return resource(200, store.database(dbId).resource);
      if (method === 'DELETE') {
        store.deleteDatabase(dbId);
        return { status: 204 };
      }
    }
    if (dbId !== undefined && seg[2] === 'colls' && collId === undefined) {
      const db = store.database(dbId);
      const all = [...db.containers.values()].map((c) => c.resource);
      if (info.kind === 'query') return this.feedQuery('DocumentCollections', body, all, h);
      if (method === 'GET') return feed('DocumentCollections', db.rid, all);
      if (method === 'POST') return resource(201, store.createContainer(dbId, asDoc(body), requestedThroughput(h)).resource);
    }
    if (dbId === undefined || collId === undefined) throw new CosmosHttpError(400, `the emulator does not serve ${method} ${info.path}`);
    if (seg.length === 4) {
      if (method === 'GET') return resource(200, store.container(dbId, collId).resource);
      if (method === 'PUT') return resource(200, store.replaceContainer(dbId, collId, asDoc(body)).resource);
      if (method === 'DELETE') {
        store.deleteContainer(dbId, collId);
        return { status: 204 };
      }
    }
    const c = store.container(dbId, collId);
    if (info.kind === 'pkranges') return this.partitionKeyRanges(c);
    if (docId === undefined && seg[4] === 'docs') {
      switch (info.kind) {
        case 'changeFeed':
          return this.changeFeed(c, h);
        case 'readFeed':
          return this.readFeed(c, h);
        case 'query':
          return this.query(c, h, body);
        case 'create':
        case 'upsert': {
          const { doc, created } = store.createDocument(c, body, partitionKeyOf(h), info.kind === 'upsert', conditions(h));
          return resource(created ? 201 : 200, doc);
        }
        case 'batch':
          return this.batch(c, h, body);
        default:
      }
    }
    if (docId !== undefined && seg[4] === 'docs') {
      const pk = partitionKeyOf(h);
      if (pk === undefined) throw new CosmosHttpError(400, `point operations on ${c.id} need the x-ms-documentdb-partitionkey header`);
      switch (info.kind) {
        case 'read': {
          const doc = store.readDocument(c, pk, docId);
          const ifNoneMatch = header(h, 'if-none-match');
          if (ifNoneMatch !== undefined && ifNoneMatch === doc['_etag']) return { status: 304, headers: { etag: ifNoneMatch } };
          return resource(200, doc);
        }
        case 'replace':
          return resource(200, store.replaceDocument(c, docId, body, partitionKeyOf(h), conditions(h)));
        case 'patch': {
          // The SDK sends a bare operations array, or `{operations, condition}` when there is a condition.
          const spec = Array.isArray(body) ? { operations: body } : asDoc(body);
          let condition: ((doc: Doc) => boolean) | undefined;
          if (typeof spec['condition'] === 'string') {
            const before = store.readDocument(c, pk, docId);
            const holds = await conditionHolds(spec['condition'], before);
            // A write that landed while the condition was evaluated makes the answer stale: fail the precondition.
            condition = (doc) => doc === before && holds;
          }
          return resource(200, store.patchDocument(c, docId, pk, spec['operations'], conditions(h), condition));
        }
        case 'delete':
          store.deleteDocument(c, docId, pk, conditions(h));
          return { status: 204 };
        default:
      }
    }
    throw new CosmosHttpError(400, `the emulator does not serve ${method} ${info.path}`);
  }

  /** `/offers`: list, query, read and replace containers' throughput offers. */
  private async offer(method: string, id: string | undefined, h: Headers, body: unknown): Promise<Reply> {
    const { store } = this.ctx;
    if (id === undefined) {
      const isQuery = isTrue(header(h, 'x-ms-documentdb-isquery')) || (header(h, 'content-type') ?? '').includes('query+json');
      if (method === 'POST' && isQuery) return this.feedQuery('Offers', body, store.offers(), h);
      if (method === 'GET') return feed('Offers', '', store.offers());
    } else {
      if (method === 'GET') {
        const offer = store.offers().find((o) => o['id'] === id);
        if (!offer) throw new CosmosHttpError(404, `offer ${id} does not exist`);
        return resource(200, offer);
      }
      if (method === 'PUT') return resource(200, store.replaceOffer(id, asDoc(body)));
    }
    throw new CosmosHttpError(400, `the emulator does not serve ${method} /offers${id === undefined ? '' : `/${id}`}`);
  }

  private account(host: string | undefined): Doc {
    // Every later request goes to the first location's endpoint, so it must be this server as the client reached it.
    const endpoint = `http://${host ?? '127.0.0.1'}/`;
    const location = [{ name: 'Emulator', databaseAccountEndpoint: endpoint }];
    return {
      id: 'rxfeed-emulator',
      _rid: 'rxfeed-emulator',
      _self: '',
      _dbs: '//dbs/',
      media: '//media/',
      addresses: '//addresses/',
      writableLocations: location,
      readableLocations: location,
      enableMultipleWriteLocations: false,
      userReplicationPolicy: { asyncReplication: false, minReplicaSetSize: 1, maxReplicasetSize: 4 },
      userConsistencyPolicy: { defaultConsistencyLevel: 'Session' },
      systemReplicationPolicy: { minReplicaSetSize: 1, maxReplicasetSize: 4 },
      readPolicy: { primaryReadCoefficient: 1, secondaryReadCoefficient: 1 },
    };
  }

  private partitionKeyRanges(c: ContainerState): Reply {
    const ranges = c.ranges.map((r) => ({
      id: r.id,
      _rid: c.rid,
      minInclusive: r.min,
      maxExclusive: r.max,
      ridPrefix: Number(r.id),
      throughputFraction: 1 / c.ranges.length,
      status: 'online',
      parents: r.parents,
      _self: `${c.resource['_self'] as string}pkranges/${r.id}/`,
      _etag: lsnEtag(r.lsn),
      lsn: r.lsn,
    }));
    return { status: 200, body: { _rid: c.rid, PartitionKeyRanges: ranges, _count: ranges.length }, headers: { 'x-ms-item-count': String(ranges.length) } };
  }

  /**
   * The range a change feed request reads and which of its entries it wants: the range id (plus EPK bounds
   * when the SDK reads a sub-range), or the partition key alone, routed to whichever live range holds it now.
   */
  private scope(c: ContainerState, h: Headers): { range: RangeState; accept: (e: LogEntry) => boolean } {
    const rangeId = header(h, 'x-ms-documentdb-partitionkeyrangeid');
    const pk = partitionKeyOf(h);
    let range: RangeState;
    if (rangeId !== undefined) range = this.ctx.store.range(c, rangeId);
    else if (pk !== undefined) {
      if (pk.length !== c.partitionKey.paths.length) {
        throw new CosmosHttpError(400, 'a partition-key change feed needs the full key; read a key prefix by feed range');
      }
      range = this.ctx.store.rangeOf(c, effectivePartitionKey(pk, c.partitionKey));
    } else if (c.ranges.length === 1) range = c.ranges[0]!;
    else throw new CosmosHttpError(400, 'a change feed request needs x-ms-documentdb-partitionkeyrangeid or x-ms-documentdb-partitionkey');
    const filters: ((e: LogEntry) => boolean)[] = [];
    const start = header(h, 'x-ms-start-epk');
    const end = header(h, 'x-ms-end-epk');
    if (start !== undefined || end !== undefined) {
      const [min, max] = [start ?? range.min, end ?? range.max];
      filters.push((e) => inRange(e.epk, min, max));
    }
    if (pk !== undefined) {
      const keyMatches = partitionKeyMatcher(pk);
      filters.push((e) => keyMatches(e.pk));
    }
    return { range, accept: (e) => filters.every((f) => f(e)) };
  }

  private changeFeed(c: ContainerState, h: Headers): Reply {
    this.ctx.store.expire(c);
    const mode = header(h, 'a-im');
    if (mode !== LATEST_VERSION && mode !== ALL_VERSIONS_AND_DELETES) {
      throw new CosmosHttpError(400, `A-IM must be "${LATEST_VERSION}" or "${ALL_VERSIONS_AND_DELETES}", not "${mode}"`);
    }
    const allVersions = mode === ALL_VERSIONS_AND_DELETES;
    const start = parseStart(header(h, 'if-none-match'), header(h, 'if-modified-since'));
    if (start === 'invalid') throw new CosmosHttpError(400, 'If-None-Match must be *, empty or an etag this emulator returned');
    if (allVersions && this.ctx.strictAllVersionsStart && (start.kind === 'beginning' || start.kind === 'time')) {
      throw new CosmosHttpError(400, 'AllVersionsAndDeletes reads start from now or from a continuation, as in the service');
    }
    const { range, accept } = this.scope(c, h);
    const page = readChanges(range, start, allVersions, maxItems(h, this.ctx.changeFeedPageSize), accept);
    const headers: Record<string, string> = {
      etag: lsnEtag(page.continuationLsn),
      lsn: String(range.lsn),
      'x-ms-session-token': `${range.id}:-1#${range.lsn}`,
    };
    if (page.entries.length === 0) return { status: 304, headers };
    const docs = page.entries.map((e) => (allVersions ? allVersionsItem(e, c.partitionKey) : e.current));
    headers['x-ms-item-count'] = String(docs.length);
    return { status: 200, body: { _rid: c.rid, Documents: docs, _count: docs.length }, headers };
  }

  /**
   * Transactional batch (`x-ms-cosmos-batch-atomic: true`: all or nothing, 207 with the failing operation's
   * status and 424 for the others) and bulk (each operation on its own). Bulk requests are routed by each
   * operation's partition key, not by the range id header, so a bulk sent to a split parent still lands.
   */
  private batch(c: ContainerState, h: Headers, body: unknown): Reply {
    if (!Array.isArray(body) || body.length === 0) throw new CosmosHttpError(400, 'a batch body is a non-empty array of operations');
    if (body.length > 100) throw new CosmosHttpError(400, 'a batch holds at most 100 operations');
    const ops = body as BatchOperation[];
    const headerPk = partitionKeyOf(h);
    const failure = (err: unknown): Doc => {
      const e = err instanceof CosmosHttpError ? err : internalError(err);
      return { statusCode: e.status, ...(e.substatus !== undefined ? { subStatusCode: e.substatus } : {}), message: e.message, requestCharge: 0 };
    };
    if (isTrue(header(h, 'x-ms-cosmos-batch-atomic'))) {
      const results: Doc[] = [];
      try {
        this.ctx.store.atomically(c, () => ops.forEach((op) => results.push(this.batchOperation(c, op, headerPk))));
        return { status: 200, body: results };
      } catch (err) {
        const failed = results.length;
        return { status: 207, body: ops.map((_, i) => (i === failed ? failure(err) : { statusCode: 424, requestCharge: 0 })) };
      }
    }
    const continueOnError = header(h, 'x-ms-cosmos-batch-continue-on-error')?.toLowerCase() !== 'false';
    const results: Doc[] = [];
    let stopped = false;
    for (const op of ops) {
      if (stopped) {
        results.push({ statusCode: 424, requestCharge: 0 });
        continue;
      }
      try {
        results.push(this.batchOperation(c, op, headerPk));
      } catch (err) {
        results.push(failure(err));
        stopped = !continueOnError;
      }
    }
    const anyFailed = results.some((r) => (r['statusCode'] as number) >= 400);
    return { status: anyFailed ? 207 : 200, body: results };
  }

  private batchOperation(c: ContainerState, op: BatchOperation, headerPk: PartitionKeyComponent[] | undefined): Doc {
    const { store } = this.ctx;
    const pk = typeof op.partitionKey === 'string' ? parsePartitionKeyHeader(op.partitionKey) : headerPk;
    const cond = op.ifMatch === undefined ? {} : { ifMatch: op.ifMatch };
    const ok = (statusCode: number, doc?: Doc): Doc =>
      doc ? { statusCode, requestCharge: 1, eTag: doc['_etag'], resourceBody: doc } : { statusCode, requestCharge: 1 };
    const needPk = (): PartitionKeyComponent[] => {
      if (pk === undefined) throw new CosmosHttpError(400, `batch ${op.operationType} of ${op.id} needs a partition key`);
      return pk;
    };
    switch (String(op.operationType).toLowerCase()) {
      case 'create':
      case 'upsert': {
        const upsert = String(op.operationType).toLowerCase() === 'upsert';
        const { doc, created } = store.createDocument(c, op.resourceBody, pk, upsert, cond);
        return ok(created ? 201 : 200, doc);
      }
      case 'read':
        return ok(200, store.readDocument(c, needPk(), String(op.id)));
      case 'replace':
        return ok(200, store.replaceDocument(c, String(op.id), op.resourceBody, pk, cond));
      case 'delete':
        store.deleteDocument(c, String(op.id), needPk(), cond);
        return ok(204);
      case 'patch': {
        const spec = (Array.isArray(op.resourceBody) ? { operations: op.resourceBody } : op.resourceBody) as Doc | undefined;
        if (spec?.['condition'] !== undefined) throw new CosmosHttpError(400, 'the emulator does not evaluate patch conditions inside a batch');
        return ok(200, store.patchDocument(c, String(op.id), needPk(), spec?.['operations'], cond));
      }
      default:
        throw new CosmosHttpError(400, `unknown batch operation type ${String(op.operationType)}`);
    }
  }

  private readFeed(c: ContainerState, h: Headers): Reply {
    const all = this.queryDocuments(c, h);
    const from = Number(header(h, 'x-ms-continuation') ?? 0) || 0;
    const n = maxItems(h, this.ctx.queryPageSize);
    const page = all.slice(from, from + n);
    const headers: Record<string, string> = { 'x-ms-item-count': String(page.length) };
    if (from + n < all.length) headers['x-ms-continuation'] = String(from + n);
    return { status: 200, body: { _rid: c.rid, Documents: page, _count: page.length }, headers };
  }

  private queryDocuments(c: ContainerState, h: Headers): Doc[] {
    const rangeId = header(h, 'x-ms-documentdb-partitionkeyrangeid');
    const pk = partitionKeyOf(h);
    if (rangeId !== undefined) {
      const range = this.ctx.store.range(c, rangeId);
      return this.ctx.store.documents(c, {
        min: header(h, 'x-ms-start-epk') ?? range.min,
        max: header(h, 'x-ms-end-epk') ?? range.max,
        ...(pk ? { pk } : {}),
      });
    }
    return this.ctx.store.documents(c, pk ? { pk } : {});
  }

  private async query(c: ContainerState, h: Headers, body: unknown): Promise<Reply> {
    if (isTrue(header(h, 'x-ms-cosmos-is-query-plan-request'))) {
      // The SDK only uses a plan when the direct query fails; the emulator runs every query whole, so it never does.
      throw new CosmosHttpError(400, 'the emulator runs queries directly and serves no query plans');
    }
    return this.feedQuery('Documents', body, this.queryDocuments(c, h), h, c.rid);
  }

  private async feedQuery(key: string, body: unknown, docs: Doc[], h: Headers, rid = ''): Promise<Reply> {
    const page = await runQuery(body, docs, maxItems(h, this.ctx.queryPageSize), header(h, 'x-ms-continuation'));
    const headers: Record<string, string> = { 'x-ms-item-count': String(page.results.length) };
    if (page.continuation !== undefined) headers['x-ms-continuation'] = page.continuation;
    return { status: 200, body: { _rid: rid, [key]: page.results, _count: page.results.length }, headers };
  }
}

/** One operation of a batch or bulk request, as the SDK serializes it. */
interface BatchOperation {
  operationType: string;
  id?: string;
  resourceBody?: unknown;
  /** The partition key as a JSON array string. */
  partitionKey?: string;
  ifMatch?: string;
}

function feed(key: string, rid: string, items: Doc[]): Reply {
  return { status: 200, body: { _rid: rid, [key]: items, _count: items.length }, headers: { 'x-ms-item-count': String(items.length) } };
}

function resource(status: number, doc: Doc): Reply {
  return { status, body: doc, headers: { etag: String(doc['_etag']) } };
}

function asDoc(body: unknown): Doc {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CosmosHttpError(400, 'the body must be a JSON object');
  return body as Doc;
}

function partitionKeyOf(h: Headers) {
  const raw = header(h, 'x-ms-documentdb-partitionkey');
  return raw === undefined ? undefined : parsePartitionKeyHeader(raw);
}

function conditions(h: Headers): { ifMatch?: string } {
  const ifMatch = header(h, 'if-match');
  return ifMatch === undefined ? {} : { ifMatch };
}

/** The RU/s a container create asks for: manual throughput, or an autoscale maximum. */
function requestedThroughput(h: Headers): number | undefined {
  const manual = Number(header(h, 'x-ms-offer-throughput'));
  if (Number.isFinite(manual) && manual > 0) return manual;
  const autoscale = header(h, 'x-ms-cosmos-offer-autopilot-settings');
  if (autoscale === undefined) return undefined;
  try {
    const max = (JSON.parse(autoscale) as { maxThroughput?: unknown }).maxThroughput;
    return typeof max === 'number' ? max : undefined;
  } catch {
    throw new CosmosHttpError(400, 'x-ms-cosmos-offer-autopilot-settings is not JSON');
  }
}

function maxItems(h: Headers, fallback: number): number {
  const n = Number(header(h, 'x-ms-max-item-count'));
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/** Whether a patch `condition` (`FROM c WHERE …`) holds for the document, evaluated by the SQL engine. */
async function conditionHolds(sql: string, doc: Doc): Promise<boolean> {
  const text = /^\s*select\b/i.test(sql) ? sql : `SELECT VALUE 1 ${sql}`;
  const page = await runQuery({ query: text }, [doc], 1, undefined);
  return page.results.length > 0;
}
