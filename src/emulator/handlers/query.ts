import { queryCharge } from '../charges.js';
import { CosmosHttpError } from '../errors.js';
import { MAX_EPK, MIN_EPK } from '../hash.js';
import { header, maxItems, partitionKeyOf, type Headers, type Reply } from '../http.js';
import { UnsupportedQueryError } from '../sql/index.js';
import type { ContainerState, Doc, DocumentScope } from '../store/Store.js';
import type { HandlerContext, RoutedRequest } from './context.js';

/** What a query or read feed covers: one range (or EPK sub-range) and/or one partition key, or all. */
function scopeOf(ctx: HandlerContext, c: ContainerState, h: Headers): DocumentScope {
  const rangeId = header(h, 'x-ms-documentdb-partitionkeyrangeid');
  const pk = partitionKeyOf(h);
  if (rangeId === undefined) return pk ? { pk } : {};
  const range = ctx.store.range(c, rangeId);
  return { min: header(h, 'x-ms-start-epk') ?? range.min, max: header(h, 'x-ms-end-epk') ?? range.max, ...(pk ? { pk } : {}) };
}

/** The documents a query or read feed covers, in container order. */
export function documentsInScope(ctx: HandlerContext, c: ContainerState, h: Headers): Doc[] {
  return ctx.store.documents(c, scopeOf(ctx, c, h));
}

/**
 * Runs a query over resources and answers one page of it under `key` (`Documents`, `Databases`…).
 * `snapshot` names the state the documents come from, so later pages reuse the first page's results.
 */
export async function feedQuery(
  ctx: HandlerContext,
  key: string,
  req: RoutedRequest,
  docs: Doc[] | (() => Doc[]),
  rid = '',
  snapshot?: string,
): Promise<Reply> {
  const h = req.headers;
  const page = await ctx.queries.run(req.body, docs, maxItems(h, ctx.queryPageSize), header(h, 'x-ms-continuation'), snapshot);
  const headers: Record<string, string> = { 'x-ms-item-count': String(page.results.length) };
  if (page.continuation !== undefined) headers['x-ms-continuation'] = page.continuation;
  return { status: 200, body: { _rid: rid, [key]: page.results, _count: page.results.length }, headers, charge: (bytes) => queryCharge(page.scanned, bytes) };
}

/**
 * The query plan the SDK asks for (`x-ms-cosmos-is-query-plan-request`) in the shape the service's gateway
 * answers, or `undefined` when the emulator has none for this query: it plans the streaming shapes its
 * built-in evaluator runs (no ORDER BY, TOP or aggregate), whose per-range results the SDK can simply
 * concatenate. Other queries run whole on the gateway path, as before.
 */
function planFor(ctx: HandlerContext, body: unknown): Doc | undefined {
  const spec = body as { query?: unknown } | null;
  if (!spec || typeof spec.query !== 'string') throw new CosmosHttpError(400, 'a query body needs a "query" string');
  const builtin = ctx.queries.builtin(spec.query);
  if (builtin instanceof UnsupportedQueryError || !builtin.streaming) return undefined;
  return {
    partitionedQueryExecutionInfoVersion: 2,
    queryInfo: {
      distinctType: 'None',
      top: null,
      offset: null,
      limit: null,
      orderBy: [],
      orderByExpressions: [],
      groupByExpressions: [],
      groupByAliases: [],
      aggregates: [],
      groupByAliasToAggregateType: {},
      rewrittenQuery: '',
      hasSelectValue: /^\s*select\s+value\b/i.test(spec.query),
      dCountInfo: null,
      hasNonStreamingOrderBy: false,
    },
    queryRanges: [{ min: MIN_EPK, max: MAX_EPK, isMinInclusive: true, isMaxInclusive: false }],
  };
}

/** `POST …/docs` with `x-ms-cosmos-is-query-plan-request`: the plan, or 400 when the emulator has none. */
export function queryPlan(ctx: HandlerContext, req: RoutedRequest): Reply {
  const plan = planFor(ctx, req.body);
  if (!plan) {
    throw new CosmosHttpError(400, 'the emulator serves query plans for queries without ORDER BY, TOP or aggregates; it runs other queries whole');
  }
  return { status: 200, body: plan };
}

/**
 * `POST …/docs` with a query. The service's gateway runs a query over the whole of a container itself when
 * the results of its ranges can simply be concatenated, and refuses the others (ORDER BY, TOP, aggregates…)
 * with 400 and the query plan in `additionalErrorInfo`, so that the SDK queries each range itself. The
 * emulator does the same for the former; it runs the latter whole too, as it can plan only streaming
 * queries. With `crossPartitionQueries: 'client'`, it refuses every query it can plan instead, so that the
 * SDK takes its own per-range path (and follows splits, 410, range by range).
 */
export async function queryDocuments(ctx: HandlerContext, req: RoutedRequest): Promise<Reply> {
  const c = ctx.store.container(req.params['db']!, req.params['coll']!);
  const h = req.headers;
  const wholeContainer = header(h, 'x-ms-documentdb-partitionkeyrangeid') === undefined && partitionKeyOf(h) === undefined;
  if (ctx.crossPartitionQueries === 'client' && wholeContainer && c.ranges.length > 1) {
    const plan = planFor(ctx, req.body);
    if (plan) {
      throw new CosmosHttpError(
        400,
        'The provided cross partition query can not be directly served by the gateway; run it per partition key range with the query plan.',
        undefined,
        {},
        { additionalErrorInfo: JSON.stringify(plan) },
      );
    }
  }
  ctx.store.expire(c);
  const scope = scopeOf(ctx, c, h);
  // Any write (or TTL delete) moves some range's LSN, so the LSNs and the scope name what the query sees.
  const snapshot = `${c.rid}|${c.ranges.map((r) => `${r.id}:${r.lsn}`).join(',')}|${JSON.stringify(scope)}`;
  const page = await ctx.queries.page(req.body, () => ctx.store.positionedDocuments(c, scope), maxItems(h, ctx.queryPageSize), header(h, 'x-ms-continuation'), snapshot);
  const headers: Record<string, string> = { 'x-ms-item-count': String(page.results.length) };
  if (page.continuation !== undefined) headers['x-ms-continuation'] = page.continuation;
  return { status: 200, body: { _rid: c.rid, Documents: page.results, _count: page.results.length }, headers, charge: (bytes) => queryCharge(page.scanned, bytes) };
}
