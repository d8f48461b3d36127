import { jsonBytes, readCharge, writeCharge } from '../charges.js';
import { CosmosHttpError, internalError } from '../errors.js';
import type { PartitionKeyComponent } from '../hash.js';
import { header, isTrue, partitionKeyOf, type Reply } from '../http.js';
import type { OperationFault } from '../faults.js';
import { parsePartitionKeyHeader, type ContainerState, type Doc } from '../store/Store.js';
import type { HandlerContext, RoutedRequest } from './context.js';

/** One operation of a batch or bulk request, as the SDK serializes it. */
interface BatchOperation {
  operationType: string;
  id?: string;
  resourceBody?: unknown;
  /** The partition key as a JSON array string. */
  partitionKey?: string;
  ifMatch?: string;
}

/** An operation failed by a fault (`FaultAction`'s `operations`), as the service answers it inside a batch. */
function injected(fault: OperationFault): Doc {
  return {
    statusCode: fault.status,
    ...(fault.substatus !== undefined ? { subStatusCode: fault.substatus } : {}),
    ...(fault.retryAfterMs !== undefined ? { retryAfterMilliseconds: fault.retryAfterMs } : {}),
    message: `injected fault ${fault.status}`,
    requestCharge: 0,
  };
}

function failure(err: unknown): Doc {
  const e = err instanceof CosmosHttpError ? err : internalError(err);
  return { statusCode: e.status, ...(e.substatus !== undefined ? { subStatusCode: e.substatus } : {}), message: e.message, requestCharge: 0 };
}

function totalCharge(results: Doc[]): number {
  return Math.round(results.reduce((sum, r) => sum + ((r['requestCharge'] as number) ?? 0), 0) * 100) / 100;
}

/**
 * `POST …/docs` with `x-ms-cosmos-is-batch-request`. Transactional batch (`x-ms-cosmos-batch-atomic: true`:
 * all or nothing, 207 with the failing operation's status and 424 for the others) and bulk (each operation
 * on its own). Bulk requests are routed by each operation's partition key, not by the range id header, so a
 * bulk sent to a split parent still lands. The charge is the sum of the operations' charges.
 */
export function batch(ctx: HandlerContext, req: RoutedRequest): Reply {
  const c = ctx.store.container(req.params['db']!, req.params['coll']!);
  const h = req.headers;
  const body = req.body;
  if (!Array.isArray(body) || body.length === 0) throw new CosmosHttpError(400, 'a batch body is a non-empty array of operations');
  if (body.length > 100) throw new CosmosHttpError(400, 'a batch holds at most 100 operations');
  const ops = body as BatchOperation[];
  const headerPk = partitionKeyOf(h);
  const faultOf = (i: number): OperationFault | undefined => req.operationFault?.(i);
  if (isTrue(header(h, 'x-ms-cosmos-batch-atomic'))) {
    // Asked once per operation, in order, up to the first that fails (a fault function may draw from a PRNG).
    let fault: OperationFault | undefined;
    const failed = ops.findIndex((_, i) => (fault = faultOf(i)) !== undefined);
    if (fault) return { status: 207, body: ops.map((_, i) => (i === failed ? injected(fault!) : { statusCode: 424, requestCharge: 0 })), charge: 0 };
    const results: Doc[] = [];
    try {
      ctx.store.atomically(c, () => ops.forEach((op) => results.push(operation(ctx, c, op, headerPk))));
      return { status: 200, body: results, charge: totalCharge(results) };
    } catch (err) {
      const failed = results.length;
      return { status: 207, body: ops.map((_, i) => (i === failed ? failure(err) : { statusCode: 424, requestCharge: 0 })), charge: totalCharge(results) };
    }
  }
  const continueOnError = header(h, 'x-ms-cosmos-batch-continue-on-error')?.toLowerCase() !== 'false';
  const results: Doc[] = [];
  let stopped = false;
  for (const [i, op] of ops.entries()) {
    if (stopped) {
      results.push({ statusCode: 424, requestCharge: 0 });
      continue;
    }
    const fault = faultOf(i);
    if (fault) {
      results.push(injected(fault));
      stopped = !continueOnError;
      continue;
    }
    try {
      results.push(operation(ctx, c, op, headerPk));
    } catch (err) {
      results.push(failure(err));
      stopped = !continueOnError;
    }
  }
  const anyFailed = results.some((r) => (r['statusCode'] as number) >= 400);
  return { status: anyFailed ? 207 : 200, body: results, charge: totalCharge(results) };
}

function operation(ctx: HandlerContext, c: ContainerState, op: BatchOperation, headerPk: PartitionKeyComponent[] | undefined): Doc {
  const { store } = ctx;
  const pk = typeof op.partitionKey === 'string' ? parsePartitionKeyHeader(op.partitionKey) : headerPk;
  const cond = op.ifMatch === undefined ? {} : { ifMatch: op.ifMatch };
  const ok = (statusCode: number, charge: number, doc?: Doc): Doc =>
    doc ? { statusCode, requestCharge: charge, eTag: doc['_etag'], resourceBody: doc } : { statusCode, requestCharge: charge };
  const needPk = (): PartitionKeyComponent[] => {
    if (pk === undefined) throw new CosmosHttpError(400, `batch ${op.operationType} of ${op.id} needs a partition key`);
    return pk;
  };
  const written = (statusCode: number, doc: Doc): Doc => ok(statusCode, writeCharge(jsonBytes(doc)), doc);
  switch (String(op.operationType).toLowerCase()) {
    case 'create':
    case 'upsert': {
      const upsert = String(op.operationType).toLowerCase() === 'upsert';
      const { doc, created } = store.createDocument(c, op.resourceBody, pk, upsert, cond);
      return written(created ? 201 : 200, doc);
    }
    case 'read': {
      const doc = store.readDocument(c, needPk(), String(op.id));
      return ok(200, readCharge(jsonBytes(doc)), doc);
    }
    case 'replace':
      return written(200, store.replaceDocument(c, String(op.id), op.resourceBody, pk, cond));
    case 'delete':
      return ok(204, writeCharge(jsonBytes(store.deleteDocument(c, String(op.id), needPk(), cond))));
    case 'patch': {
      const spec = (Array.isArray(op.resourceBody) ? { operations: op.resourceBody } : op.resourceBody) as Doc | undefined;
      if (spec?.['condition'] !== undefined) throw new CosmosHttpError(400, 'the emulator does not evaluate patch conditions inside a batch');
      return written(200, store.patchDocument(c, String(op.id), needPk(), spec?.['operations'], cond));
    }
    default:
      throw new CosmosHttpError(400, `unknown batch operation type ${String(op.operationType)}`);
  }
}
