import type { RequestInfo, RequestKind } from './faults.js';
import { readAccount } from './handlers/account.js';
import { batch } from './handlers/batch.js';
import { readChangeFeed } from './handlers/changeFeed.js';
import type { HandlerContext, RoutedRequest } from './handlers/context.js';
import { createDocument, deleteDocument, patchDocument, readDocument, readFeed, replaceDocument } from './handlers/documents.js';
import { queryDocuments, queryPlan } from './handlers/query.js';
import { container, containers, database, databases, offers, partitionKeyRanges } from './handlers/resources.js';
import { header, isQuery, isTrue, type Headers, type Reply } from './http.js';

/** One entry of the routing table: which requests it takes and what answers them. */
interface Route {
  method: string;
  /** Path segments; `:name` matches any one segment and names it. */
  path: readonly string[];
  /** Further condition on the headers; routes are tried in order, so the more specific comes first. */
  when?: (h: Headers) => boolean;
  kind: RequestKind;
  handle(ctx: HandlerContext, req: RoutedRequest): Reply | Promise<Reply>;
}

const DBS = ['dbs'];
const DB = ['dbs', ':db'];
const COLLS = ['dbs', ':db', 'colls'];
const COLL = ['dbs', ':db', 'colls', ':coll'];
const DOCS = ['dbs', ':db', 'colls', ':coll', 'docs'];
const DOC = ['dbs', ':db', 'colls', ':coll', 'docs', ':doc'];

const ROUTES: readonly Route[] = [
  { method: 'GET', path: [], kind: 'account', handle: (_ctx, req) => readAccount(req) },
  { method: 'POST', path: ['offers'], when: isQuery, kind: 'offer', handle: offers },
  { method: 'GET', path: ['offers'], kind: 'offer', handle: offers },
  { method: 'GET', path: ['offers', ':offer'], kind: 'offer', handle: offers },
  { method: 'PUT', path: ['offers', ':offer'], kind: 'offer', handle: offers },
  { method: 'POST', path: DBS, when: isQuery, kind: 'query', handle: databases },
  { method: 'GET', path: DBS, kind: 'database', handle: databases },
  { method: 'POST', path: DBS, kind: 'database', handle: databases },
  { method: 'GET', path: DB, kind: 'database', handle: database },
  { method: 'DELETE', path: DB, kind: 'database', handle: database },
  { method: 'POST', path: COLLS, when: isQuery, kind: 'query', handle: containers },
  { method: 'GET', path: COLLS, kind: 'container', handle: containers },
  { method: 'POST', path: COLLS, kind: 'container', handle: containers },
  { method: 'GET', path: COLL, kind: 'container', handle: container },
  { method: 'PUT', path: COLL, kind: 'container', handle: container },
  { method: 'DELETE', path: COLL, kind: 'container', handle: container },
  { method: 'GET', path: [...COLL, 'pkranges'], kind: 'pkranges', handle: partitionKeyRanges },
  { method: 'GET', path: DOCS, when: (h) => header(h, 'a-im') !== undefined, kind: 'changeFeed', handle: readChangeFeed },
  { method: 'GET', path: DOCS, kind: 'readFeed', handle: readFeed },
  { method: 'POST', path: DOCS, when: (h) => isTrue(header(h, 'x-ms-cosmos-is-batch-request')), kind: 'batch', handle: batch },
  { method: 'POST', path: DOCS, when: (h) => isTrue(header(h, 'x-ms-cosmos-is-query-plan-request')), kind: 'queryPlan', handle: queryPlan },
  { method: 'POST', path: DOCS, when: isQuery, kind: 'query', handle: queryDocuments },
  { method: 'POST', path: DOCS, when: (h) => isTrue(header(h, 'x-ms-documentdb-is-upsert')), kind: 'upsert', handle: createDocument },
  { method: 'POST', path: DOCS, kind: 'create', handle: createDocument },
  { method: 'GET', path: DOC, kind: 'read', handle: readDocument },
  { method: 'PUT', path: DOC, kind: 'replace', handle: replaceDocument },
  { method: 'PATCH', path: DOC, kind: 'patch', handle: patchDocument },
  { method: 'DELETE', path: DOC, kind: 'delete', handle: deleteDocument },
];

function matchPath(pattern: readonly string[], seg: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== seg.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    if (p.startsWith(':')) params[p.slice(1)] = seg[i]!;
    else if (p !== seg[i]) return undefined;
  }
  return params;
}

/** A request matched against the routing table: what it is (for faults and the log) and, if served, its route. */
export interface Match {
  info: RequestInfo;
  params: Record<string, string>;
  route: Route | undefined;
}

/** Classifies a request by the routing table; `/_emulator/…` is `admin`, an unserved one `unknown`. */
export function matchRequest(method: string, seg: readonly string[], h: Headers): Match {
  const info: RequestInfo = { method, path: '/' + seg.join('/'), kind: 'unknown' };
  if (seg[0] === '_emulator') return { info: { ...info, kind: 'admin' }, params: {}, route: undefined };
  if (seg[0] === 'dbs') {
    if (seg[1] !== undefined) info.databaseId = seg[1];
    if (seg[3] !== undefined) info.containerId = seg[3];
    const rangeId = header(h, 'x-ms-documentdb-partitionkeyrangeid');
    if (rangeId !== undefined) info.rangeId = rangeId;
  }
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const params = matchPath(route.path, seg);
    if (params === undefined || (route.when && !route.when(h))) continue;
    return { info: { ...info, kind: route.kind }, params, route };
  }
  return { info, params: {}, route: undefined };
}
