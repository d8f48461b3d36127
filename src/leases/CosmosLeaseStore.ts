// Public: the lease store in a Cosmos DB container, in the document layout the .NET processor, Azure
// Functions and KEDA read (docs/compatibility.md).
import type { Container, ItemDefinition } from '@azure/cosmos';
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { CorruptLeaseError, CredentialsError, InvalidOptionsError, ResourceGoneError, TransientError } from '../errors/index.js';
import type { Lease, NewLease } from './Lease.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import type { LeaseListing, LeaseStore } from './LeaseStore.js';
import { WriteGroups } from './cosmos/WriteGroups.js';
import { fromDocument, toDocument, tombstoneDocument, tombstoneEpoch } from './protocol/cosmosDocuments.js';

export type { CosmosLeaseDocument, CosmosMarkerDocument, CosmosTombstoneDocument } from './protocol/cosmosDocuments.js';

/** Longest `groupWritesMs`: a renewal that follows a checkpoint closely waits this long at most. */
const MAX_GROUP_WRITES_MS = 1_000;

/**
 * Empty pages in a row after which a lease listing is given up ({@link TransientError}). A listing that ends
 * gets at most one or two per physical partition of the lease container.
 */
const MAX_EMPTY_LISTING_PAGES = 200;

/** Options of {@link CosmosLeaseStore}. */
export interface CosmosLeaseStoreOptions {
  /**
   * The lease container. It must be partitioned on `/id` (recommended) or `/partitionKey` (as the
   * .NET processor accepts, e.g. for Gremlin accounts). Several processors can share it (lease prefixes).
   */
  readonly container: Container;
  /**
   * Create the container (partitioned on `partitionKeyPath`, default `/id`) when it does not exist. The database must exist.
   * Default `false`: a missing container is a {@link ResourceGoneError}.
   */
  readonly createIfMissing?: boolean;
  /**
   * The partition key path the container is expected to have. The container definition is read once either
   * way (the SDK reads it for every write too); a container partitioned otherwise fails the first call with
   * an `InvalidOptionsError`. Default: whichever of the two the container has.
   */
  readonly partitionKeyPath?: '/id' | '/partitionKey';
  /**
   * Lease writes (checkpoints, renewals, takes, releases, a bootstrap's creates) are sent in groups, one
   * bulk request each (up to 100 writes), each write still conditional on its own etag (or on absence, for a
   * create) and answered on its own. Writes issued together leave at once as one group; a write of a lease
   * written less than this many ms ago waits until this long after that write, and leaves together with the
   * writes of other leases due then. Through the SDK a request costs about the same client and server CPU
   * for one write as for forty, so a processor checkpointing many busy partitions pays far less, and a busy
   * partition's checkpoints acknowledged meanwhile coalesce into one write. A group of one is sent as a plain
   * request. 0 sends every write on its own at once. Default 10, at most 1 000.
   */
  readonly groupWritesMs?: number;
  /** Scheduler of the `groupWritesMs` window. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

/**
 * A {@link LeaseStore} over an Azure Cosmos DB container, shared by every process of a processor: the
 * lease container is the whole coordination engine. Writes are conditional on `_etag` (HTTP 412 →
 * {@link LeaseConflictError}); listing is one `STARTSWITH` query on the prefix. Documents under the prefix
 * that are not readable leases are returned in `corrupt`, never overwritten.
 *
 * @example
 * ```ts
 * import { CosmosClient } from '@azure/cosmos';
 * import { CosmosLeaseStore } from 'rxfeed';
 * const container = new CosmosClient({ endpoint, key }).database('shop').container('leases');
 * const leases = new CosmosLeaseStore({ container, createIfMissing: true }); // or new CosmosLeaseStore(container)
 * ```
 */
export class CosmosLeaseStore implements LeaseStore {
  readonly #container: Container;
  readonly #createIfMissing: boolean;
  readonly #statedPath: '/id' | '/partitionKey' | undefined;
  readonly #groups: WriteGroups<Lease> | undefined;
  #ready: Promise<'/id' | '/partitionKey'> | undefined;
  /** `#ready` resolved: the container was checked. */
  #checked = false;
  readonly #chargeListeners = new Set<(operation: string, requestUnits: number) => void>();

  /**
   * @param containerOrOptions the lease container, or all options.
   * @param more further options when the first argument is the container.
   */
  constructor(containerOrOptions: Container | CosmosLeaseStoreOptions, more: Omit<CosmosLeaseStoreOptions, 'container'> = {}) {
    const options: CosmosLeaseStoreOptions =
      containerOrOptions && 'items' in containerOrOptions
        ? { ...more, container: containerOrOptions }
        : (containerOrOptions as CosmosLeaseStoreOptions);
    if (!options?.container || typeof options.container.items !== 'object') {
      throw new InvalidOptionsError('container', 'pass an @azure/cosmos Container, e.g. client.database(db).container(id)');
    }
    const path = options.partitionKeyPath;
    if (path !== undefined && path !== '/id' && path !== '/partitionKey') {
      throw new InvalidOptionsError('partitionKeyPath', "must be '/id' or '/partitionKey'");
    }
    const windowMs = options.groupWritesMs ?? 10;
    if (typeof windowMs !== 'number' || !Number.isFinite(windowMs) || windowMs < 0 || windowMs > MAX_GROUP_WRITES_MS) {
      throw new InvalidOptionsError(
        'groupWritesMs',
        `must be a number of milliseconds from 0 (no grouping) to ${MAX_GROUP_WRITES_MS} (a lease's renewal must not wait long), got ${String(windowMs)}`,
      );
    }
    this.#container = options.container;
    this.#createIfMissing = options.createIfMissing ?? false;
    this.#statedPath = path;
    this.#groups =
      windowMs > 0 && typeof options.container.items.bulk === 'function'
        ? new WriteGroups(options.container, windowMs, options.scheduler ?? asyncScheduler, {
            replace: (id, etag, doc) => this.#replaceOne(id, etag, doc),
            create: (doc) => this.#createOne(doc),
            read: (id) => this.#readDocument(id),
            parse: (doc) => this.#parsed(doc),
            charged: (requestUnits) => this.#charged('lease.bulk', requestUnits),
          })
        : undefined;
  }

  /** {@inheritDoc LeaseStore.list} */
  async list(prefix: string): Promise<LeaseListing> {
    const docs = await this.#alongsideInit(async () => {
      try {
        return await this.#listDocuments(prefix);
      } catch (error) {
        if (statusOf(error) === 404) throw new ResourceGoneError(`lease container ${this.#container.id}`, { cause: error });
        throw mapError(error, `${prefix}*`);
      }
    });
    const leases: Lease[] = [];
    const corrupt: CorruptLeaseError[] = [];
    for (const doc of docs) {
      if (tombstoneEpoch(doc) !== undefined) continue; // a deleted lease's tombstone: no lease
      const parsed = fromDocument(doc);
      if (parsed instanceof CorruptLeaseError) corrupt.push(parsed);
      else leases.push(parsed);
    }
    leases.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { leases, corrupt };
  }

  /**
   * The documents under a prefix, page by page. A listing that keeps getting empty pages without ending
   * fails instead of looping: @azure/cosmos 4.9.x, when it queries range by range (its path for queries the
   * gateway does not run whole), never acts on a 410 (split or merge) it meets there; it asks the gone range
   * again forever, or, after a 410 that did not repeat, spins without I/O once the range is read.
   */
  async #listDocuments(prefix: string): Promise<Record<string, unknown>[]> {
    const query = this.#container.items.query<Record<string, unknown>>({
      query: 'SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)',
      parameters: [{ name: '@prefix', value: prefix }],
    });
    const docs: Record<string, unknown>[] = [];
    let emptyPages = 0;
    while (query.hasMoreResults()) {
      // An empty page comes back with `resources` undefined.
      const { resources, requestCharge } = await query.fetchNext();
      this.#charged('lease.list', requestCharge);
      if (resources !== undefined && resources.length > 0) {
        docs.push(...resources);
        emptyPages = 0;
      } else if (++emptyPages >= MAX_EMPTY_LISTING_PAGES) {
        throw new TransientError(
          `listing leases ${prefix}* got ${emptyPages} empty pages in a row without ending (the lease container may be splitting or merging); retry later`,
          { statusCode: 410 },
        );
      }
    }
    return docs;
  }

  /** {@inheritDoc LeaseStore.read} */
  async read(id: string): Promise<Lease | undefined> {
    const resource = await this.#alongsideInit(() => this.#readDocument(id));
    if (!resource || tombstoneEpoch(resource) !== undefined) return undefined;
    const parsed = fromDocument(resource);
    if (parsed instanceof CorruptLeaseError) throw parsed;
    return parsed;
  }

  /** {@inheritDoc LeaseStore.createIfAbsent} */
  async createIfAbsent(lease: NewLease): Promise<Lease | undefined> {
    const doc = toDocument(lease, await this.#init());
    for (let attempt = 1; ; attempt++) {
      const created = await (this.#groups ? this.#groups.create(doc) : this.#createOne(doc));
      if (created) return created;
      // The id is taken: by a lease (or a marker), or by a tombstone this lease may take the place of.
      const stored = await this.#readDocument(lease.id);
      if (stored !== undefined) {
        const buried = tombstoneEpoch(stored);
        if (buried === undefined || lease.epoch < buried) return undefined;
        try {
          return await this.#replaceOne(lease.id, String(stored._etag), doc);
        } catch (error) {
          // Another write took the tombstone's place first: looked at again (a lease now, most likely).
          if (!(error instanceof LeaseConflictError)) throw error;
        }
      }
      if (attempt >= 5) return undefined; // created and deleted around us each time: someone else has the id
    }
  }

  async #createOne(doc: ItemDefinition): Promise<Lease | undefined> {
    try {
      const { resource, requestCharge } = await this.#container.items.create(doc);
      this.#charged('lease.create', requestCharge);
      return this.#parsed(resource);
    } catch (error) {
      if (statusOf(error) === 409) return undefined;
      throw mapError(error, String(doc.id));
    }
  }

  /** {@inheritDoc LeaseStore.replace} */
  async replace(lease: Lease): Promise<Lease> {
    const doc = toDocument(lease, await this.#init());
    return this.#groups ? this.#groups.replace(lease.id, lease.etag, doc) : this.#replaceOne(lease.id, lease.etag, doc);
  }

  #readDocument(id: string): Promise<Record<string, unknown> | undefined> {
    return this.#call(id, async () => {
      const { resource, requestCharge } = await this.#container.item(id, id).read<Record<string, unknown>>();
      this.#charged('lease.read', requestCharge);
      return resource;
    });
  }

  #replaceOne(id: string, etag: string, doc: ItemDefinition): Promise<Lease> {
    return this.#call(id, async () => {
      const { resource, requestCharge } = await this.#container.item(id, id).replace(doc, { accessCondition: { type: 'IfMatch', condition: etag } });
      this.#charged('lease.replace', requestCharge);
      return this.#parsed(resource);
    });
  }

  /** {@inheritDoc LeaseStore.delete} */
  async delete(lease: Lease): Promise<void> {
    await this.#init();
    await this.#call(lease.id, async () => {
      const { requestCharge } = await this.#container.item(lease.id, lease.id).delete({ accessCondition: { type: 'IfMatch', condition: lease.etag } });
      this.#charged('lease.delete', requestCharge);
    });
  }

  /** {@inheritDoc LeaseStore.tombstone} */
  async tombstone(lease: Lease): Promise<void> {
    const path = await this.#init();
    await this.#call(lease.id, async () => {
      const { requestCharge } = await this.#container
        .item(lease.id, lease.id)
        .replace(tombstoneDocument(lease, path), { accessCondition: { type: 'IfMatch', condition: lease.etag } });
      this.#charged('lease.tombstone', requestCharge);
    });
  }

  /**
   * Calls `listener` with the request units of every request this store sends that the service answered
   * (operations `lease.list`, `lease.read`, `lease.create`, `lease.replace`, `lease.delete`, `lease.tombstone`, `lease.bulk`), so
   * a processor can report what its leases cost. Returns a function that stops the calls.
   *
   * @example
   * ```ts
   * const stop = leases.watchRequestCharges((operation, ru) => console.log(operation, ru));
   * ```
   */
  watchRequestCharges(listener: (operation: string, requestUnits: number) => void): () => void {
    this.#chargeListeners.add(listener);
    return () => this.#chargeListeners.delete(listener);
  }

  #charged(operation: string, requestUnits: number | undefined): void {
    if (requestUnits === undefined || !Number.isFinite(requestUnits)) return;
    for (const listener of this.#chargeListeners) listener(operation, requestUnits);
  }

  #parsed(resource: unknown): Lease {
    const parsed = fromDocument(resource as Record<string, unknown>);
    if (parsed instanceof CorruptLeaseError) throw parsed;
    return parsed;
  }

  async #call<R>(leaseId: string, work: () => Promise<R>): Promise<R> {
    try {
      return await work();
    } catch (error) {
      throw mapError(error, leaseId);
    }
  }

  /**
   * Runs a read-only request (a read or a listing: addressed the same whatever the container's partition key
   * path) alongside the first check of the container ({@link CosmosLeaseStore.#init}) instead of after it: a
   * processor's first lease request (its bootstrap's) then costs one round trip, not two. Its answer is used
   * only once the check passed (the check's failure is the one thrown); if the request failed, it is sent
   * again after the check (which may have created the container it did not find).
   */
  async #alongsideInit<R>(read: () => Promise<R>): Promise<R> {
    if (this.#checked) return read();
    const [init, result] = await Promise.allSettled([this.#init(), read()]);
    if (init.status === 'rejected') throw init.reason;
    return result.status === 'fulfilled' ? result.value : read();
  }

  #init(): Promise<'/id' | '/partitionKey'> {
    this.#ready ??= this.#detect().then(
      (path) => {
        this.#checked = true;
        return path;
      },
      (error: unknown) => {
        this.#ready = undefined; // retry next time (e.g. after a transient error)
        throw error;
      },
    );
    return this.#ready;
  }

  async #detect(): Promise<'/id' | '/partitionKey'> {
    const container = this.#container;
    let definition;
    try {
      ({ resource: definition } = await container.read());
    } catch (error) {
      if (statusOf(error) !== 404) throw mapError(error, container.id);
    }
    if (!definition) {
      if (!this.#createIfMissing) throw new ResourceGoneError(`lease container ${container.id}`);
      const { resource } = await container.database.containers
        .createIfNotExists({ id: container.id, partitionKey: { paths: [this.#statedPath ?? '/id'] } })
        .catch((error: unknown) => {
          throw mapError(error, container.id);
        });
      definition = resource;
    }
    const paths = definition?.partitionKey?.paths ?? ['/id'];
    const path = paths.length === 1 ? paths[0] : undefined;
    if (path !== '/id' && path !== '/partitionKey') {
      // Leases are read by id; in a container partitioned on another path they would be written where no read
      // finds them. No retry fixes this, so the error says what to change.
      throw new InvalidOptionsError(
        'container',
        `lease container ${container.id} is partitioned on ${paths.join(', ')}, but leases are addressed by id: ` +
          `use a lease container partitioned on /id (e.g. containers.createIfNotExists({ id, partitionKey: { paths: ['/id'] } })) ` +
          'or on /partitionKey',
      );
    }
    if (this.#statedPath !== undefined && this.#statedPath !== path) {
      throw new InvalidOptionsError(
        'partitionKeyPath',
        `lease container ${container.id} is partitioned on ${path}, not ${this.#statedPath}: pass partitionKeyPath: '${path}' or leave it out`,
      );
    }
    return path;
  }
}

function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown; statusCode?: unknown })?.code ?? (error as { statusCode?: unknown })?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** Cosmos errors as rxfeed's typed errors; the key never appears in messages. */
function mapError(error: unknown, leaseId: string): unknown {
  if (error instanceof LeaseConflictError || error instanceof CorruptLeaseError) return error;
  const status = statusOf(error);
  if (status === 412) return new LeaseConflictError(leaseId, 'changed');
  if (status === 404) return new LeaseConflictError(leaseId, 'missing');
  if (status === 401 || status === 403) return new CredentialsError(status, { cause: error });
  const retryAfterMs = (error as { retryAfterInMs?: unknown; retryAfterInMilliseconds?: unknown })?.retryAfterInMs;
  const code = (error as { code?: unknown })?.code;
  if (status === 408 || status === 429 || status === 449 || status === 500 || status === 503 || code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'ETIMEDOUT' || (error as Error)?.name === 'TimeoutError') {
    return new TransientError(`lease store request for ${leaseId} failed (${status ?? String(code)}); retry later`, {
      ...(status !== undefined ? { statusCode: status } : {}),
      ...(typeof retryAfterMs === 'number' ? { retryAfterMs } : {}),
      cause: error,
    });
  }
  return error;
}
