import {
  ChangeFeedMode,
  type ChangeFeedStartFrom,
  type ChangeFeedPullModelIterator,
  type Container,
  type PriorityLevel,
} from '@azure/cosmos';
import type { FeedMode, Partition, Position, StartFrom } from '../core/Partition.js';
import { InvalidOptionsError, TransientError } from '../errors/index.js';
import { abortError, isAbortError, raceAbort } from '../internal/abortWatch.js';
import { logger } from '../internal/log.js';
import { rangeToken } from './cosmos/continuation.js';
import { checkForward } from './cosmos/checkForward.js';
import { containerInfoOf, RID_FRESH_MS, type ContainerInfo } from './cosmos/containerInfo.js';
import { networkCode, routingMapError, toSourceError } from './cosmos/errors.js';
import { endpointOf, HostCheck } from './cosmos/reachability.js';
import { concurrentReadsOf } from './cosmos/agentSockets.js';
import { IteratorCache, registerIteratorCache } from './cosmos/iteratorCache.js';
import { livePartitions } from './cosmos/livePartitions.js';
import { sdkFeedRange } from './cosmos/sdkFeedRange.js';
import { sdkOfContainer } from './cosmos/sdkOfContainer.js';
import { seedIteratorRid } from './cosmos/seedIteratorRid.js';
import { setPageSize } from './cosmos/setPageSize.js';
import { takeRoutingMapFailure } from './cosmos/routingMapCache.js';
import { headerText, toPage, type ReplyMemo } from './cosmos/toPage.js';
import type { Page, ReadRequest, Source } from './Source.js';

/** Options of {@link CosmosSource}. */
export interface CosmosSourceOptions {
  /**
   * Which changes to read. `'latestVersion'` (default) gives the latest version of each changed document
   * and no deletes; `'allVersionsAndDeletes'` gives every create, replace and delete (the container needs
   * continuous backup or a change feed retention policy, and reads can only start from `'now'` or a position).
   */
  readonly mode?: FeedMode;
  /** Name used in logs and errors. Default `dbs/<database>/colls/<container>`. Never put a secret in it. */
  readonly description?: string;
  /**
   * Keep one SDK iterator per partition between reads, so a poll costs one request instead of three
   * (container read + change feed). Default `true`; turn off only to debug.
   */
  readonly reuseIterators?: boolean;
  /** Priority of the change feed requests (`'Low'` lets them yield to the application's traffic). Default: the service default. */
  readonly priorityLevel?: PriorityLevel | `${PriorityLevel}`;
  /**
   * Throughput bucket of the change feed requests (an integer the account's throughput buckets define), so a
   * processor draws from a bucket of its own and cannot starve the application. Default: none.
   */
  readonly throughputBucket?: number;
}

/** A position no partition has: the state of an iterator that has not yet answered. */
const NO_POSITION = '\u0000';

/** An SDK iterator kept between reads of one partition, with what its last reply left (see {@link ReplyMemo}). */
interface CachedIterator extends ReplyMemo {
  readonly iterator: ChangeFeedPullModelIterator<unknown>;
  /** The position the iterator stands at (what the next read continues after). */
  position: Position;
  /** The page size the iterator asks for. */
  maxItemCount: number;
  busy: boolean;
  /** When the iterator was last used (a count of this source's reads): the least recent goes first (see {@link IteratorCache}). */
  usedAt: number;
}

/**
 * The Azure Cosmos DB change feed of one container as an rxfeed {@link Source}: one partition per
 * partition key range, read with the SDK's `getChangeFeedIterator` from a lease's position, in
 * LatestVersion or AllVersionsAndDeletes mode.
 *
 * Positions are the etags the service returns per range (such as `"42"`), the same values the .NET and
 * Java processors store in a lease's `ContinuationToken`. Splits and merges surface as
 * {@link PartitionGoneError} (child partitions continue from the parent's position); a partition whose id is
 * `<min>-<max>` is an EPK range (the lease of a merged partition's part) and is read from whichever range
 * holds it, gone only when its own range is cut. A deleted container surfaces as `ResourceGoneError`,
 * rejected credentials as `CredentialsError`, and throttling or transient failures that outlast the SDK's
 * own retries as {@link TransientError}, including a failed partition key range read that the SDK client
 * cached (it is dropped from the cache, so the next read works).
 *
 * @example
 * ```ts
 * import { CosmosClient } from '@azure/cosmos';
 * import { CosmosSource, CosmosLeaseStore, changeFeed, checkpointEvery } from 'rxfeed';
 * const client = new CosmosClient({ endpoint, key }); // or { endpoint, aadCredentials: new DefaultAzureCredential() }
 * const shop = client.database('shop');
 * changeFeed<Order>({
 *   source: new CosmosSource<Order>(shop.container('orders')),
 *   leases: new CosmosLeaseStore({ container: shop.container('leases') }),
 *   instanceName: 'host-1',
 *   leasePrefix: 'orders-view.',
 * }).pipe(checkpointEvery(1000)).subscribe();
 * ```
 */
export class CosmosSource<T = unknown> implements Source<T> {
  /** {@inheritDoc Source.description} */
  readonly description: string;
  /** {@inheritDoc Source.destination} */
  readonly destination: { readonly system: string; readonly name: string };
  /** {@inheritDoc Source.mode} */
  readonly mode: FeedMode;
  /**
   * How many reads this source serves at once without opening connections it then closes (see
   * {@link Source.concurrentReads}): half the connections the client's HTTP agent keeps alive
   * (`maxFreeSockets`, 256 by default: 128), at most its `maxSockets`; the rest is left to the lease store
   * and the application, which often share the client.
   */
  readonly concurrentReads: number;

  readonly #container: Container;
  readonly #reuseIterators: boolean;
  readonly #priorityLevel: PriorityLevel | undefined;
  readonly #throughputBucket: number | undefined;
  /** One iterator per partition read recently, the least recently used evicted past the bound. */
  readonly #iterators = new IteratorCache<CachedIterator>();
  #info: Promise<ContainerInfo> | undefined;
  /** What `#info` resolved to, for the reads after the first (no await per read). */
  #infoValue: ContainerInfo | undefined;
  readonly #log = logger('cosmos');
  /** The account's host name is looked up before the first request and after network failures. */
  readonly #host: HostCheck;

  /**
   * @param container - the monitored container (any `@azure/cosmos` 4.x client: key, token credential…).
   * @param options - see {@link CosmosSourceOptions}; invalid values throw an `InvalidOptionsError`.
   */
  constructor(container: Container, options: CosmosSourceOptions = {}) {
    if (!container || typeof container.items?.getChangeFeedIterator !== 'function') {
      throw new InvalidOptionsError('container', 'expected an @azure/cosmos Container (client.database(id).container(id))');
    }
    const mode = options.mode ?? 'latestVersion';
    if (mode !== 'latestVersion' && mode !== 'allVersionsAndDeletes') {
      throw new InvalidOptionsError('mode', `expected 'latestVersion' or 'allVersionsAndDeletes', got ${String(mode)}`);
    }
    this.#container = container;
    this.mode = mode;
    this.description = options.description ?? `dbs/${container.database.id}/colls/${container.id}`;
    this.destination = { system: 'azure_cosmosdb', name: container.id };
    this.concurrentReads = concurrentReadsOf(container);
    this.#reuseIterators = options.reuseIterators ?? true;
    if (options.priorityLevel !== undefined && options.priorityLevel !== 'High' && options.priorityLevel !== 'Low') {
      throw new InvalidOptionsError('priorityLevel', `expected 'High' or 'Low', got ${String(options.priorityLevel)}`);
    }
    this.#priorityLevel = options.priorityLevel as PriorityLevel | undefined;
    if (options.throughputBucket !== undefined && (!Number.isInteger(options.throughputBucket) || options.throughputBucket < 1)) {
      throw new InvalidOptionsError('throughputBucket', `must be a positive integer (a bucket of the account), got ${String(options.throughputBucket)}`);
    }
    this.#throughputBucket = options.throughputBucket;
    this.#host = new HostCheck(endpointOf(container), this.description);
    registerIteratorCache(this, this.#iterators);
  }

  /**
   * Checks that the account can be reached at all: rejects within a DNS lookup with a `TransientError`
   * naming `host:port` when the endpoint's host name does not resolve (the SDK itself retries such a host
   * for about two minutes before it reports anything). The change feed calls it when it starts, and reports
   * a failure as an `error` event at once; reads check the same before their first request.
   *
   * @example
   * ```ts
   * await source.checkReachable(); // TransientError: … cannot reach shop.documents.azure.com:443 …
   * ```
   */
  checkReachable(signal?: AbortSignal): Promise<void> {
    return raceAbort(this.#host.check(), signal);
  }

  /**
   * The container's live partition key ranges, in key order, as partitions (`id` = range id).
   *
   * @example
   * ```ts
   * const partitions = await source.listPartitions();
   * console.log(partitions.map((p) => `${p.id}: [${p.range.minInclusive}, ${p.range.maxExclusive})`));
   * ```
   */
  async listPartitions(signal?: AbortSignal): Promise<readonly Partition[]> {
    // Reads of these partitions follow: fetch what the first read needs (the container's rid and key
    // paths) now, alongside, instead of a round trip later. A failure here is met again by that read.
    this.#containerInfo().catch(() => undefined);
    try {
      if (!this.#host.resolved) await raceAbort(this.#host.check(), signal);
      const { resources } = await this.#container
        .readPartitionKeyRanges(signal ? { abortSignal: signal } : {})
        .fetchAll();
      const live = livePartitions(resources);
      // One host may read every range (and parts of merged ones): keep an iterator for each of them. Counted
      // from the live ranges: a listing's parents are mostly gone ranges it does not list.
      this.#iterators.fitTo(live.length);
      return live;
    } catch (err) {
      throw this.#sourceError(err, '*');
    }
  }

  /**
   * Reads one page of one partition's changes.
   *
   * @example
   * ```ts
   * const page = await source.read({ partition, from: { position: lease.continuation }, maxItemCount: 100 });
   * for (const change of page.changes) console.log(change.operation, change.id, change.lsn);
   * ```
   */
  async read(request: ReadRequest): Promise<Page<T>> {
    const { partition, from, maxItemCount, signal } = request;
    if (!Number.isInteger(maxItemCount) || maxItemCount < 1) {
      throw new InvalidOptionsError('maxItemCount', `expected a positive integer, got ${String(maxItemCount)}`);
    }
    this.checkStart(from);
    if (signal?.aborted) throw abortError(signal);

    const key = partition.id;
    let entry = this.#reusable(key, from, maxItemCount);
    try {
      if (!entry && !this.#host.resolved) await raceAbort(this.#host.check(), signal);
      entry ??= await raceAbort(this.#newIterator(partition, from, maxItemCount), signal);
      entry.busy = true;
      const response = await raceAbort(entry.iterator.readNext(), signal);
      const page = toPage<T>(partition, response, entry, this.#infoValue ?? (await this.#containerInfo()), this.mode, this.description);
      checkForward(partition, from, page.position, this.description);
      entry.position = page.position;
      entry.busy = false;
      if (this.#reuseIterators) this.#iterators.remember(key, entry);
      return page;
    } catch (err) {
      // After an abort or a failure the iterator's state is unknown (a request may still land): drop it and
      // start a fresh one from the caller's position next time.
      if (entry) this.#iterators.drop(key, entry);
      if (entry) entry.checked = undefined;
      if (!isAbortError(err) && !signal?.aborted) {
        const mapped = await this.#readError(err, partition.id);
        this.#log(`[lease=${partition.id}] read failed: %s`, mapped instanceof Error ? mapped.message : String(mapped));
        throw mapped;
      }
      throw signal?.aborted ? abortError(signal) : err;
    }
  }

  /**
   * The error a failed read reports. The SDK reports some failures without a status code, among them a
   * failed read of the container's partition key ranges that its client cached for good: that entry is
   * removed (see {@link takeRoutingMapFailure}), so the next read works again, and the original failure
   * decides the error (a 503 becomes a `TransientError`, a 404 a `ResourceGoneError`…).
   */
  async #readError(err: unknown, partitionId: string): Promise<unknown> {
    const mapped = this.#sourceError(err, partitionId);
    if (mapped instanceof TransientError) {
      // The SDK's forced refresh of the ranges after a split answers with the status, but is cached all the same.
      await takeRoutingMapFailure(this.#container);
    }
    if (mapped !== err) return mapped;
    const routing = await takeRoutingMapFailure(this.#container);
    if (routing.kind === 'unreachable') this.#log(`[lease=${partitionId}] cannot check the SDK's partition key range cache (unknown SDK layout)`);
    if (routing.kind !== 'failed') return err;
    this.#log(`[lease=${partitionId}] dropped a failed partition key range read cached by the SDK client`);
    return routingMapError(routing.reason, this.description, partitionId, this.#host.hostPort);
  }

  /**
   * The rxfeed error for a failed request of this source (see {@link toSourceError}); a network failure also
   * has the account's host name looked up again before the next request.
   */
  #sourceError(err: unknown, partitionId: string): unknown {
    if (networkCode(err) !== undefined) this.#host.networkFailed();
    return toSourceError(err, this.description, partitionId, this.#host.hostPort);
  }

  /** Throws an `InvalidOptionsError` when this source cannot start from `from` (AllVersionsAndDeletes: only 'now' or a position). */
  checkStart(from: StartFrom): void {
    if (this.mode !== 'allVersionsAndDeletes') return;
    if (from === 'beginning' || from instanceof Date) {
      throw new InvalidOptionsError(
        'startFrom',
        `allVersionsAndDeletes reads can only start from 'now' or a saved position (the service refuses ${
          from === 'beginning' ? "'beginning'" : 'a point in time'
        }); use startFrom: 'now'`,
      );
    }
  }

  /**
   * The service's current time (see {@link Source.currentTime}): the `Date` header of a container read, which
   * every Cosmos DB response carries (RFC 1123, to the second, so at most a second before the service's
   * clock); `undefined` when the header is missing or unreadable (e.g. a proxy dropped it). Positions for a
   * time compare it with the same service's change timestamps, so this host's clock is never involved.
   *
   * @example
   * ```ts
   * const now = await source.currentTime(); // 2026-11-22T10:15:42.000Z
   * ```
   */
  async currentTime(signal?: AbortSignal): Promise<Date | undefined> {
    if (signal?.aborted) throw abortError(signal);
    try {
      if (!this.#host.resolved) await raceAbort(this.#host.check(), signal);
      const { resource, headers } = await this.#container.read(signal ? { abortSignal: signal } : {});
      // The container's rid and key paths are in the answer: the first read needs them, so keep them.
      if (resource && !this.#info) {
        this.#infoValue = containerInfoOf(resource);
        this.#info = Promise.resolve(this.#infoValue);
      }
      const date = headerText(headers as Record<string, unknown>, 'date');
      const ms = date === undefined ? Number.NaN : Date.parse(date);
      if (Number.isNaN(ms)) {
        this.#log('the container read carried no readable Date header (%s): the service\'s time is unknown', date ?? 'none');
        return undefined;
      }
      return new Date(ms);
    } catch (err) {
      if (isAbortError(err) || signal?.aborted) throw signal?.aborted ? abortError(signal) : err;
      throw this.#sourceError(err, '*');
    }
  }

  /**
   * The position from which a read returns exactly the changes at or after `at` (see {@link Source.positionAt}):
   * the etag just before the first such change, or the partition's current position when there is none.
   *
   * @example
   * ```ts
   * const position = await source.positionAt(partition, new Date('2026-11-22T00:00:00Z'));
   * ```
   */
  async positionAt(partition: Partition, at: 'beginning' | 'now' | Date, signal?: AbortSignal): Promise<Position> {
    const page = await this.read({ partition, from: at, maxItemCount: 1, ...(signal ? { signal } : {}) });
    const first = page.changes[0];
    return first && first.lsn > 0 ? `"${first.lsn - 1}"` : page.position;
  }

  /** The cached iterator for this partition if it stands exactly at the requested position and is idle. */
  #reusable(key: string, from: StartFrom, maxItemCount: number): CachedIterator | undefined {
    if (!this.#reuseIterators || typeof from !== 'object' || from instanceof Date) return undefined;
    const cached = this.#iterators.get(key);
    if (!cached || cached.busy || cached.position !== from.position) return undefined;
    if (cached.maxItemCount !== maxItemCount) {
      if (!setPageSize(cached.iterator, maxItemCount)) return undefined;
      cached.maxItemCount = maxItemCount;
    }
    return cached;
  }

  #containerInfo(): Promise<ContainerInfo> {
    this.#info ??= this.#container.read().then(
      ({ resource }) => {
        if (!resource) throw Object.assign(new Error(`${this.description} not found`), { code: 404 });
        this.#infoValue = containerInfoOf(resource);
        return this.#infoValue;
      },
      (err: unknown) => {
        this.#info = undefined;
        this.#infoValue = undefined;
        throw err;
      },
    );
    return this.#info;
  }

  async #newIterator(partition: Partition, from: StartFrom, maxItemCount: number): Promise<CachedIterator> {
    const info = await this.#containerInfo().catch((err: unknown) => {
      this.#info = undefined;
      this.#infoValue = undefined;
      throw err;
    });
    // The start location must come from the SDK copy that made the container (it checks with instanceof).
    const { ChangeFeedStartFrom } = await sdkOfContainer(this.#container);
    let startFrom: ChangeFeedStartFrom;
    if (from === 'beginning') startFrom = ChangeFeedStartFrom.Continuation(rangeToken(info.rid, partition.range, ''));
    else if (from === 'now') startFrom = ChangeFeedStartFrom.Continuation(rangeToken(info.rid, partition.range, '*'));
    else if (from instanceof Date) startFrom = ChangeFeedStartFrom.Time(from, await sdkFeedRange(this.#container, partition));
    else startFrom = ChangeFeedStartFrom.Continuation(rangeToken(info.rid, partition.range, from.position));
    const iterator = this.#container.items.getChangeFeedIterator<unknown>({
      maxItemCount,
      changeFeedStartFrom: startFrom,
      changeFeedMode: this.mode === 'allVersionsAndDeletes' ? ChangeFeedMode.AllVersionsAndDeletes : ChangeFeedMode.LatestVersion,
      ...(this.#priorityLevel ? { priorityLevel: this.#priorityLevel } : {}),
      ...(this.#throughputBucket !== undefined ? { throughputBucket: this.#throughputBucket } : {}),
    });
    if (performance.now() - info.at <= RID_FRESH_MS) await seedIteratorRid(iterator, info.rid);
    // Every property in the literal: entries keep one shape (no property added later), held by this literal's site.
    return { iterator, position: NO_POSITION, maxItemCount, busy: false, usedAt: 0, checked: undefined, session: undefined };
  }
}
