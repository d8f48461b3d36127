import { effectivePartitionKey, type PartitionKeyComponent } from '../hash.js';
import { newEtag, ridBytes, seconds, toRid } from './ids.js';
import { docKey } from './partitionKeys.js';
import { latestOf, rangeOf } from './ranges.js';
import { effectiveTtl } from './ttl.js';
import type { ContainerState, Doc, LogEntry, RangeState, StoredDoc } from './types.js';

/** Properties the store sets on every document it writes: a body's own values for them are dropped. */
const SYSTEM_PROPERTIES = new Set(['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn']);

/**
 * Stores a new version of a document (created when there is no `existing` one, else replaced) and appends the write
 * to the log of the range that holds it; returns the document as stored, with its system properties.
 */
export function putDocument(c: ContainerState, body: Doc, pk: PartitionKeyComponent[], existing: StoredDoc | undefined, now: () => number): Doc {
  // `_lsn` is not part of the document: the service adds it only to the copies the change feed serves.
  const epk = existing?.epk ?? effectivePartitionKey(pk, c.partitionKey);
  const range = rangeOf(c, epk);
  const nowMs = now();
  const lsn = range.lsn + 1;
  const rid = existing
    ? (existing.body['_rid'] as string)
    : toRid(Buffer.concat([Buffer.from(c.rid, 'base64'), ridBytes(0, ++c.docCounter)]));
  const user = Object.fromEntries(Object.entries(body).filter(([k]) => !SYSTEM_PROPERTIES.has(k)));
  const doc: Doc = {
    ...user,
    _rid: rid,
    _self: `${c.resource['_self'] as string}docs/${rid}/`,
    _etag: newEtag(),
    _attachments: 'attachments/',
    _ts: seconds(nowMs),
  };
  const key = docKey(pk, body['id'] as string);
  const stored: StoredDoc = { body: doc, lsn, pk, epk };
  const ttl = effectiveTtl(c, doc);
  if (ttl !== undefined) {
    stored.expiresAtMs = nowMs + ttl * 1000;
    c.nextExpiryMs = Math.min(c.nextExpiryMs, stored.expiresAtMs);
  }
  c.docs.set(key, stored);
  appendChange(range, {
    lsn,
    op: existing ? 'replace' : 'create',
    key,
    id: body['id'] as string,
    pk,
    epk,
    current: doc,
    ...(existing ? { previous: existing.body, previousLsn: existing.lsn } : {}),
    timestampMs: nowMs,
    ttlExpired: false,
  });
  return doc;
}

/** Removes the document stored under `key` and appends its delete (a TTL expiry when `ttlExpired`) to its range's log. */
export function removeDocument(c: ContainerState, key: string, existing: StoredDoc, ttlExpired: boolean, now: () => number): void {
  const range = rangeOf(c, existing.epk);
  c.docs.delete(key);
  appendChange(range, {
    lsn: range.lsn + 1,
    op: 'delete',
    key,
    id: existing.body['id'] as string,
    pk: existing.pk,
    epk: existing.epk,
    previous: existing.body,
    previousLsn: existing.lsn,
    timestampMs: now(),
    ttlExpired,
  });
}

function appendChange(range: RangeState, entry: LogEntry): void {
  range.lsn = entry.lsn;
  range.log.push(entry);
  range.latest.set(entry.key, entry.lsn);
}

/**
 * Runs `fn` so that if it throws, the container's documents and logs are exactly as before: the undo for
 * transactional batches. Everything here is synchronous, so no other request ever sees the partial state.
 */
export function atomically<T>(c: ContainerState, fn: () => T): T {
  const docs = new Map(c.docs);
  const marks = c.ranges.map((r) => ({ r, lsn: r.lsn, length: r.log.length }));
  try {
    return fn();
  } catch (err) {
    c.docs.clear();
    for (const [k, v] of docs) c.docs.set(k, v);
    for (const m of marks) {
      if (m.r.log.length === m.length) continue;
      m.r.log.length = m.length;
      m.r.lsn = m.lsn;
      m.r.latest = latestOf(m.r.log);
    }
    throw err;
  }
}
