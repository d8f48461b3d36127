import { queryCharge, readCharge, writeCharge, jsonBytes } from '../charges.js';
import { CosmosHttpError } from '../errors.js';
import { asDoc, conditions, header, maxItems, partitionKeyOf, resource, type Reply } from '../http.js';
import type { ContainerState, Doc } from '../store/Store.js';
import type { HandlerContext, RoutedRequest } from './context.js';
import { documentsInScope } from './query.js';

function containerOf(ctx: HandlerContext, req: RoutedRequest): ContainerState {
  return ctx.store.container(req.params['db']!, req.params['coll']!);
}

/** `POST …/docs`: create, or upsert with `x-ms-documentdb-is-upsert`. */
export function createDocument(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = containerOf(ctx, req);
  const upsert = req.info.kind === 'upsert';
  const { doc, created } = ctx.store.createDocument(c, req.body, partitionKeyOf(req.headers), upsert, conditions(req.headers));
  return resource(created ? 201 : 200, doc, writeCharge);
}

/** `GET …/docs`: read the documents of the container (or of one range or key) page by page. */
export function readFeed(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = containerOf(ctx, req);
  const h = req.headers;
  const all = documentsInScope(ctx, c, h);
  const from = Number(header(h, 'x-ms-continuation') ?? 0) || 0;
  const n = maxItems(h, ctx.queryPageSize);
  const page = all.slice(from, from + n);
  const headers: Record<string, string> = { 'x-ms-item-count': String(page.length) };
  if (from + n < all.length) headers['x-ms-continuation'] = String(from + n);
  return { status: 200, body: { _rid: c.rid, Documents: page, _count: page.length }, headers, charge: (bytes) => queryCharge(page.length, bytes) };
}

function pointKey(req: RoutedRequest, c: ContainerState) {
  const pk = partitionKeyOf(req.headers);
  if (pk === undefined) throw new CosmosHttpError(400, `point operations on ${c.id} need the x-ms-documentdb-partitionkey header`);
  return pk;
}

/** `GET …/docs/{id}`: a point read, 304 when `If-None-Match` names the current etag. */
export function readDocument(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = containerOf(ctx, req);
  const doc = ctx.store.readDocument(c, pointKey(req, c), req.params['doc']!);
  const ifNoneMatch = header(req.headers, 'if-none-match');
  if (ifNoneMatch !== undefined && ifNoneMatch === doc['_etag']) return { status: 304, headers: { etag: ifNoneMatch }, charge: readCharge(0) };
  return resource(200, doc, readCharge);
}

/** `PUT …/docs/{id}`: replace. */
export function replaceDocument(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = containerOf(ctx, req);
  pointKey(req, c);
  return resource(200, ctx.store.replaceDocument(c, req.params['doc']!, req.body, partitionKeyOf(req.headers), conditions(req.headers)), writeCharge);
}

/** `PATCH …/docs/{id}`: a bare operations array, or `{operations, condition}` when there is a condition. */
export async function patchDocument(ctx: HandlerContext, req: RoutedRequest): Promise<Reply> {
  const c = containerOf(ctx, req);
  const pk = pointKey(req, c);
  const id = req.params['doc']!;
  const spec = Array.isArray(req.body) ? { operations: req.body } : asDoc(req.body);
  let condition: ((doc: Doc) => boolean) | undefined;
  if (typeof spec['condition'] === 'string') {
    const before = ctx.store.readDocument(c, pk, id);
    const holds = await conditionHolds(ctx, spec['condition'], before);
    // A write that landed while the condition was evaluated makes the answer stale: fail the precondition.
    condition = (doc) => doc === before && holds;
  }
  return resource(200, ctx.store.patchDocument(c, id, pk, spec['operations'], conditions(req.headers), condition), writeCharge);
}

/** `DELETE …/docs/{id}`. */
export function deleteDocument(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = containerOf(ctx, req);
  const removed = ctx.store.deleteDocument(c, req.params['doc']!, pointKey(req, c), conditions(req.headers));
  return { status: 204, charge: writeCharge(jsonBytes(removed)) };
}

/** Whether a patch `condition` (`FROM c WHERE …`) holds for the document, evaluated by the SQL engine. */
async function conditionHolds(ctx: HandlerContext, sql: string, doc: Doc): Promise<boolean> {
  const text = /^\s*select\b/i.test(sql) ? sql : `SELECT VALUE 1 ${sql}`;
  const page = await ctx.queries.run({ query: text }, [doc], 1, undefined);
  return page.results.length > 0;
}
