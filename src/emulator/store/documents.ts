import { CosmosHttpError, SUBSTATUS } from '../errors.js';
import type { PartitionKeyComponent } from '../hash.js';
import { putDocument, removeDocument } from './changeLog.js';
import { applyPatch } from './patch.js';
import { docKey, extractPartitionKey, partitionKeyText } from './partitionKeys.js';
import type { ContainerState, Doc, StoredDoc, WriteConditions } from './types.js';

// Point reads and writes of a container's documents as the REST API asks for them: the body and partition key
// checked, `If-Match` honoured, expired documents deleted first. Each write goes to the log through ./changeLog.ts.

/** Reads a document by partition key and id; 404 when there is none. */
export function readDocument(c: ContainerState, pk: PartitionKeyComponent[], id: string, now: () => number): Doc {
  expireDocuments(c, now);
  return stored(c, docKey(pk, id), id).body;
}

/** Create (`upsert` false) or upsert a document; tells whether it was created. */
export function createDocument(
  c: ContainerState,
  rawBody: unknown,
  pkHeader: PartitionKeyComponent[] | undefined,
  upsert: boolean,
  cond: WriteConditions,
  now: () => number,
): { doc: Doc; created: boolean } {
  expireDocuments(c, now);
  const body = validateBody(rawBody);
  const pk = writeKey(c, body, pkHeader);
  const existing = c.docs.get(docKey(pk, body['id'] as string));
  if (existing && !upsert) throw new CosmosHttpError(409, `a document with id ${String(body['id'])} already exists`);
  checkIfMatch(existing, cond);
  return { doc: putDocument(c, body, pk, existing, now), created: !existing };
}

/** Replaces a document; its body's id must be the one in the URL. */
export function replaceDocument(
  c: ContainerState,
  id: string,
  rawBody: unknown,
  pkHeader: PartitionKeyComponent[] | undefined,
  cond: WriteConditions,
  now: () => number,
): Doc {
  expireDocuments(c, now);
  const body = validateBody(rawBody);
  if (body['id'] !== id) throw new CosmosHttpError(400, `the body id ${String(body['id'])} does not match ${id} in the URL`);
  const pk = writeKey(c, body, pkHeader);
  const existing = stored(c, docKey(pk, id), id);
  checkIfMatch(existing, cond);
  return putDocument(c, body, pk, existing, now);
}

/** Applies a JSON patch (`add`, `set`, `replace`, `remove`, `incr`, `move`) to a stored document. */
export function patchDocument(
  c: ContainerState,
  id: string,
  pk: PartitionKeyComponent[],
  operations: unknown,
  cond: WriteConditions,
  condition: ((doc: Doc) => boolean) | undefined,
  now: () => number,
): Doc {
  expireDocuments(c, now);
  const existing = stored(c, docKey(pk, id), id);
  checkIfMatch(existing, cond);
  if (condition && !condition(existing.body)) throw new CosmosHttpError(412, 'the patch condition is false for this document');
  const next = applyPatch(structuredClone(existing.body), operations);
  if (next['id'] !== id) throw new CosmosHttpError(400, 'a patch cannot change the id');
  if (partitionKeyText(extractPartitionKey(next, c.partitionKey)) !== partitionKeyText(pk)) {
    throw new CosmosHttpError(400, 'a patch cannot change the partition key', SUBSTATUS.partitionKeyMismatch);
  }
  return putDocument(c, next, pk, existing, now);
}

/** Deletes a document and returns what it was. */
export function deleteDocument(c: ContainerState, id: string, pk: PartitionKeyComponent[], cond: WriteConditions, now: () => number): Doc {
  expireDocuments(c, now);
  const key = docKey(pk, id);
  const existing = stored(c, key, id);
  checkIfMatch(existing, cond);
  removeDocument(c, key, existing, false, now);
  return existing.body;
}

/** Deletes documents whose TTL has run out; each becomes a delete with `timeToLiveExpired` in the log. */
export function expireDocuments(c: ContainerState, now: () => number): void {
  const nowMs = now();
  if (nowMs < c.nextExpiryMs) return;
  c.nextExpiryMs = Infinity;
  for (const [key, d] of c.docs) {
    if (d.expiresAtMs === undefined) continue;
    if (d.expiresAtMs <= nowMs) removeDocument(c, key, d, true, now);
    else c.nextExpiryMs = Math.min(c.nextExpiryMs, d.expiresAtMs);
  }
}

/** The document stored under `key`; 404 (naming `id`) when there is none. */
function stored(c: ContainerState, key: string, id: string): StoredDoc {
  const d = c.docs.get(key);
  if (!d) throw new CosmosHttpError(404, `document ${id} does not exist`);
  return d;
}

/** 412 unless the write's `If-Match` (if any) is the etag of the document it replaces. */
function checkIfMatch(existing: StoredDoc | undefined, cond: WriteConditions): void {
  if (cond.ifMatch !== undefined && (!existing || existing.body['_etag'] !== cond.ifMatch)) {
    throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
  }
}

/** The partition key a write addresses: the header when sent (it must match the body), else the body's. */
function writeKey(c: ContainerState, body: Doc, header: PartitionKeyComponent[] | undefined): PartitionKeyComponent[] {
  const fromBody = extractPartitionKey(body, c.partitionKey);
  if (header !== undefined && partitionKeyText(header) !== partitionKeyText(fromBody)) {
    throw new CosmosHttpError(
      400,
      `the partition key ${partitionKeyText(header)} in the header does not match ${partitionKeyText(fromBody)} in the document`,
      SUBSTATUS.partitionKeyMismatch,
    );
  }
  return fromBody;
}

function validateBody(body: unknown): Doc {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CosmosHttpError(400, 'the document must be a JSON object');
  const id = (body as Doc)['id'];
  if (typeof id !== 'string' || id === '') throw new CosmosHttpError(400, 'the document needs a non-empty string id');
  if (/[/\\?#]/.test(id)) throw new CosmosHttpError(400, `the id ${JSON.stringify(id)} contains one of / \\ ? #`);
  if (id.length > 1023) throw new CosmosHttpError(400, 'the id is longer than 1023 characters');
  return body as Doc;
}
