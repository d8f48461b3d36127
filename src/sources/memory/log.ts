import type { Change } from '../../core/Change.js';
import type { Partition, Position, StartFrom } from '../../core/Partition.js';
import { RxfeedError } from '../../errors/index.js';
import { countBefore } from '../../internal/countBefore.js';

/** One change in a partition's log. */
export interface Entry<T> {
  readonly change: Change<T>;
  /** Effective key (numeric hash), to filter a parent's log into its children. */
  readonly key: number;
  /** The change is a delete (LatestVersion mode hides it). */
  readonly deleted: boolean;
  /** A later write of the same document exists (LatestVersion mode hides this entry). */
  superseded: boolean;
}

/** A partition of a {@link MemorySource}: its key range and its log. */
export interface MemoryPartition<T> {
  readonly partition: Partition;
  /** Numeric range `[min, max)` of hashed keys. */
  readonly min: number;
  readonly max: number;
  /** Entries in LSN order (shared with the parent's, filtered to this range, after a split). */
  readonly log: Entry<T>[];
  lsn: number;
  lastTimestampMs: number;
  gone: boolean;
  /** Timestamps never decrease along the log (false for a merged log, whose parents' entries interleave). */
  readonly timeOrdered: boolean;
}

const POSITION_PREFIX = 'mem:';

/** The position that resumes a read after `lsn`. */
export function positionOf(lsn: number): Position {
  return `${POSITION_PREFIX}${lsn}`;
}

/** The LSN a position resumes after; throws for a position no `MemorySource` made. */
export function lsnOf(position: Position): number {
  const lsn = position.startsWith(POSITION_PREFIX) ? Number(position.slice(POSITION_PREFIX.length)) : Number.NaN;
  if (!Number.isInteger(lsn) || lsn < 0) {
    throw new RxfeedError(`position ${JSON.stringify(position)} was not made by a MemorySource`);
  }
  return lsn;
}

/** Index of the first entry whose LSN is greater than `lsn`. */
export function firstAfterLsn<T>(log: readonly Entry<T>[], lsn: number): number {
  return countBefore(log, (e) => e.change.lsn <= lsn);
}

/**
 * Index of the first entry committed at or after `timestampMs`. A log whose timestamps are not ordered (a
 * merged one) is scanned: reading from that index may return some older entries too, never misses one.
 */
export function firstAtOrAfterTime<T>(log: readonly Entry<T>[], timestampMs: number, timeOrdered = true): number {
  if (!timeOrdered) {
    const index = log.findIndex((e) => e.change.timestampMs >= timestampMs);
    return index < 0 ? log.length : index;
  }
  return countBefore(log, (e) => e.change.timestampMs < timestampMs);
}

/** Index of the first entry of `target`'s log that a read from `from` may return. */
export function firstToRead<T>(target: MemoryPartition<T>, from: Exclude<StartFrom, 'now'>): number {
  if (from === 'beginning') return 0;
  if (from instanceof Date) return firstAtOrAfterTime(target.log, from.getTime(), target.timeOrdered);
  return firstAfterLsn(target.log, lsnOf(from.position));
}

/** The position from which a read of `target` returns exactly its changes at or after `at`. */
export function positionAtOrAfter<T>(target: MemoryPartition<T>, at: 'beginning' | Date): Position {
  const first = at === 'beginning' ? 0 : firstAtOrAfterTime(target.log, at.getTime(), target.timeOrdered);
  if (!target.timeOrdered) return positionOf(first < target.log.length ? target.log[first]!.change.lsn - 1 : target.lsn);
  return positionOf(first > 0 ? target.log[first - 1]!.change.lsn : (target.log[0]?.change.lsn ?? target.lsn + 1) - 1);
}

/** Two parents' logs as one, in LSN order (equal LSNs of the two stay together, the left one's first). */
export function mergeLogs<T>(left: readonly Entry<T>[], right: readonly Entry<T>[]): Entry<T>[] {
  const log: Entry<T>[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length || j < right.length) {
    const a = left[i];
    const b = right[j];
    if (b === undefined || (a !== undefined && a.change.lsn <= b.change.lsn)) log.push(left[i++]!);
    else log.push(right[j++]!);
  }
  return log;
}

/**
 * Up to `max` changes of the entries `visible` keeps, from index `start` on: a page. A merged log holds equal
 * LSNs of its two parents: a page never ends between them (one transaction), so it may hold more than `max`.
 */
export function collectPage<T>(log: readonly Entry<T>[], start: number, max: number, visible: (entry: Entry<T>) => boolean): Change<T>[] {
  const changes: Change<T>[] = [];
  let i = start;
  for (; i < log.length && changes.length < max; i++) {
    const entry = log[i]!;
    if (visible(entry)) changes.push(entry.change);
  }
  const last = changes[changes.length - 1];
  for (; last && i < log.length && log[i]!.change.lsn === last.lsn; i++) {
    const entry = log[i]!;
    if (visible(entry)) changes.push(entry.change);
  }
  return changes;
}
