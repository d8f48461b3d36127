import { abortError } from '../internal/abortWatch.js';
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { FeedMode, FeedRange, Partition, Position } from '../core/Partition.js';
import { InvalidOptionsError, PartitionGoneError, RxfeedError } from '../errors/index.js';
import { ReadFaults, type MemoryFaults } from './memory/faults.js';
import { KEY_END, hashKey, hexToKey, keyToHex } from './memory/keySpace.js';
import {
  collectPage,
  firstAfterLsn,
  firstAtOrAfterTime,
  mergeLogs,
  positionAtOrAfter,
  positionOf,
  lsnOf,
  type Entry,
  type MemoryPartition,
} from './memory/log.js';
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

interface StoredDocument<T> {
  readonly document: T;
  readonly entry: Entry<T>;
}

function documentId(document: unknown): string {
  const id = (document as { id?: unknown } | null)?.id;
  if (typeof id !== 'string' || id === '') throw new RxfeedError('a MemorySource document needs a non-empty string id');
  return id;
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
  readonly #partitions = new Map<string, MemoryPartition<T>>();
  /** Live partitions ordered by range. */
  #live: MemoryPartition<T>[] = [];
  readonly #documents = new Map<string, StoredDocument<T>>();
  readonly #faults: ReadFaults;
  readonly #drainGone: boolean;
  #nextId = 0;
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
    for (let i = 0; i < count; i++) {
      this.#addPartition(Math.floor((i * KEY_END) / count), Math.floor(((i + 1) * KEY_END) / count), [], 0, 0);
    }
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
    return this.#live.map((p) => p.partition);
  }

  /** Latest LSN of a partition (live or gone), 0 before any write. */
  latestLsn(partitionId: string): number {
    return this.#get(partitionId).lsn;
  }

  /** Id of the live partition a partition key (or id) routes to. */
  partitionFor(partitionKey: unknown): string {
    return this.#route(hashKey(partitionKey)).partition.id;
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
    const existing = this.#documents.get(this.#docKey(id, pk));
    return this.#append(id, pk, existing ? 'replace' : 'create', document, existing);
  }

  /** Creates a document; throws when one with the same id and partition key exists. */
  create(document: T, options: MemoryWriteOptions = {}): MemoryWriteResult {
    const id = documentId(document);
    const pk = options.partitionKey ?? id;
    if (this.#documents.has(this.#docKey(id, pk))) throw new RxfeedError(`document ${id} already exists`);
    return this.#append(id, pk, 'create', document, undefined);
  }

  /** Replaces a document; throws when it does not exist. */
  replace(document: T, options: MemoryWriteOptions = {}): MemoryWriteResult {
    const id = documentId(document);
    const pk = options.partitionKey ?? id;
    const existing = this.#documents.get(this.#docKey(id, pk));
    if (!existing) throw new RxfeedError(`document ${id} does not exist`);
    return this.#append(id, pk, 'replace', document, existing);
  }

  /** Deletes a document; throws when it does not exist. */
  delete(id: string, options: MemoryDeleteOptions = {}): MemoryWriteResult {
    const pk = options.partitionKey ?? id;
    const existing = this.#documents.get(this.#docKey(id, pk));
    if (!existing) throw new RxfeedError(`document ${id} does not exist`);
    return this.#append(id, pk, 'delete', undefined, existing, options.timeToLiveExpired);
  }

  /** The current version of a document, if it exists. */
  get(id: string, options: MemoryWriteOptions = {}): T | undefined {
    return this.#documents.get(this.#docKey(id, options.partitionKey ?? id))?.document;
  }

  /**
   * Splits a live partition in two at the middle of its range. The parent is gone (reads of it throw
   * {@link PartitionGoneError}); the children get new ids, the parent's log filtered to their ranges, and
   * continue its LSN numbering, so a position read from the parent is valid in both children.
   *
   * @returns the two children.
   */
  split(partitionId: string): readonly [Partition, Partition] {
    const parent = this.#get(partitionId);
    if (parent.gone) throw new RxfeedError(`partition ${partitionId} is already gone`);
    if (parent.max - parent.min < 2) throw new RxfeedError(`partition ${partitionId} is too small to split`);
    parent.gone = true;
    const mid = parent.min + Math.floor((parent.max - parent.min) / 2);
    const inRange = (lo: number, hi: number) => parent.log.filter((e) => e.key >= lo && e.key < hi);
    const left = this.#addPartition(parent.min, mid, inRange(parent.min, mid), parent.lsn, parent.lastTimestampMs, [partitionId], parent.timeOrdered);
    const right = this.#addPartition(mid, parent.max, inRange(mid, parent.max), parent.lsn, parent.lastTimestampMs, [partitionId], parent.timeOrdered);
    this.#live = this.#live.filter((p) => p !== parent);
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
    const left = this.#get(leftId);
    const right = this.#get(rightId);
    if (left.gone || right.gone) throw new RxfeedError(`partition ${left.gone ? leftId : rightId} is already gone`);
    if (left.max !== right.min) throw new RxfeedError(`partitions ${leftId} and ${rightId} are not adjacent (left's range must end where right's starts)`);
    left.gone = true;
    right.gone = true;
    const log = mergeLogs(left.log, right.log);
    const child = this.#addPartition(left.min, right.max, log, Math.max(left.lsn, right.lsn), Math.max(left.lastTimestampMs, right.lastTimestampMs), [leftId, rightId], false);
    this.#live = this.#live.filter((p) => p !== left && p !== right);
    return child.partition;
  }

  /** {@inheritDoc Source.read} */
  async read(request: ReadRequest): Promise<Page<T>> {
    const { signal } = request;
    if (signal?.aborted) throw abortError(signal);
    const epk = this.#epk(request.partition);
    const target = epk?.target ?? this.#get(request.partition.id);
    await this.#faults.apply(request.partition.id, signal);
    if (epk === null) throw new PartitionGoneError(request.partition.id);
    const max = request.maxItemCount;
    if (!Number.isInteger(max) || max < 1) throw new RxfeedError(`maxItemCount must be a positive integer, got ${max}`);
    const inRange = epk ? (e: Entry<T>) => e.key >= epk.min && e.key < epk.max : () => true;
    const latestOnly = this.mode === 'latestVersion';

    const from = request.from;
    let start: number;
    if (from === 'now') {
      if (target.gone) throw new PartitionGoneError(target.partition.id);
      return { changes: [], position: positionOf(target.lsn), latestLsn: target.lsn };
    } else if (from === 'beginning') {
      start = 0;
    } else if (from instanceof Date) {
      start = firstAtOrAfterTime(target.log, from.getTime(), target.timeOrdered);
    } else {
      start = firstAfterLsn(target.log, lsnOf(from.position));
    }
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
    const epk = this.#epk(partition);
    if (epk === null) throw new PartitionGoneError(partition.id);
    const target = epk?.target ?? this.#get(partition.id);
    if (target.gone) throw new PartitionGoneError(target.partition.id);
    if (at === 'now') return positionOf(target.lsn);
    return positionAtOrAfter(target, at);
  }

  /**
   * An EPK-range partition (a lease over part of a merged partition: an id this source never gave): the live
   * partition whose range holds it whole and the key bounds to read, `null` when no one live partition holds
   * it (it was cut: gone), or `undefined` for a partition of this source.
   */
  #epk(partition: Partition): { readonly target: MemoryPartition<T>; readonly min: number; readonly max: number } | null | undefined {
    if (this.#partitions.has(partition.id) || !partition.range) return undefined;
    const min = hexToKey(partition.range.minInclusive);
    const max = hexToKey(partition.range.maxExclusive);
    const target = this.#live.find((p) => p.min <= min && max <= p.max);
    return target ? { target, min, max } : null;
  }

  #docKey(id: string, partitionKey: unknown): string {
    return `${JSON.stringify(partitionKey)}\u0000${id}`;
  }

  #get(partitionId: string): MemoryPartition<T> {
    const partition = this.#partitions.get(partitionId);
    if (!partition) throw new PartitionGoneError(partitionId);
    return partition;
  }

  #route(key: number): MemoryPartition<T> {
    for (const p of this.#live) if (key >= p.min && key < p.max) return p;
    throw new RxfeedError(`no partition covers key ${keyToHex(key)}`);
  }

  #addPartition(
    min: number,
    max: number,
    log: Entry<T>[],
    lsn: number,
    lastTimestampMs: number,
    parents?: readonly string[],
    timeOrdered = true,
  ): MemoryPartition<T> {
    const range: FeedRange = { minInclusive: keyToHex(min), maxExclusive: keyToHex(max) };
    const id = String(this.#nextId++);
    const partition: Partition = parents ? { id, range, parents } : { id, range };
    const p: MemoryPartition<T> = { partition, min, max, log, lsn, lastTimestampMs, gone: false, timeOrdered };
    this.#partitions.set(id, p);
    this.#live.push(p);
    this.#live.sort((a, b) => a.min - b.min);
    return p;
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
    const target = this.#route(key);
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
    if (existing) existing.entry.superseded = true;
    target.log.push(entry);
    const docKey = this.#docKey(id, partitionKey);
    if (operation === 'delete') this.#documents.delete(docKey);
    else this.#documents.set(docKey, { document: document as T, entry });
    this.#writes++;
    return { partition: target.partition.id, lsn, effectivePartitionKey: keyToHex(key) };
  }
}
