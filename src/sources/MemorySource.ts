import { abortError } from '../internal/abortWatch.js';
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { FeedMode, Partition, Position } from '../core/Partition.js';
import { InvalidOptionsError, PartitionGoneError, RxfeedError } from '../errors/index.js';
import { DocumentStore, documentId, type StoredDocument } from './memory/documents.js';
import { ReadFaults, type MemoryFaults } from './memory/faults.js';
import { hashKey, keyToHex } from './memory/keySpace.js';
import { collectPage, firstToRead, positionAtOrAfter, positionOf, type Entry } from './memory/log.js';
import { PartitionTopology } from './memory/topology.js';
import type { Page, ReadRequest, Source } from './Source.js';

export type { MemoryFault, MemoryFaults } from './memory/faults.js';

/** Options of {@link MemorySource}. */
export interface MemorySourceOptions {
  /** Number of partitions at start (ids `"0"` … `"N-1"`). Default 4. */
  readonly partitions?: number;
  /** Which changes reads deliver. Default `'latestVersion'`. */
  readonly mode?: FeedMode;
  /** Clock for change timestamps, in ms since the epoch. Default `Date.now`. */
  readonly now?: () => number;
  /** Scheduler for injected latency. Default `asyncScheduler` (so fake timers drive it). */
  readonly scheduler?: SchedulerLike;
  /** Name used in logs. Default `'memory'`. */
  readonly description?: string;
  /**
   * Reads of a split or merged partition still answer the changes it held until a read reaches its last one,
   * and only then throw {@link PartitionGoneError} (as a feed whose routing information lags the split does).
   * Default `false`: a gone partition throws at once.
   */
  readonly drainGone?: boolean;
}

/** Options of one write to a {@link MemorySource}. */
export interface MemoryWriteOptions {
  /** Partition key value; routes the document. Default: the document id. */
  readonly partitionKey?: unknown;
}

/** Options of a delete from a {@link MemorySource}. */
export interface MemoryDeleteOptions extends MemoryWriteOptions {
  /** Marks the delete as a time-to-live expiry. Default false. */
  readonly timeToLiveExpired?: boolean;
}

/** Where a write landed. */
export interface MemoryWriteResult {
  /** Id of the partition that holds the document now. */
  readonly partition: string;
  /** LSN of the change in that partition. */
  readonly lsn: number;
  /**
   * The effective partition key the document's partition key hashes to, in upper-case hex as feed ranges are
   * written (`''` is the start of the key space): the change belongs to every range with
   * `minInclusive <= effectivePartitionKey < maxExclusive`, e.g. to a lease over part of a partition.
   */
  readonly effectivePartitionKey: string;
}

/**
 * An in-memory, partitioned change feed: for tests, examples and benchmarks.
 *
 * In short: write documents, and read them back as pages of changes per partition, with splits and
 * injected faults that behave the way the Cosmos DB change feed does.
 *
 * Documents are routed to partitions by a hash of their partition key (default: their id). Each partition
 * numbers its changes with its own LSN. In `'latestVersion'` mode a read returns only the latest version of
 * each document (as `upsert`) and no deletes; in `'allVersionsAndDeletes'` mode it returns every create,
 * replace and delete, deletes with the previous image. Reads are a binary search away from any position,
 * so large backlogs are cheap.
 *
 * @example
 * ```ts
 * import { MemorySource } from 'rxfeed';
 * const source = new MemorySource<{ id: string; n: number }>({ partitions: 4 });
 * source.write({ id: 'a', n: 1 });
 * source.split('0'); // partition 0 is gone; two children continue its log
 * source.merge('1', '2'); // adjacent partitions 1 and 2 are gone; one child holds both logs
 * ```
 * @see {@link Source}
 */
export class MemorySource<T = unknown> implements Source<T> {
  /** {@inheritDoc Source.description} */
  readonly description: string;
  /** {@inheritDoc Source.mode} */
  readonly mode: FeedMode;
  /** Fault injection for reads. */
  readonly faults: MemoryFaults;

  readonly #now: () => number;
  readonly #topology: PartitionTopology<T>;
  readonly #documents = new DocumentStore<T>();
  readonly #faults: ReadFaults;
  readonly #drainGone: boolean;
  #writes = 0;

  constructor(options: MemorySourceOptions = {}) {
    const count = options.partitions ?? 4;
    if (!Number.isInteger(count) || count < 1 || count > 1024) {
      throw new InvalidOptionsError('partitions', `expected an integer from 1 to 1024, got ${String(count)}`);
    }
    const mode = options.mode ?? 'latestVersion';
    if (mode !== 'latestVersion' && mode !== 'allVersionsAndDeletes') {
      throw new InvalidOptionsError('mode', `expected 'latestVersion' or 'allVersionsAndDeletes', got ${String(mode)}`);
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new InvalidOptionsError('now', 'expected a function returning ms since the epoch');
    }
    this.mode = mode;
    this.description = options.description ?? 'memory';
    this.#now = options.now ?? Date.now;
    this.#drainGone = options.drainGone ?? false;
    this.#topology = new PartitionTopology(count);
    this.#faults = new ReadFaults(options.scheduler ?? asyncScheduler);
    this.faults = this.#faults.controls;
  }

  /** Total number of changes written (creates, replaces, deletes). */
  get writes(): number {
    return this.#writes;
  }

  /** {@inheritDoc Source.listPartitions} */
  async listPartitions(signal?: AbortSignal): Promise<readonly Partition[]> {
    if (signal?.aborted) throw abortError(signal);
    return this.partitions();
  }

  /** The live partitions, synchronously. */
  partitions(): readonly Partition[] {
    return this.#topology.live.map((p) => p.partition);
  }

  /** Latest LSN of a partition (live or gone), 0 before any write. */
  latestLsn(partitionId: string): number {
    return this.#topology.get(partitionId).lsn;
  }

  /** Id of the live partition a partition key (or id) routes to. */
  partitionFor(partitionKey: unknown): string {
    return this.#topology.route(hashKey(partitionKey)).partition.id;
  }

  /** Creates or replaces a document (same as {@link MemorySource.upsert}). */
  write(document: T, options: MemoryWriteOptions = {}): MemoryWriteResult {
    return this.upsert(document, options);
  }

  /** Writes many documents at once. */
  writeMany(documents: Iterable<T>, options: MemoryWriteOptions = {}): void {
    for (const document of documents) this.upsert(document, options);
  }

  /** Creates or replaces a document. */
  upsert(document: T, options: MemoryWriteOptions = {}): MemoryWriteResult {
    const id = documentId(document);
    const pk = options.partitionKey ?? id;
    const existing = this.#documents.get(id, pk);
    return this.#append(id, pk, existing ? 'replace' : 'create', document, existing);
  }

  /** Creates a document; throws when one with the same id and partition key exists. */
  create(document: T, options: MemoryWriteOptions = {}): MemoryWriteResult {
    const id = documentId(document);
    const pk = options.partitionKey ?? id;
    if (this.#documents.has(id, pk)) throw new RxfeedError(`document ${id} already exists`);
    return this.#append(id, pk, 'create', document, undefined);
  }

  /** Replaces a document; throws when it does not exist. */
  replace(document: T, options: MemoryWriteOptions = {}): MemoryWriteResult {
    const id = documentId(document);
    const pk = options.partitionKey ?? id;
    const existing = this.#documents.get(id, pk);
    if (!existing) throw new RxfeedError(`document ${id} does not exist`);
    return this.#append(id, pk, 'replace', document, existing);
  }

  /** Deletes a document; throws when it does not exist. */
  delete(id: string, options: MemoryDeleteOptions = {}): MemoryWriteResult {
    const pk = options.partitionKey ?? id;
    const existing = this.#documents.get(id, pk);
    if (!existing) throw new RxfeedError(`document ${id} does not exist`);
    return this.#append(id, pk, 'delete', undefined, existing, options.timeToLiveExpired);
  }

  /** The current version of a document, if it exists. */
  get(id: string, options: MemoryWriteOptions = {}): T | undefined {
    return this.#documents.get(id, options.partitionKey ?? id)?.document;
  }

  /**
   * Splits a live partition in two at the middle of its range. The parent is gone (reads of it throw
   * {@link PartitionGoneError}); the children get new ids, the parent's log filtered to their ranges, and
   * continue its LSN numbering, so a position read from the parent is valid in both children.
   *
   * @returns the two children.
   */
  split(partitionId: string): readonly [Partition, Partition] {
    const [left, right] = this.#topology.split(partitionId);
    return [left.partition, right.partition];
  }

  /**
   * Merges two adjacent live partitions into one, as Cosmos DB merges partition key ranges. Both parents are
   * gone; the child (a new id, listing both as `parents`) covers their two ranges and holds both logs, and
   * its LSNs continue above the higher of theirs, so a position read from either parent stays valid for that
   * parent's part of the child. A lease of a parent then goes on as an EPK-range lease: a partition whose id
   * is unknown and whose `range` lies inside one live partition is read as that part of it (only the changes
   * of keys in the range), and is gone only when no one live partition covers its range any more.
   *
   * @example
   * ```ts
   * const source = new MemorySource({ partitions: 2 });
   * const merged = source.merge('0', '1'); // { id: '2', range: { minInclusive: '', maxExclusive: 'FF' }, parents: ['0', '1'] }
   * ```
   * @returns the merged child.
   */
  merge(leftId: string, rightId: string): Partition {
    return this.#topology.merge(leftId, rightId).partition;
  }

  /** {@inheritDoc Source.read} */
  async read(request: ReadRequest): Promise<Page<T>> {
    const { signal } = request;
    if (signal?.aborted) throw abortError(signal);
    const epk = this.#topology.epk(request.partition);
    const target = epk?.target ?? this.#topology.get(request.partition.id);
    await this.#faults.apply(request.partition.id, signal);
    if (epk === null) throw new PartitionGoneError(request.partition.id);
    const max = request.maxItemCount;
    if (!Number.isInteger(max) || max < 1) throw new RxfeedError(`maxItemCount must be a positive integer, got ${max}`);
    const inRange = epk ? (e: Entry<T>) => e.key >= epk.min && e.key < epk.max : () => true;
    const latestOnly = this.mode === 'latestVersion';

    if (request.from === 'now') {
      if (target.gone) throw new PartitionGoneError(target.partition.id);
      return { changes: [], position: positionOf(target.lsn), latestLsn: target.lsn };
    }
    const start = firstToRead(target, request.from);
    // A gone partition answers what it held until it is read to the end (with `drainGone`), then is gone.
    if (target.gone && !(this.#drainGone && start < target.log.length)) throw new PartitionGoneError(target.partition.id);

    const changes = collectPage(target.log, start, max, (entry) => inRange(entry) && !(latestOnly && (entry.superseded || entry.deleted)));
    // A full page resumes after its last change; otherwise everything up to the end was scanned (including
    // entries this mode hides), so the position is the partition's latest LSN.
    const lsn = changes.length >= max ? changes[changes.length - 1]!.lsn : target.lsn;
    return { changes, position: positionOf(lsn), latestLsn: target.lsn };
  }

  /**
   * This source's current time: its `now` clock, the one that stamps its changes (see {@link Source.currentTime}).
   * Taken when called; a change written afterwards is stamped at or after it.
   *
   * @example
   * ```ts
   * const start = await source.positionAt(partition, await source.currentTime());
   * ```
   */
  currentTime(): Promise<Date> {
    return Promise.resolve(new Date(this.#now()));
  }

  /**
   * The position from which a read returns exactly the changes at or after `at` (see {@link Source.positionAt}).
   *
   * @example
   * ```ts
   * const position = await source.positionAt(partition, new Date(Date.now() - 60_000));
   * ```
   */
  async positionAt(partition: Partition, at: 'beginning' | 'now' | Date): Promise<Position> {
    const epk = this.#topology.epk(partition);
    if (epk === null) throw new PartitionGoneError(partition.id);
    const target = epk?.target ?? this.#topology.get(partition.id);
    if (target.gone) throw new PartitionGoneError(target.partition.id);
    if (at === 'now') return positionOf(target.lsn);
    return positionAtOrAfter(target, at);
  }

  #append(
    id: string,
    partitionKey: unknown,
    operation: 'create' | 'replace' | 'delete',
    document: T | undefined,
    existing: StoredDocument<T> | undefined,
    timeToLiveExpired?: boolean,
  ): MemoryWriteResult {
    const key = hashKey(partitionKey);
    const target = this.#topology.route(key);
    // Timestamps never go backwards within a partition, so reads by time can binary-search.
    const timestampMs = Math.max(this.#now(), target.lastTimestampMs);
    target.lastTimestampMs = timestampMs;
    const lsn = ++target.lsn;
    const latestOnly = this.mode === 'latestVersion';
    const change: Change<T> = {
      id,
      operation: latestOnly ? 'upsert' : operation,
      document,
      ...(operation === 'delete' && !latestOnly ? { previous: existing?.document } : {}),
      lsn,
      timestampMs,
      partitionKey,
      ...(timeToLiveExpired ? { timeToLiveExpired: true } : {}),
    };
    const entry: Entry<T> = { change, key, deleted: operation === 'delete', superseded: false };
    target.log.push(entry);
    this.#documents.record(id, partitionKey, entry, existing);
    this.#writes++;
    return { partition: target.partition.id, lsn, effectivePartitionKey: keyToHex(key) };
  }
}
