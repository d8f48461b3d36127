import { CosmosHttpError, SUBSTATUS } from '../errors.js';
import { effectivePartitionKey, MAX_EPK, type PartitionKeyComponent } from '../hash.js';
import { newEtag, ridBytes, seconds, toRid } from './ids.js';
import { Offers } from './offers.js';
import { applyPatch } from './patch.js';
import { docKey, extractPartitionKey, normalizePartitionKey, partitionKeyMatcher, partitionKeyText } from './partitionKeys.js';
import { inRange, initialRanges, latestOf, mergeRanges, rangeById, rangeOf, splitRange } from './ranges.js';
import { effectiveTtl, redateExpiries } from './ttl.js';
import type { ContainerState, DatabaseState, Doc, LogEntry, RangeState, StoredDoc, WriteConditions } from './types.js';

export type { ContainerState, DatabaseState, Doc, LogEntry, Operation, RangeState, WriteConditions } from './types.js';
export { extractPartitionKey, parsePartitionKeyHeader, partitionKeyMatcher, partitionKeyText } from './partitionKeys.js';
export { inRange } from './ranges.js';

/** Which documents a read covers: an EPK interval and/or a partition key (or key prefix). */
export interface DocumentScope {
  min?: string;
  max?: string;
  pk?: PartitionKeyComponent[];
}

/** A document and its place in the container: its EPK, then its key (partition key and id). */
export interface PositionedDoc {
  epk: string;
  key: string;
  body: Doc;
}

/** Container order: by EPK, then by key. */
export function comparePositions(a: { epk: string; key: string }, b: { epk: string; key: string }): number {
  if (a.epk !== b.epk) return a.epk < b.epk ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** Settings the store needs from the emulator. */
export interface StoreSettings {
  now(): number;
  /** Ranges a new container starts with, given the throughput it asked for (RU/s; `undefined` when none). */
  initialRangeCount(databaseId: string, containerId: string, throughput: number | undefined): number;
  defaultPartitionKeyVersion: 1 | 2;
}

/** Throughput a container gets when its create asks for none (RU/s). */
const DEFAULT_THROUGHPUT = 400;

/**
 * The in-memory account: databases, containers and their documents with the per-range change logs. Partition
 * keys, ranges (split, merge), offers, TTL and patch live in `./store/`; this class keeps them consistent.
 */
export class Store {
  readonly #databases = new Map<string, DatabaseState>();
  // Counters survive reset() so a recreated database or container gets a new _rid, as in the service.
  #databaseCounter = 0;
  readonly #settings: StoreSettings;
  readonly #offers: Offers;

  constructor(settings: StoreSettings) {
    this.#settings = settings;
    this.#offers = new Offers(() => settings.now());
  }

  /** Every database, by id. */
  get databases(): ReadonlyMap<string, DatabaseState> {
    return this.#databases;
  }

  now(): number {
    return this.#settings.now();
  }

  reset(): void {
    this.#databases.clear();
  }

  // ---- databases -------------------------------------------------------------------------------------

  createDatabase(body: Doc): DatabaseState {
    const id = body['id'];
    if (typeof id !== 'string' || id === '') throw new CosmosHttpError(400, 'a database needs a non-empty string id');
    if (this.#databases.has(id)) throw new CosmosHttpError(409, `database ${id} already exists`);
    const rid = toRid(ridBytes(++this.#databaseCounter));
    const resource: Doc = {
      ...body,
      id,
      _rid: rid,
      _self: `dbs/${rid}/`,
      _etag: newEtag(),
      _colls: 'colls/',
      _users: 'users/',
      _ts: seconds(this.now()),
    };
    const db: DatabaseState = { id, rid, resource, containers: new Map(), containerCounter: 0 };
    this.#databases.set(id, db);
    return db;
  }

  database(id: string): DatabaseState {
    const db = this.#databases.get(id);
    if (!db) throw new CosmosHttpError(404, `database ${id} does not exist`);
    return db;
  }

  deleteDatabase(id: string): void {
    this.database(id);
    this.#databases.delete(id);
  }

  // ---- containers ------------------------------------------------------------------------------------

  /**
   * Creates a container. `throughput` (RU/s, manual or the autoscale maximum) shows in its offer (400 when
   * not given) and, through `initialRangeCount`, decides how many ranges it starts with.
   */
  createContainer(databaseId: string, body: Doc, throughput?: number): ContainerState {
    const db = this.database(databaseId);
    const id = body['id'];
    if (typeof id !== 'string' || id === '') throw new CosmosHttpError(400, 'a container needs a non-empty string id');
    if (db.containers.has(id)) throw new CosmosHttpError(409, `container ${id} already exists in database ${databaseId}`);
    const partitionKey = normalizePartitionKey(body['partitionKey'], this.#settings.defaultPartitionKeyVersion);
    const ridBuf = Buffer.concat([Buffer.from(db.rid, 'base64'), ridBytes(0x80000000 | ++db.containerCounter)]);
    const rid = toRid(ridBuf);
    const resource: Doc = {
      indexingPolicy: { indexingMode: 'consistent', automatic: true, includedPaths: [{ path: '/*' }], excludedPaths: [] },
      ...body,
      id,
      partitionKey,
      _rid: rid,
      _self: `dbs/${db.rid}/colls/${rid}/`,
      _etag: newEtag(),
      _docs: 'docs/',
      _sprocs: 'sprocs/',
      _triggers: 'triggers/',
      _udfs: 'udfs/',
      _conflicts: 'conflicts/',
      _ts: seconds(this.now()),
    };
    const count = this.#settings.initialRangeCount(databaseId, id, throughput);
    const container: ContainerState = {
      id,
      rid,
      resource,
      partitionKey,
      ranges: initialRanges(count, partitionKey),
      goneRanges: new Set(),
      docs: new Map(),
      nextRangeId: count,
      docCounter: 0,
      nextExpiryMs: Infinity,
      offer: this.#offers.create(resource, rid, throughput ?? DEFAULT_THROUGHPUT),
    };
    db.containers.set(id, container);
    return container;
  }

  #containers(): ContainerState[] {
    return [...this.#databases.values()].flatMap((db) => [...db.containers.values()]);
  }

  /** Every container's throughput offer. */
  offers(): Doc[] {
    return this.#containers().map((c) => c.offer);
  }

  /** Replaces an offer's content (the throughput); nothing else about the container changes. */
  replaceOffer(id: string, body: Doc): Doc {
    return this.#offers.replace(this.#containers(), id, body);
  }

  container(databaseId: string, containerId: string): ContainerState {
    const c = this.database(databaseId).containers.get(containerId);
    if (!c) throw new CosmosHttpError(404, `container ${containerId} does not exist in database ${databaseId}`);
    return c;
  }

  replaceContainer(databaseId: string, containerId: string, body: Doc): ContainerState {
    const c = this.container(databaseId, containerId);
    if (body['id'] !== containerId) throw new CosmosHttpError(400, 'the body id must match the container id in the URL');
    const system = Object.fromEntries(Object.entries(c.resource).filter(([k]) => k.startsWith('_')));
    // The partition key cannot change; everything else (TTL, indexing, change feed policy) can.
    c.resource = { ...body, ...system, partitionKey: c.partitionKey, _etag: newEtag(), _ts: seconds(this.now()) };
    redateExpiries(c);
    return c;
  }

  deleteContainer(databaseId: string, containerId: string): void {
    this.container(databaseId, containerId);
    this.database(databaseId).containers.delete(containerId);
  }

  // ---- ranges ----------------------------------------------------------------------------------------

  /** The live range with this id; 410/1002 if it was split or merged away, so the SDK refreshes its map. */
  range(c: ContainerState, rangeId: string): RangeState {
    return rangeById(c, rangeId);
  }

  /** The live range holding an EPK. */
  rangeOf(c: ContainerState, epk: string): RangeState {
    return rangeOf(c, epk);
  }

  /** Splits a live range in two; see {@link splitRange}. */
  split(c: ContainerState, rangeId: string, boundary?: string): [RangeState, RangeState] {
    return splitRange(c, rangeId, boundary);
  }

  /** Merges two neighbouring live ranges; see {@link mergeRanges}. */
  merge(c: ContainerState, leftId: string, rightId: string): RangeState {
    return mergeRanges(c, leftId, rightId);
  }

  // ---- documents -------------------------------------------------------------------------------------

  /** The partition key a write addresses: the header when sent (it must match the body), else the body's. */
  #writeKey(c: ContainerState, body: Doc, header: PartitionKeyComponent[] | undefined): PartitionKeyComponent[] {
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

  #validateBody(body: unknown): Doc {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CosmosHttpError(400, 'the document must be a JSON object');
    const id = (body as Doc)['id'];
    if (typeof id !== 'string' || id === '') throw new CosmosHttpError(400, 'the document needs a non-empty string id');
    if (/[/\\?#]/.test(id)) throw new CosmosHttpError(400, `the id ${JSON.stringify(id)} contains one of / \\ ? #`);
    if (id.length > 1023) throw new CosmosHttpError(400, 'the id is longer than 1023 characters');
    return body as Doc;
  }

  readDocument(c: ContainerState, pk: PartitionKeyComponent[], id: string): Doc {
    this.expire(c);
    const d = c.docs.get(docKey(pk, id));
    if (!d) throw new CosmosHttpError(404, `document ${id} does not exist`);
    return d.body;
  }

  /** Create (`upsert` false) or upsert a document; tells whether it was created. */
  createDocument(
    c: ContainerState,
    rawBody: unknown,
    pkHeader: PartitionKeyComponent[] | undefined,
    upsert: boolean,
    cond: WriteConditions = {},
  ): { doc: Doc; created: boolean } {
    this.expire(c);
    const body = this.#validateBody(rawBody);
    const pk = this.#writeKey(c, body, pkHeader);
    const existing = c.docs.get(docKey(pk, body['id'] as string));
    if (existing && !upsert) throw new CosmosHttpError(409, `a document with id ${String(body['id'])} already exists`);
    if (cond.ifMatch !== undefined && (!existing || existing.body['_etag'] !== cond.ifMatch)) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    return { doc: this.#write(c, body, pk, existing), created: !existing };
  }

  replaceDocument(
    c: ContainerState,
    id: string,
    rawBody: unknown,
    pkHeader: PartitionKeyComponent[] | undefined,
    cond: WriteConditions = {},
  ): Doc {
    this.expire(c);
    const body = this.#validateBody(rawBody);
    if (body['id'] !== id) throw new CosmosHttpError(400, `the body id ${String(body['id'])} does not match ${id} in the URL`);
    const pk = this.#writeKey(c, body, pkHeader);
    const existing = c.docs.get(docKey(pk, id));
    if (!existing) throw new CosmosHttpError(404, `document ${id} does not exist`);
    if (cond.ifMatch !== undefined && existing.body['_etag'] !== cond.ifMatch) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    return this.#write(c, body, pk, existing);
  }

  /** Applies a JSON patch (`add`, `set`, `replace`, `remove`, `incr`, `move`) to a stored document. */
  patchDocument(
    c: ContainerState,
    id: string,
    pk: PartitionKeyComponent[],
    operations: unknown,
    cond: WriteConditions = {},
    condition?: (doc: Doc) => boolean,
  ): Doc {
    this.expire(c);
    const existing = c.docs.get(docKey(pk, id));
    if (!existing) throw new CosmosHttpError(404, `document ${id} does not exist`);
    if (cond.ifMatch !== undefined && existing.body['_etag'] !== cond.ifMatch) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    if (condition && !condition(existing.body)) throw new CosmosHttpError(412, 'the patch condition is false for this document');
    const next = applyPatch(structuredClone(existing.body), operations);
    if (next['id'] !== id) throw new CosmosHttpError(400, 'a patch cannot change the id');
    if (partitionKeyText(extractPartitionKey(next, c.partitionKey)) !== partitionKeyText(pk)) {
      throw new CosmosHttpError(400, 'a patch cannot change the partition key', SUBSTATUS.partitionKeyMismatch);
    }
    return this.#write(c, next, pk, existing);
  }

  /** Deletes a document and returns what it was. */
  deleteDocument(c: ContainerState, id: string, pk: PartitionKeyComponent[], cond: WriteConditions = {}): Doc {
    this.expire(c);
    const key = docKey(pk, id);
    const existing = c.docs.get(key);
    if (!existing) throw new CosmosHttpError(404, `document ${id} does not exist`);
    if (cond.ifMatch !== undefined && existing.body['_etag'] !== cond.ifMatch) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    this.#remove(c, key, existing, false);
    return existing.body;
  }

  #write(c: ContainerState, body: Doc, pk: PartitionKeyComponent[], existing: StoredDoc | undefined): Doc {
    // `_lsn` is not part of the document: the service adds it only to the copies the change feed serves.
    const epk = existing?.epk ?? effectivePartitionKey(pk, c.partitionKey);
    const range = rangeOf(c, epk);
    const nowMs = this.now();
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
    this.#append(range, {
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

  #remove(c: ContainerState, key: string, existing: StoredDoc, ttlExpired: boolean): void {
    const range = rangeOf(c, existing.epk);
    c.docs.delete(key);
    this.#append(range, {
      lsn: range.lsn + 1,
      op: 'delete',
      key,
      id: existing.body['id'] as string,
      pk: existing.pk,
      epk: existing.epk,
      previous: existing.body,
      previousLsn: existing.lsn,
      timestampMs: this.now(),
      ttlExpired,
    });
  }

  #append(range: RangeState, entry: LogEntry): void {
    range.lsn = entry.lsn;
    range.log.push(entry);
    range.latest.set(entry.key, entry.lsn);
  }

  /**
   * Runs `fn` so that if it throws, the container's documents and logs are exactly as before: the undo for
   * transactional batches. Everything here is synchronous, so no other request ever sees the partial state.
   */
  atomically<T>(c: ContainerState, fn: () => T): T {
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

  /** Deletes documents whose TTL has run out; each becomes a delete with `timeToLiveExpired` in the log. */
  expire(c: ContainerState): void {
    const nowMs = this.now();
    if (nowMs < c.nextExpiryMs) return;
    c.nextExpiryMs = Infinity;
    for (const [key, d] of c.docs) {
      if (d.expiresAtMs === undefined) continue;
      if (d.expiresAtMs <= nowMs) this.#remove(c, key, d, true);
      else c.nextExpiryMs = Math.min(c.nextExpiryMs, d.expiresAtMs);
    }
  }

  /** Documents of a container, optionally restricted to an EPK interval and a partition key (or key prefix). */
  documents(c: ContainerState, scope: DocumentScope = {}): Doc[] {
    return this.positionedDocuments(c, scope).map((d) => d.body);
  }

  /**
   * The same documents, each with the place it holds whatever the ranges are (its EPK, then its key), in the
   * container's order: a position in this order stays valid across splits and merges.
   */
  positionedDocuments(c: ContainerState, scope: DocumentScope = {}): PositionedDoc[] {
    this.expire(c);
    const keyMatches = scope.pk && partitionKeyMatcher(scope.pk);
    const out: PositionedDoc[] = [];
    for (const [key, d] of c.docs) {
      if (scope.min !== undefined && !inRange(d.epk, scope.min, scope.max ?? MAX_EPK)) continue;
      if (keyMatches && !keyMatches(d.pk)) continue;
      out.push({ epk: d.epk, key, body: d.body });
    }
    return out.sort(comparePositions);
  }
}

const SYSTEM_PROPERTIES = new Set(['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn']);
