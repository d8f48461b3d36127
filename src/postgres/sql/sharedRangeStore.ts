import { logger } from '../../internal/log.js';
import type { ViewWrite } from '../../sinks/ViewStore.js';
import { partitionsOf } from '../../sinks/internal/planWrite.js';
import type { SqlRunner } from './SqlRunner.js';
import { storeRanges } from './rangeFence.js';
import type { RangeFenceTable, StoredRanges } from './rangeFence.js';

const log = logger('view');

/** Writes whose new ranges one transaction stores together: their commits' partitions are distinct. */
interface RangeStoreGroup {
  readonly writes: ViewWrite<unknown>[];
  readonly partitions: Set<string>;
  /** What the transaction committed for all of them. */
  stored?: Promise<StoredRanges | undefined>;
}

/**
 * Range stores that writes arriving together share: the new ranges of a write are stored in one transaction
 * with those of the other writes that need ranges stored while its transaction begins (the partitions of a
 * fresh view, whose first writes come at once). Range stores queue one at a time on the lineage row, so `n`
 * partitions' first writes would otherwise wait for `n` transactions in turn.
 *
 * @internal
 */
export class SharedRangeStore {
  readonly #table: RangeFenceTable;
  /** The range store other writes may still join (its transaction has not begun). */
  #open: RangeStoreGroup | undefined;

  constructor(table: RangeFenceTable) {
    this.#table = table;
  }

  /**
   * Stores the new ranges of `write`, together with the writes that join before the transaction begins: one
   * {@link storeRanges} over all their commits, with its checks (fencing, overlaps, between them too)
   * unchanged, the lineage row locked against range stores only. When that fails (one of them fenced, ranges
   * over another's, a deadlock), nothing was stored and each stores its own alone, as it would have without
   * the others: a refused write gets its own error, the others are not refused with it. A write alone in its
   * group gets the error as is.
   */
  async store(runner: SqlRunner, write: ViewWrite<unknown>): Promise<StoredRanges | undefined> {
    const partitions = partitionsOf(write);
    let group = this.#open;
    if (group === undefined || partitions.some((p) => group!.partitions.has(p))) {
      const next: RangeStoreGroup = { writes: [write], partitions: new Set(partitions) };
      this.#open = group = next;
      next.stored = runner.transaction((tx) => {
        // Its transaction has begun: writes that need ranges stored from now on go in the next one.
        if (this.#open === next) this.#open = undefined;
        const together = next.writes.length === 1 ? write : { mode: write.mode, changes: [], partitions: next.writes.flatMap((w) => w.partitions) };
        return storeRanges(tx, this.#table, together, false);
      });
    } else {
      group.writes.push(write);
      for (const p of partitions) group.partitions.add(p);
    }
    try {
      return await group.stored!;
    } catch (error) {
      if (group.writes.length === 1) throw error;
      log('%s: storing %d writes\' ranges together failed (%s); storing each alone', this.#table.description, group.writes.length, (error as Error).message);
      return runner.transaction((tx) => storeRanges(tx, this.#table, write, false));
    }
  }

  /** Stores the new ranges of `write` alone, with the lineage row locked exclusively (ranges over another partition's). */
  storeExclusively(runner: SqlRunner, write: ViewWrite<unknown>): Promise<StoredRanges | undefined> {
    return runner.transaction((tx) => storeRanges(tx, this.#table, write, true));
  }
}
