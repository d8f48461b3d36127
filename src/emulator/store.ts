import { randomUUID } from 'node:crypto';
import { CosmosHttpError, SUBSTATUS } from './errors.js';
import {
  effectivePartitionKey,
  evenBoundaries,
  MAX_EPK,
  midpoint,
  MIN_EPK,
  type PartitionKeyComponent,
  type PartitionKeyDefinition,
} from './hash.js';

/** A JSON document as stored, system properties included. */
export type Doc = Record<string, unknown>;

/** What happened to a document; the names the AllVersionsAndDeletes metadata uses. */
export type Operation = 'create' | 'replace' | 'delete';

/** One write in a range's log: the change feed is a view over these. */
export interface LogEntry {
  readonly lsn: number;
  readonly op: Operation;
  readonly key: string;
  readonly id: string;
  readonly pk: readonly PartitionKeyComponent[];
  readonly epk: string;
  /** The image after the write; absent for deletes. */
  readonly current?: Doc;
  /** The image before the write; absent for creates. */
  readonly previous?: Doc;
  readonly timestampMs: number;
  readonly ttlExpired: boolean;
}

/** A physical partition key range with its own LSN sequence and log. */
export interface RangeState {
  readonly id: string;
  readonly min: string;
  readonly max: string;
  readonly parents: readonly string[];
  lsn: number;
  /** Ordered by LSN (non-decreasing: a merged range interleaves its parents' logs). */
  log: LogEntry[];
  /** Document key → LSN of its newest log entry here, so LatestVersion reads skip superseded entries. */
  latest: Map<string, number>;
}

interface StoredDoc {
  body: Doc;
  pk: PartitionKeyComponent[];
  epk: string;
  /** When the document expires under TTL (ms), if it does. */
  expiresAtMs?: number | undefined;
}

/** A container: its resource body, documents and live ranges. */
export interface ContainerState {
  readonly id: string;
  readonly rid: string;
  resource: Doc;
  readonly partitionKey: PartitionKeyDefinition;
  ranges: RangeState[];
  /** Ranges that were split or merged away; reads addressed to them answer 410/1002. */
  readonly goneRanges: Set<string>;
  readonly docs: Map<string, StoredDoc>;
  nextRangeId: number;
  docCounter: number;
  /** Earliest TTL expiry among the documents (ms), so requests skip the expiry sweep until then. */
  nextExpiryMs: number;
  /** The container's throughput offer (`/offers`). */
  offer: Doc;
}

/** A database and its containers. */
export interface DatabaseState {
  readonly id: string;
  readonly rid: string;
  readonly resource: Doc;
  readonly containers: Map<string, ContainerState>;
  containerCounter: number;
}

/** Conditions a write may carry (`If-Match`). */
export interface WriteConditions {
  ifMatch?: string | undefined;
}

/** Settings the store needs from the emulator. */
export interface StoreSettings {
  now(): number;
  initialRangeCount(databaseId: string, containerId: string): number;
  defaultPartitionKeyVersion: 1 | 2;
}

const DEFAULT_PARTITION_KEY_PATH = '/_partitionKey';

function ridBytes(...ints: number[]): Buffer {
  const b = Buffer.alloc(ints.length * 4);
  ints.forEach((n, i) => b.writeUInt32BE(n >>> 0, i * 4));
  return b;
}

function toRid(b: Buffer): string {
  return b.toString('base64');
}

function newEtag(): string {
  return `"${randomUUID()}"`;
}

function seconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/** Stable text for a partition key value, used to compare keys and to key documents. */
export function partitionKeyText(pk: readonly PartitionKeyComponent[]): string {
  return JSON.stringify(pk.map((v) => (v === undefined ? {} : v)));
}

/** A test for "this key, or a key under this hierarchical prefix" (a shorter key compares only its levels). */
export function partitionKeyMatcher(wanted: readonly PartitionKeyComponent[]): (pk: readonly PartitionKeyComponent[]) => boolean {
  const text = partitionKeyText(wanted);
  return (pk) => partitionKeyText(pk.slice(0, wanted.length)) === text;
}

function docKey(pk: readonly PartitionKeyComponent[], id: string): string {
  return `${partitionKeyText(pk)}\u0000${id}`;
}

/** Splits a partition key path (`/a/b`, `/"odd name"/c`) into property names. */
function pathSegments(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((s) => (s.startsWith('"') && s.endsWith('"') && s.length >= 2 ? s.slice(1, -1) : s));
}

/** The partition key value of a document under a definition; a missing property is "none" (`undefined`). */
export function extractPartitionKey(doc: Doc, definition: PartitionKeyDefinition): PartitionKeyComponent[] {
  return definition.paths.map((p) => {
    let v: unknown = doc;
    for (const seg of pathSegments(p)) {
      if (v === null || typeof v !== 'object') return undefined;
      v = (v as Record<string, unknown>)[seg];
    }
    if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
    return undefined;
  });
}

/** Reads the JSON array of the `x-ms-documentdb-partitionkey` header; `{}` means "none". */
export function parsePartitionKeyHeader(header: string): PartitionKeyComponent[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(header);
  } catch {
    throw new CosmosHttpError(400, `x-ms-documentdb-partitionkey is not JSON: ${header}`);
  }
  if (!Array.isArray(parsed)) throw new CosmosHttpError(400, 'x-ms-documentdb-partitionkey must be a JSON array');
  return parsed.map((v: unknown) => {
    if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
    if (v !== null && typeof v === 'object' && Object.keys(v).length === 0) return undefined;
    throw new CosmosHttpError(400, `partition key component ${JSON.stringify(v)} is not a string, number, boolean or null`);
  });
}

/** The in-memory account: databases, containers, documents and the per-range change logs. */
export class Store {
  readonly databases = new Map<string, DatabaseState>();
  // Counters survive reset() so a recreated database or container gets a new _rid, as in the service.
  private databaseCounter = 0;
  private offerCounter = 0;

  constructor(private readonly settings: StoreSettings) {}

  now(): number {
    return this.settings.now();
  }

  reset(): void {
    this.databases.clear();
  }

  // ---- databases -------------------------------------------------------------------------------------

  createDatabase(body: Doc): DatabaseState {
    const id = body['id'];
    if (typeof id !== 'string' || id === '') throw new CosmosHttpError(400, 'a database needs a non-empty string id');
    if (this.databases.has(id)) throw new CosmosHttpError(409, `database ${id} already exists`);
    const rid = toRid(ridBytes(++this.databaseCounter));
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
    this.databases.set(id, db);
    return db;
  }

  database(id: string): DatabaseState {
    const db = this.databases.get(id);
    if (!db) throw new CosmosHttpError(404, `database ${id} does not exist`);
    return db;
  }

  deleteDatabase(id: string): void {
    this.database(id);
    this.databases.delete(id);
  }

  // ---- containers ------------------------------------------------------------------------------------

  /** Creates a container; `throughput` (RU/s, default 400) only shows in its offer. */
  createContainer(databaseId: string, body: Doc, throughput = 400): ContainerState {
    const db = this.database(databaseId);
    const id = body['id'];
    if (typeof id !== 'string' || id === '') throw new CosmosHttpError(400, 'a container needs a non-empty string id');
    if (db.containers.has(id)) throw new CosmosHttpError(409, `container ${id} already exists in database ${databaseId}`);
    const partitionKey = this.normalizePartitionKey(body['partitionKey']);
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
    const count = this.settings.initialRangeCount(databaseId, id);
    const cuts = [MIN_EPK, ...evenBoundaries(count, partitionKey), MAX_EPK];
    const ranges: RangeState[] = [];
    for (let i = 0; i < count; i++) {
      ranges.push({ id: String(i), min: cuts[i]!, max: cuts[i + 1]!, parents: [], lsn: 0, log: [], latest: new Map() });
    }
    const container: ContainerState = {
      id,
      rid,
      resource,
      partitionKey,
      ranges,
      goneRanges: new Set(),
      docs: new Map(),
      nextRangeId: count,
      docCounter: 0,
      nextExpiryMs: Infinity,
      offer: this.newOffer(resource, rid, throughput),
    };
    db.containers.set(id, container);
    return container;
  }

  private normalizePartitionKey(raw: unknown): PartitionKeyDefinition {
    if (raw === undefined || raw === null) {
      return { paths: [DEFAULT_PARTITION_KEY_PATH], kind: 'Hash', version: this.settings.defaultPartitionKeyVersion };
    }
    const def = raw as Partial<PartitionKeyDefinition>;
    if (!Array.isArray(def.paths) || def.paths.length === 0 || def.paths.some((p) => typeof p !== 'string' || !p.startsWith('/'))) {
      throw new CosmosHttpError(400, 'partitionKey.paths must be a non-empty array of paths starting with "/"');
    }
    const kind = def.kind ?? (def.paths.length > 1 ? 'MultiHash' : 'Hash');
    if (kind === 'Hash' && def.paths.length > 1) {
      throw new CosmosHttpError(400, 'a Hash partition key has exactly one path; use kind "MultiHash" for more');
    }
    const version = kind === 'MultiHash' ? 2 : (def.version ?? this.settings.defaultPartitionKeyVersion);
    return { ...def, paths: def.paths, kind, version };
  }

  private newOffer(container: Doc, containerRid: string, throughput: number): Doc {
    const id = `offer${++this.offerCounter}`;
    return {
      id,
      _rid: id,
      _self: `offers/${id}/`,
      _etag: newEtag(),
      _ts: seconds(this.now()),
      offerVersion: 'V2',
      offerType: 'Invalid',
      resource: container['_self'],
      offerResourceId: containerRid,
      content: { offerThroughput: throughput, offerIsRUPerMinuteThroughputEnabled: false },
    };
  }

  /** Every container's throughput offer. */
  offers(): Doc[] {
    return [...this.databases.values()].flatMap((db) => [...db.containers.values()].map((c) => c.offer));
  }

  /** Replaces an offer's content (the throughput); nothing else about the container changes. */
  replaceOffer(id: string, body: Doc): Doc {
    const c = [...this.databases.values()].flatMap((db) => [...db.containers.values()]).find((x) => x.offer['id'] === id);
    if (!c) throw new CosmosHttpError(404, `offer ${id} does not exist`);
    const content = body['content'];
    if (content === null || typeof content !== 'object') throw new CosmosHttpError(400, 'an offer needs a content object');
    c.offer = { ...c.offer, content, _etag: newEtag(), _ts: seconds(this.now()) };
    return c.offer;
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
    // TTL counts from each document's last write, so a changed defaultTtl re-dates every document.
    c.nextExpiryMs = Infinity;
    for (const d of c.docs.values()) {
      const ttl = effectiveTtl(c, d.body);
      d.expiresAtMs = ttl === undefined ? undefined : (d.body['_ts'] as number) * 1000 + ttl * 1000;
      if (d.expiresAtMs !== undefined) c.nextExpiryMs = Math.min(c.nextExpiryMs, d.expiresAtMs);
    }
    return c;
  }

  deleteContainer(databaseId: string, containerId: string): void {
    this.container(databaseId, containerId);
    this.database(databaseId).containers.delete(containerId);
  }

  // ---- ranges ----------------------------------------------------------------------------------------

  /** The live range with this id; 410/1002 if it was split or merged away, so the SDK refreshes its map. */
  range(c: ContainerState, rangeId: string): RangeState {
    const r = c.ranges.find((x) => x.id === rangeId);
    if (r) return r;
    if (c.goneRanges.has(rangeId)) {
      throw new CosmosHttpError(410, `partition key range ${rangeId} is gone (split or merged)`, SUBSTATUS.partitionKeyRangeGone);
    }
    throw new CosmosHttpError(404, `partition key range ${rangeId} does not exist in container ${c.id}`);
  }

  /** The live range holding an EPK. */
  rangeOf(c: ContainerState, epk: string): RangeState {
    const r = c.ranges.find((x) => inRange(epk, x.min, x.max));
    if (!r) throw new Error(`no range holds EPK ${epk}: the range list has a gap`);
    return r;
  }

  /**
   * Splits a live range in two at `boundary` (default: the median EPK of its documents, or the middle of its
   * hash interval when it holds fewer than two keys). Both children continue the parent's LSN sequence and take
   * the half of its log that falls inside them, so the parent's etags stay valid on either child.
   */
  split(c: ContainerState, rangeId: string, boundary?: string): [RangeState, RangeState] {
    const parent = this.range(c, rangeId);
    const cut = boundary ?? this.defaultBoundary(c, parent);
    if (!(cut > parent.min && cut < parent.max)) {
      throw new Error(`split boundary ${cut} must lie strictly inside range ${rangeId} [${parent.min}, ${parent.max})`);
    }
    const parents = [...parent.parents, parent.id];
    const child = (min: string, max: string): RangeState => {
      const log = parent.log.filter((e) => inRange(e.epk, min, max));
      return { id: String(c.nextRangeId++), min, max, parents, lsn: parent.lsn, log, latest: latestOf(log) };
    };
    const left = child(parent.min, cut);
    const right = child(cut, parent.max);
    this.replaceRanges(c, [parent], [left, right]);
    return [left, right];
  }

  private defaultBoundary(c: ContainerState, r: RangeState): string {
    const epks = [...new Set([...c.docs.values()].map((d) => d.epk).filter((e) => inRange(e, r.min, r.max)))].sort();
    if (epks.length >= 2) return epks[Math.floor(epks.length / 2)]!;
    const mid = midpoint(r.min, r.max, c.partitionKey);
    if (mid === undefined) {
      throw new Error(`range ${r.id} holds fewer than two partition keys; pass a boundary EPK to split it`);
    }
    return mid;
  }

  /**
   * Merges two neighbouring live ranges into one. Its log interleaves both parents' logs by LSN and its
   * sequence continues from the larger parent LSN, so a parent's etag read with that parent's EPK bounds (what
   * the SDK sends after a merge) still means the same position.
   */
  merge(c: ContainerState, leftId: string, rightId: string): RangeState {
    const left = this.range(c, leftId);
    const right = this.range(c, rightId);
    if (left.max !== right.min) throw new Error(`ranges ${leftId} and ${rightId} are not neighbours (${left.max} ≠ ${right.min})`);
    const log = [...left.log, ...right.log].sort((a, b) => a.lsn - b.lsn);
    const merged: RangeState = {
      id: String(c.nextRangeId++),
      min: left.min,
      max: right.max,
      parents: [...left.parents, left.id, ...right.parents, right.id],
      lsn: Math.max(left.lsn, right.lsn),
      log,
      latest: latestOf(log),
    };
    this.replaceRanges(c, [left, right], [merged]);
    return merged;
  }

  private replaceRanges(c: ContainerState, old: RangeState[], added: RangeState[]): void {
    // One synchronous step: the old ids answer 410 exactly when /pkranges starts listing the new ones.
    c.ranges = [...c.ranges.filter((r) => !old.includes(r)), ...added].sort((a, b) => (a.min < b.min ? -1 : 1));
    for (const r of old) c.goneRanges.add(r.id);
  }

  // ---- documents -------------------------------------------------------------------------------------

  /** The partition key a write addresses: the header when sent (it must match the body), else the body's. */
  private writeKey(c: ContainerState, body: Doc, header: PartitionKeyComponent[] | undefined): PartitionKeyComponent[] {
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

  private validateBody(body: unknown): Doc {
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
    const body = this.validateBody(rawBody);
    const pk = this.writeKey(c, body, pkHeader);
    const existing = c.docs.get(docKey(pk, body['id'] as string));
    if (existing && !upsert) throw new CosmosHttpError(409, `a document with id ${String(body['id'])} already exists`);
    if (cond.ifMatch !== undefined && (!existing || existing.body['_etag'] !== cond.ifMatch)) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    return { doc: this.write(c, body, pk, existing), created: !existing };
  }

  replaceDocument(
    c: ContainerState,
    id: string,
    rawBody: unknown,
    pkHeader: PartitionKeyComponent[] | undefined,
    cond: WriteConditions = {},
  ): Doc {
    this.expire(c);
    const body = this.validateBody(rawBody);
    if (body['id'] !== id) throw new CosmosHttpError(400, `the body id ${String(body['id'])} does not match ${id} in the URL`);
    const pk = this.writeKey(c, body, pkHeader);
    const existing = c.docs.get(docKey(pk, id));
    if (!existing) throw new CosmosHttpError(404, `document ${id} does not exist`);
    if (cond.ifMatch !== undefined && existing.body['_etag'] !== cond.ifMatch) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    return this.write(c, body, pk, existing);
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
    return this.write(c, next, pk, existing);
  }

  deleteDocument(c: ContainerState, id: string, pk: PartitionKeyComponent[], cond: WriteConditions = {}): void {
    this.expire(c);
    const key = docKey(pk, id);
    const existing = c.docs.get(key);
    if (!existing) throw new CosmosHttpError(404, `document ${id} does not exist`);
    if (cond.ifMatch !== undefined && existing.body['_etag'] !== cond.ifMatch) {
      throw new CosmosHttpError(412, 'the If-Match etag does not match the document');
    }
    this.remove(c, key, existing, false);
  }

  private write(c: ContainerState, body: Doc, pk: PartitionKeyComponent[], existing: StoredDoc | undefined): Doc {
    const epk = existing?.epk ?? effectivePartitionKey(pk, c.partitionKey);
    const range = this.rangeOf(c, epk);
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
      _lsn: lsn,
    };
    const key = docKey(pk, body['id'] as string);
    const stored: StoredDoc = { body: doc, pk, epk };
    const ttl = effectiveTtl(c, doc);
    if (ttl !== undefined) {
      stored.expiresAtMs = nowMs + ttl * 1000;
      c.nextExpiryMs = Math.min(c.nextExpiryMs, stored.expiresAtMs);
    }
    c.docs.set(key, stored);
    this.append(range, {
      lsn,
      op: existing ? 'replace' : 'create',
      key,
      id: body['id'] as string,
      pk,
      epk,
      current: doc,
      ...(existing ? { previous: existing.body } : {}),
      timestampMs: nowMs,
      ttlExpired: false,
    });
    return doc;
  }

  private remove(c: ContainerState, key: string, existing: StoredDoc, ttlExpired: boolean): void {
    const range = this.rangeOf(c, existing.epk);
    c.docs.delete(key);
    this.append(range, {
      lsn: range.lsn + 1,
      op: 'delete',
      key,
      id: existing.body['id'] as string,
      pk: existing.pk,
      epk: existing.epk,
      previous: existing.body,
      timestampMs: this.now(),
      ttlExpired,
    });
  }

  private append(range: RangeState, entry: LogEntry): void {
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
      if (d.expiresAtMs <= nowMs) this.remove(c, key, d, true);
      else c.nextExpiryMs = Math.min(c.nextExpiryMs, d.expiresAtMs);
    }
  }

  /** Documents of a container, optionally restricted to an EPK interval and a partition key (or key prefix). */
  documents(c: ContainerState, scope: { min?: string; max?: string; pk?: PartitionKeyComponent[] } = {}): Doc[] {
    this.expire(c);
    const keyMatches = scope.pk && partitionKeyMatcher(scope.pk);
    const out: Doc[] = [];
    for (const d of c.docs.values()) {
      if (scope.min !== undefined && !inRange(d.epk, scope.min, scope.max ?? MAX_EPK)) continue;
      if (keyMatches && !keyMatches(d.pk)) continue;
      out.push(d.body);
    }
    return out;
  }
}

const SYSTEM_PROPERTIES = new Set(['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn']);

function effectiveTtl(c: ContainerState, doc: Doc): number | undefined {
  const containerTtl = c.resource['defaultTtl'];
  if (typeof containerTtl !== 'number') return undefined; // TTL off: per-item ttl is ignored, as in the service.
  const itemTtl = doc['ttl'];
  const ttl = typeof itemTtl === 'number' ? itemTtl : containerTtl;
  return ttl === -1 ? undefined : ttl;
}

/** True when `epk` lies in `[min, max)` (plain string order, as the SDK compares EPKs). */
export function inRange(epk: string, min: string, max: string): boolean {
  return epk >= min && epk < max;
}

function latestOf(log: readonly LogEntry[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const e of log) m.set(e.key, e.lsn);
  return m;
}

interface PatchOperation {
  op: string;
  path: string;
  value?: unknown;
  from?: string;
}

function applyPatch(doc: Doc, operations: unknown): Doc {
  if (!Array.isArray(operations) || operations.length === 0) throw new CosmosHttpError(400, 'a patch needs a non-empty operations array');
  for (const raw of operations as PatchOperation[]) {
    if (typeof raw?.path !== 'string' || !raw.path.startsWith('/')) throw new CosmosHttpError(400, 'each patch operation needs a path starting with "/"');
    const op = raw.op.toLowerCase();
    if (op === 'move') {
      if (typeof raw.from !== 'string') throw new CosmosHttpError(400, 'a move needs "from"');
      const { parent, name } = locate(doc, raw.from);
      if (!(name in parent)) throw new CosmosHttpError(400, `move source ${raw.from} does not exist`);
      const value = (parent as Record<string, unknown>)[name];
      delete (parent as Record<string, unknown>)[name];
      setAt(doc, raw.path, value, 'set');
      continue;
    }
    if (op === 'remove') {
      const { parent, name } = locate(doc, raw.path);
      if (Array.isArray(parent)) parent.splice(Number(name), 1);
      else if (name in parent) delete (parent as Record<string, unknown>)[name];
      else throw new CosmosHttpError(400, `cannot remove ${raw.path}: it does not exist`);
      continue;
    }
    if (op === 'incr') {
      const { parent, name } = locate(doc, raw.path);
      const cur = (parent as Record<string, unknown>)[name] ?? 0;
      if (typeof cur !== 'number' || typeof raw.value !== 'number') throw new CosmosHttpError(400, `incr needs numbers at ${raw.path}`);
      (parent as Record<string, unknown>)[name] = cur + raw.value;
      continue;
    }
    if (op !== 'add' && op !== 'set' && op !== 'replace') throw new CosmosHttpError(400, `unknown patch operation ${raw.op}`);
    setAt(doc, raw.path, raw.value, op);
  }
  return doc;
}

function locate(doc: Doc, path: string): { parent: Record<string, unknown> | unknown[]; name: string } {
  const segs = path.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let cur: unknown = doc;
  for (const s of segs.slice(0, -1)) {
    cur = (cur as Record<string, unknown>)?.[s];
    if (cur === null || typeof cur !== 'object') throw new CosmosHttpError(400, `patch path ${path} does not exist`);
  }
  return { parent: cur as Record<string, unknown>, name: segs[segs.length - 1]! };
}

function setAt(doc: Doc, path: string, value: unknown, op: 'add' | 'set' | 'replace'): void {
  const { parent, name } = locate(doc, path);
  if (Array.isArray(parent)) {
    const i = name === '-' ? parent.length : Number(name);
    if (op === 'add') parent.splice(i, 0, value);
    else parent[i] = value;
    return;
  }
  if (op === 'replace' && !(name in parent)) throw new CosmosHttpError(400, `cannot replace ${path}: it does not exist`);
  parent[name] = value;
}
