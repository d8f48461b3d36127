import { CosmosHttpError } from '../errors.js';
import { lsnEtag } from '../feedReader.js';
import { asDoc, feed, header, resource, type Headers, type Reply } from '../http.js';
import type { HandlerContext, RoutedRequest } from './context.js';
import { feedQuery } from './query.js';

/** `/dbs`: list, query or create databases. */
export function databases(ctx: HandlerContext, req: RoutedRequest): Promise<Reply> | Reply {
  const all = [...ctx.store.databases.values()].map((d) => d.resource);
  if (req.info.kind === 'query') return feedQuery(ctx, 'Databases', req, all);
  if (req.method === 'GET') return feed('Databases', '', all);
  return resource(201, ctx.store.createDatabase(asDoc(req.body)).resource);
}

/** `/dbs/{db}`: read or delete a database. */
export function database(ctx: HandlerContext, req: RoutedRequest): Reply {
  const id = req.params['db']!;
  if (req.method === 'GET') return resource(200, ctx.store.database(id).resource);
  ctx.store.deleteDatabase(id);
  return { status: 204 };
}

/** `/dbs/{db}/colls`: list, query or create containers. */
export function containers(ctx: HandlerContext, req: RoutedRequest): Promise<Reply> | Reply {
  const dbId = req.params['db']!;
  const db = ctx.store.database(dbId);
  const all = [...db.containers.values()].map((c) => c.resource);
  if (req.info.kind === 'query') return feedQuery(ctx, 'DocumentCollections', req, all);
  if (req.method === 'GET') return feed('DocumentCollections', db.rid, all);
  return resource(201, ctx.store.createContainer(dbId, asDoc(req.body), requestedThroughput(req.headers)).resource);
}

/** `/dbs/{db}/colls/{coll}`: read, replace or delete a container. */
export function container(ctx: HandlerContext, req: RoutedRequest): Reply {
  const { db, coll } = req.params as { db: string; coll: string };
  if (req.method === 'GET') return resource(200, ctx.store.container(db, coll).resource);
  if (req.method === 'PUT') return resource(200, ctx.store.replaceContainer(db, coll, asDoc(req.body)).resource);
  ctx.store.deleteContainer(db, coll);
  return { status: 204 };
}

/** `/dbs/{db}/colls/{coll}/pkranges`: the live partition key ranges. */
export function partitionKeyRanges(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = ctx.store.container(req.params['db']!, req.params['coll']!);
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

/** `/offers[/{offer}]`: list, query, read and replace containers' throughput offers. */
export function offers(ctx: HandlerContext, req: RoutedRequest): Promise<Reply> | Reply {
  const id = req.params['offer'];
  if (id === undefined) {
    if (req.method === 'POST') return feedQuery(ctx, 'Offers', req, ctx.store.offers());
    return feed('Offers', '', ctx.store.offers());
  }
  if (req.method === 'PUT') return resource(200, ctx.store.replaceOffer(id, asDoc(req.body)));
  const offer = ctx.store.offers().find((o) => o['id'] === id);
  if (!offer) throw new CosmosHttpError(404, `offer ${id} does not exist`);
  return resource(200, offer);
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
