import type { ViewWrite } from '../../sinks/ViewStore.js';
import type { FeedRange } from '../../core/Partition.js';
import { planWrite } from '../../sinks/internal/planWrite.js';
import type { StoredPartition } from '../../sinks/internal/planWrite.js';
import { ViewFencedError } from '../../errors/ViewFencedError.js';
import type { PlannedWrite, WriteOutcome } from './guardedWrite.js';
import { sameRange } from './rangeFence.js';
import type { KnownPartition, StoredRanges } from './rangeFence.js';

/**
 * What one store committed last per partition (epoch, LSN mark, range) and the lineage generation it last saw:
 * the next write of a partition is planned on them and sent as one statement that checks them under lock.
 *
 * @internal
 */
export class KnownPartitions {
  readonly #known = new Map<string, KnownPartition>();
  /** The lineage generation this store last saw; fast writes are planned on it. */
  #generation: number | undefined;

  /** The range this store last committed for `partition`, if any. */
  rangeOf(partition: string): FeedRange | undefined {
    return this.#known.get(partition)?.range;
  }

  /**
   * The plan of a write made on what this store committed last for its partitions, or `undefined` when that
   * is not known for each of them (a first write, a failed one), a commit brings a range not stored yet, a
   * split child may need its parents' marks, or the plan would be refused (only the stored epoch may say so).
   */
  plan<R>(write: ViewWrite<R>): PlannedWrite<R> | undefined {
    if (write.partitions.length === 0 || this.#generation === undefined) return undefined;
    const expected = new Map<string, StoredPartition>();
    const ranges = new Map<string, FeedRange | undefined>();
    for (const commit of write.partitions) {
      const known = this.#known.get(commit.partition);
      // A partition without a mark of its own may inherit one from the ranges stored over its own (a split or
      // merge child): the transaction reads them. Unless none was, as of the generation the plan is made on.
      if (known === undefined || (known.lsn === undefined && commit.range && known.aloneAt !== this.#generation)) return undefined;
      if (commit.range !== undefined && !sameRange(commit.range, known.range)) return undefined;
      expected.set(commit.partition, { epoch: known.epoch, lsn: known.lsn });
      ranges.set(commit.partition, known.range);
    }
    try {
      return { expected, generation: this.#generation, ranges, plan: planWrite(write, expected) };
    } catch (error) {
      if (error instanceof ViewFencedError) return undefined;
      throw error;
    }
  }

  /** Notes what a committed range store left in the rows of `partitions` (a write's own: another write of the same store may have moved on from the others). */
  rememberStored({ known, generation }: StoredRanges, partitions: readonly string[]): void {
    for (const partition of partitions) {
      const state = known.get(partition);
      if (state) this.#known.set(partition, state);
    }
    this.#generation = Math.max(generation, this.#generation ?? generation);
  }

  /** Notes what a committed write stored for its partitions. */
  remember({ commits, ranges, generation }: WriteOutcome): void {
    for (const c of commits) this.#known.set(c.partition, { epoch: c.epoch, lsn: c.lsn, range: ranges.get(c.partition) });
    this.#generation = Math.max(generation, this.#generation ?? generation);
  }

  /** Forgets what is known of `partitions` (a write of them failed: the next one reads their rows). */
  forget(partitions: Iterable<string>): void {
    for (const partition of partitions) this.#known.delete(partition);
  }

  /** Forgets every partition (their rows were cleared); the generation stays. */
  clear(): void {
    this.#known.clear();
  }
}
