import type {
  ViewPartitionState,
  ViewRow,
  ViewStore,
  ViewWrite,
  ViewWriteOptions,
  ViewWriteResult,
} from './ViewStore.js';
import type { FeedRange, Position } from '../core/Partition.js';
import { planWrite, storedPartition } from './internal/planWrite.js';
import type { StoredPartition, StoredRange } from './internal/planWrite.js';

interface Tombstone {
  readonly lsn: number;
  readonly timestampMs: number;
}

/** A partition as stored; `position` stays undefined while its writes were all replays (inherited mark). */
interface PartitionRecord {
  readonly position: Position | undefined;
  readonly epoch: number;
  readonly lsn: number | undefined;
  readonly range: FeedRange | undefined;
}

/**
 * A {@link ViewStore} held in memory: for tests, examples and views that are rebuilt on start. Same
 * semantics as the PostgreSQL stores (version guard, tombstones, positions, fencing by key range along the
 * lineage); each write is applied atomically. Rows are copied with `structuredClone` on the way in and out.
 *
 * @example
 * ```ts
 * import { MemoryViewStore, materializeToView, checkpointEvery } from 'rxfeed';
 * const view = new MemoryViewStore<{ total: number }>();
 * feed$.pipe(materializeToView(view, { project: (c) => ({ total: c.document!.total }) }), checkpointEvery(100)).subscribe();
 * ```
 */
export class MemoryViewStore<R> implements ViewStore<R> {
  /** {@inheritDoc ViewStore.description} */
  readonly description = 'memory view';
  readonly #rows = new Map<string, ViewRow<R>>();
  readonly #tombstones = new Map<string, Tombstone>();
  readonly #partitions = new Map<string, PartitionRecord>();

  /** {@inheritDoc ViewStore.write} */
  async write(write: ViewWrite<R>, options?: ViewWriteOptions): Promise<ViewWriteResult> {
    // Applied at once when called: only a signal aborted before that cancels it (nothing written, its reason thrown).
    options?.signal?.throwIfAborted();
    // Everything below runs synchronously, so a write is atomic: planWrite throws (fencing) before any change.
    const stored = new Map<string, StoredPartition>();
    const ranges = this.#ranges();
    for (const commit of write.partitions) {
      const current = storedPartition(commit, this.#partitions.get(commit.partition), ranges);
      if (current) stored.set(commit.partition, current);
    }
    const plan = planWrite(write, stored);
    const guarded = write.mode === 'guarded';
    let written = 0;
    let deleted = 0;
    for (const change of plan.upserts) {
      if (guarded) {
        const tombstone = this.#tombstones.get(change.key);
        if (tombstone && tombstone.lsn >= change.lsn) continue;
        const current = this.#rows.get(change.key);
        if (current && current.lsn >= change.lsn) continue;
      }
      this.#rows.set(change.key, {
        key: change.key,
        row: structuredClone(change.row as R),
        lsn: change.lsn,
        timestampMs: change.timestampMs,
        partition: change.partition,
      });
      written++;
    }
    for (const change of plan.deletes) {
      const current = this.#rows.get(change.key);
      if (guarded) {
        const tombstone = this.#tombstones.get(change.key);
        if (!tombstone || tombstone.lsn < change.lsn) {
          this.#tombstones.set(change.key, { lsn: change.lsn, timestampMs: change.timestampMs });
        }
        if (current && current.lsn < change.lsn) {
          this.#rows.delete(change.key);
          deleted++;
        }
      } else if (current) {
        this.#rows.delete(change.key);
        deleted++;
      }
    }
    for (const commit of plan.commits) {
      const state = this.#partitions.get(commit.partition);
      this.#partitions.set(commit.partition, {
        position: commit.position ?? state?.position,
        epoch: commit.epoch,
        lsn: commit.lsn,
        range: commit.range ?? state?.range,
      });
    }
    return { written, deleted, skipped: write.changes.length - written - deleted };
  }

  /** Every stored partition that has a key range: its range, epoch and mark (range fence and lineage). */
  #ranges(): StoredRange[] {
    const ranges: StoredRange[] = [];
    for (const [partition, { range, epoch, lsn }] of this.#partitions) if (range) ranges.push({ partition, range, epoch, lsn });
    return ranges;
  }

  /** {@inheritDoc ViewStore.get} */
  async get(key: string): Promise<ViewRow<R> | undefined> {
    const row = this.#rows.get(key);
    return row && structuredClone(row);
  }

  /** {@inheritDoc ViewStore.rows} */
  async rows(): Promise<ViewRow<R>[]> {
    return [...this.#rows.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map((r) => structuredClone(r));
  }

  /** {@inheritDoc ViewStore.positions} */
  async positions(): Promise<ReadonlyMap<string, ViewPartitionState>> {
    const positions = new Map<string, ViewPartitionState>();
    for (const [partition, { position, epoch, lsn, range }] of this.#partitions) {
      if (position !== undefined) positions.set(partition, { position, epoch, lsn, ...(range ? { range: { ...range } } : {}) });
    }
    return positions;
  }

  /** {@inheritDoc ViewStore.pruneTombstones} */
  async pruneTombstones(beforeTimestampMs: number): Promise<number> {
    let removed = 0;
    for (const [key, tombstone] of this.#tombstones) {
      if (tombstone.timestampMs < beforeTimestampMs) {
        this.#tombstones.delete(key);
        removed++;
      }
    }
    return removed;
  }

  /** {@inheritDoc ViewStore.clearPositions} */
  async clearPositions(): Promise<void> {
    this.#partitions.clear();
  }

  /** {@inheritDoc ViewStore.close} */
  async close(): Promise<void> {}
}
