import type { Change } from './Change.js';
import type { FeedRange, Position } from './Partition.js';
import type { BatchOrigin } from './PartitionTracker.js';

/** What a {@link ChangeBatch} is made from. */
export interface ChangeBatchInit<T> {
  /** Lease token of the partition the batch was read from. */
  readonly partition: string;
  /** The changes, in partition order. */
  readonly changes: readonly Change<T>[];
  /** Position to resume after this batch (checkpoint value once it and all before it are done). */
  readonly position: Position;
  /** Fencing token: the lease epoch under which the batch was read. Default 0 (unknown). */
  readonly epoch?: number;
  /**
   * LSN of the last change read into the batch, before any filtering. Default: the LSN of the last of
   * `changes` (right for a batch made from a page as read); derived batches keep their source's.
   */
  readonly readLsn?: number;
  /** Key range the batch's lease covers (its lineage: a split child's range lies inside its parent's). */
  readonly range?: FeedRange;
  /** @internal Link back to the reader; set by the feed engine. */
  readonly origin?: BatchOrigin;
  /** Request units the read of this batch cost, where the source charges for reads (Cosmos DB). */
  readonly requestCharge?: number;
}

/**
 * An immutable page of changes from one partition: the unit that flows through an rxfeed pipeline.
 *
 * In short: transform the changes *inside* a batch (`map`, `filter`) and let the batch itself travel on,
 * even when empty, so its position still reaches the checkpoint.
 *
 * @example
 * ```ts
 * import { ChangeBatch } from 'rxfeed';
 * const small = batch.filter((c) => c.operation !== 'delete').map((c) => ({ ...c, document: c.document?.id }));
 * console.log(small.partition, small.size, small.position);
 * ```
 */
export class ChangeBatch<T> implements Iterable<Change<T>> {
  /** Lease token of the partition the batch was read from. */
  readonly partition: string;
  /** The changes, in partition order. */
  readonly changes: readonly Change<T>[];
  /** Position to resume after this batch. */
  readonly position: Position;
  /** Fencing token: the lease epoch under which the batch was read (0 when unknown). */
  readonly epoch: number;
  /**
   * LSN of the last change read into the batch, whatever filtering left of it since (`undefined` when the
   * page read was empty). Unlike {@link ChangeBatch.lastLsn} it does not change with `filter` or `map`.
   */
  readonly readLsn: number | undefined;
  /** Key range of the batch's lease, when the reader knows it. */
  readonly range: FeedRange | undefined;
  /** @internal Link back to the reader that produced the batch. */
  readonly origin: BatchOrigin | undefined;
  /** Request units the read of this batch cost (Cosmos DB's charge for the page), if the source said. */
  readonly requestCharge: number | undefined;

  constructor(init: ChangeBatchInit<T>) {
    this.partition = init.partition;
    // Readonly by type, not copied: batches are created on the hot path and never mutated.
    this.changes = init.changes;
    this.position = init.position;
    this.epoch = init.epoch ?? 0;
    this.readLsn = init.readLsn ?? init.changes[init.changes.length - 1]?.lsn;
    this.range = init.range;
    this.origin = init.origin;
    this.requestCharge = init.requestCharge;
    Object.freeze(this);
  }

  /** Number of changes in the batch (after any filtering). */
  get size(): number {
    return this.changes.length;
  }

  /** True when the batch holds no changes (it still carries a position). */
  get isEmpty(): boolean {
    return this.changes.length === 0;
  }

  /** LSN of the last change left in the batch, or `undefined` when empty (see {@link ChangeBatch.readLsn}). */
  get lastLsn(): number | undefined {
    return this.changes[this.changes.length - 1]?.lsn;
  }

  /** A batch with the same partition, position, epoch, read LSN and range holding `changes` instead. */
  withChanges<R>(changes: readonly Change<R>[]): ChangeBatch<R> {
    return new ChangeBatch<R>({
      partition: this.partition,
      changes,
      position: this.position,
      epoch: this.epoch,
      readLsn: this.readLsn,
      range: this.range,
      origin: this.origin,
      requestCharge: this.requestCharge,
    });
  }

  /** A batch whose changes are `fn` applied to each change. */
  map<R>(fn: (change: Change<T>, index: number) => Change<R>): ChangeBatch<R> {
    return this.withChanges(this.changes.map(fn));
  }

  /**
   * A batch whose documents (current and previous images) are `fn` applied to them. Deletes keep an
   * `undefined` document.
   */
  mapDocuments<R>(fn: (document: T, change: Change<T>) => R): ChangeBatch<R> {
    return this.map((change) => ({
      ...change,
      document: change.document === undefined ? undefined : fn(change.document, change),
      previous: change.previous === undefined ? undefined : fn(change.previous, change),
    }));
  }

  /** A batch keeping the changes that pass `predicate`; the position is unchanged. */
  filter<S extends T>(predicate: (change: Change<T>, index: number) => change is Change<S>): ChangeBatch<S>;
  /** A batch keeping the changes that pass `predicate`; the position is unchanged. */
  filter(predicate: (change: Change<T>, index: number) => boolean): ChangeBatch<T>;
  filter(predicate: (change: Change<T>, index: number) => boolean): ChangeBatch<T> {
    const kept = this.changes.filter(predicate);
    return kept.length === this.changes.length ? this : this.withChanges(kept);
  }

  /** Iterates over the batch's changes, in LSN order. */
  [Symbol.iterator](): Iterator<Change<T>> {
    return this.changes[Symbol.iterator]();
  }

  /** A plain JSON view (without the internal link to the reader). */
  toJSON(): { partition: string; position: Position; epoch: number; changes: readonly Change<T>[] } {
    return { partition: this.partition, position: this.position, epoch: this.epoch, changes: this.changes };
  }
}

/** A batch, or an array of batches as `bufferTime`/`bufferCount` produce. Sinks accept both. */
export type BatchOrBatches<T> = ChangeBatch<T> | readonly ChangeBatch<T>[];

/**
 * The batches in a {@link BatchOrBatches}: `[batch]` for one batch, the array itself for an array (no copy).
 * For code after `bufferTime`/`bufferCount` or inside a custom sink or operator that, like rxfeed's own,
 * accepts either shape: every batch that reaches `checkpointEvery` must be passed on, none dropped.
 *
 * @example
 * ```ts
 * import { bufferTime } from 'rxjs';
 * import { asBatches, checkpointEvery } from 'rxfeed';
 *
 * feed.changes$
 *   .pipe(bufferTime(1_000), checkpointEvery({ count: 500, ms: 5_000 }))
 *   .subscribe((value) => {
 *     const changes = asBatches(value).reduce((n, batch) => n + batch.size, 0);
 *     console.log(`${changes} changes checkpointed`);
 *   });
 * ```
 */
export function asBatches<T>(value: BatchOrBatches<T>): readonly ChangeBatch<T>[] {
  return value instanceof ChangeBatch ? [value] : value;
}
