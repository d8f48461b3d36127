import type { FeedRange, Partition } from '../../core/Partition.js';
import { PartitionGoneError, RxfeedError } from '../../errors/index.js';
import { KEY_END, hexToKey, keyToHex } from './keySpace.js';
import { mergeLogs, type Entry, type MemoryPartition } from './log.js';

/** The part of one live partition that an EPK-range partition names: that partition and the key bounds to read. */
export interface EpkTarget<T> {
  readonly target: MemoryPartition<T>;
  /** Numeric range `[min, max)` of hashed keys of the EPK range. */
  readonly min: number;
  readonly max: number;
}

/**
 * The partitions of a {@link MemorySource} and how they split and merge: every partition it ever had, by id
 * (gone ones too, so reads of them can say they are gone), and the live ones, ordered by range, which cover the
 * key space without overlap. Ids are handed out in order: `"0"` … `"N-1"` at start, then one per child.
 */
export class PartitionTopology<T> {
  readonly #all = new Map<string, MemoryPartition<T>>();
  /** Live partitions ordered by range. */
  #live: MemoryPartition<T>[] = [];
  #nextId = 0;

  /** @param count - partitions at start, equal shares of the key space. */
  constructor(count: number) {
    for (let i = 0; i < count; i++) {
      this.#add(Math.floor((i * KEY_END) / count), Math.floor(((i + 1) * KEY_END) / count), [], 0, 0);
    }
  }

  /** The live partitions, ordered by range. */
  get live(): readonly MemoryPartition<T>[] {
    return this.#live;
  }

  /** A partition (live or gone) by id; throws {@link PartitionGoneError} for an id this source never gave. */
  get(partitionId: string): MemoryPartition<T> {
    const partition = this.#all.get(partitionId);
    if (!partition) throw new PartitionGoneError(partitionId);
    return partition;
  }

  /** The live partition whose range holds a hashed key. */
  route(key: number): MemoryPartition<T> {
    for (const p of this.#live) if (key >= p.min && key < p.max) return p;
    throw new RxfeedError(`no partition covers key ${keyToHex(key)}`);
  }

  /**
   * Splits a live partition in two at the middle of its range: the parent is gone, the children hold its log
   * filtered to their ranges and continue its LSN numbering (see {@link MemorySource.split}).
   */
  split(partitionId: string): readonly [MemoryPartition<T>, MemoryPartition<T>] {
    const parent = this.get(partitionId);
    if (parent.gone) throw new RxfeedError(`partition ${partitionId} is already gone`);
    if (parent.max - parent.min < 2) throw new RxfeedError(`partition ${partitionId} is too small to split`);
    parent.gone = true;
    const mid = parent.min + Math.floor((parent.max - parent.min) / 2);
    const inRange = (lo: number, hi: number) => parent.log.filter((e) => e.key >= lo && e.key < hi);
    const left = this.#add(parent.min, mid, inRange(parent.min, mid), parent.lsn, parent.lastTimestampMs, [partitionId], parent.timeOrdered);
    const right = this.#add(mid, parent.max, inRange(mid, parent.max), parent.lsn, parent.lastTimestampMs, [partitionId], parent.timeOrdered);
    this.#live = this.#live.filter((p) => p !== parent);
    return [left, right];
  }

  /**
   * Merges two adjacent live partitions into one: both parents are gone, the child covers their two ranges,
   * holds both logs and numbers on above the higher of their LSNs (see {@link MemorySource.merge}).
   */
  merge(leftId: string, rightId: string): MemoryPartition<T> {
    const left = this.get(leftId);
    const right = this.get(rightId);
    if (left.gone || right.gone) throw new RxfeedError(`partition ${left.gone ? leftId : rightId} is already gone`);
    if (left.max !== right.min) throw new RxfeedError(`partitions ${leftId} and ${rightId} are not adjacent (left's range must end where right's starts)`);
    left.gone = true;
    right.gone = true;
    const log = mergeLogs(left.log, right.log);
    const child = this.#add(left.min, right.max, log, Math.max(left.lsn, right.lsn), Math.max(left.lastTimestampMs, right.lastTimestampMs), [leftId, rightId], false);
    this.#live = this.#live.filter((p) => p !== left && p !== right);
    return child;
  }

  /**
   * An EPK-range partition (a lease over part of a merged partition: an id this source never gave): the live
   * partition whose range holds it whole and the key bounds to read, `null` when no one live partition holds
   * it (it was cut: gone), or `undefined` for a partition of this source.
   */
  epk(partition: Partition): EpkTarget<T> | null | undefined {
    if (this.#all.has(partition.id) || !partition.range) return undefined;
    const min = hexToKey(partition.range.minInclusive);
    const max = hexToKey(partition.range.maxExclusive);
    const target = this.#live.find((p) => p.min <= min && max <= p.max);
    return target ? { target, min, max } : null;
  }

  #add(
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
    this.#all.set(id, p);
    this.#live.push(p);
    this.#live.sort((a, b) => a.min - b.min);
    return p;
  }
}
