import { CosmosHttpError } from '../errors.js';
import type { PartitionKeyComponent } from '../hash.js';
import { atomically } from './changeLog.js';
import { documentsInScope, type DocumentScope, type PositionedDoc } from './documentScans.js';
import { createDocument, deleteDocument, expireDocuments, patchDocument, readDocument, replaceDocument } from './documents.js';
import { newEtag, ridBytes, seconds, toRid } from './ids.js';
import { Offers } from './offers.js';
import { normalizePartitionKey } from './partitionKeys.js';
import { initialRanges, mergeRanges, rangeById, rangeOf, splitRange } from './ranges.js';
import { redateExpiries } from './ttl.js';
import type { ContainerState, DatabaseState, Doc, RangeState, WriteConditions } from './types.js';

export type { ContainerState, DatabaseState, Doc, LogEntry, Operation, RangeState, WriteConditions } from './types.js';
export { comparePositions, type DocumentScope, type PositionedDoc } from './documentScans.js';
export { extractPartitionKey, parsePartitionKeyHeader, partitionKeyMatcher, partitionKeyText } from './partitionKeys.js';
export { inRange } from './ranges.js';

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
 * The in-memory account: databases and containers, and the one door to their documents and ranges. What happens to
 * documents lives beside it in `./store/`: point reads and writes (documents.ts), the per-range change logs every
 * write appends to (changeLog.ts), scoped reads (documentScans.ts), partition key ranges, splits and merges
 * (ranges.ts), partition keys, offers, TTL and patch.
 */
export class Store {
  readonly #databases = new Map<string, DatabaseState>();
  // Counters survive reset() so a recreated database or container gets a new _rid, as in the service.
  #databaseCounter = 0;
  readonly #settings: StoreSettings;
  readonly #offers: Offers;
  /** The emulator's clock (ms), as the document modules take it. */
  readonly #now: () => number;

  constructor(settings: StoreSettings) {
    this.#settings = settings;
    this.#now = () => settings.now();
    this.#offers = new Offers(this.#now);
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

  // ---- documents (see documents.ts, changeLog.ts, documentScans.ts) ------------------------------------

  readDocument(c: ContainerState, pk: PartitionKeyComponent[], id: string): Doc {
    return readDocument(c, pk, id, this.#now);
  }

  /** Create (`upsert` false) or upsert a document; tells whether it was created. */
  createDocument(
    c: ContainerState,
    rawBody: unknown,
    pkHeader: PartitionKeyComponent[] | undefined,
    upsert: boolean,
    cond: WriteConditions = {},
  ): { doc: Doc; created: boolean } {
    return createDocument(c, rawBody, pkHeader, upsert, cond, this.#now);
  }

  replaceDocument(
    c: ContainerState,
    id: string,
    rawBody: unknown,
    pkHeader: PartitionKeyComponent[] | undefined,
    cond: WriteConditions = {},
  ): Doc {
    return replaceDocument(c, id, rawBody, pkHeader, cond, this.#now);
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
    return patchDocument(c, id, pk, operations, cond, condition, this.#now);
  }

  /** Deletes a document and returns what it was. */
  deleteDocument(c: ContainerState, id: string, pk: PartitionKeyComponent[], cond: WriteConditions = {}): Doc {
    return deleteDocument(c, id, pk, cond, this.#now);
  }

  /**
   * Runs `fn` so that if it throws, the container's documents and logs are exactly as before: the undo for
   * transactional batches.
   */
  atomically<T>(c: ContainerState, fn: () => T): T {
    return atomically(c, fn);
  }

  /** Deletes documents whose TTL has run out; each becomes a delete with `timeToLiveExpired` in the log. */
  expire(c: ContainerState): void {
    expireDocuments(c, this.#now);
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
    return documentsInScope(c, scope);
  }
}
