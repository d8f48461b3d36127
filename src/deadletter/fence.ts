import type { FeedRange } from '../core/Partition.js';
import { rangesOverlap } from '../core/Partition.js';
import { DeadLetterFencedError } from '../errors/DeadLetterFencedError.js';
import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';

/** The highest epoch a store has seen for one key range. @internal */
export interface FenceEntry {
  readonly minInclusive: string;
  readonly maxExclusive: string;
  readonly epoch: number;
}

const FULL_RANGE: FeedRange = { minInclusive: '', maxExclusive: 'FF' };

/**
 * Applies the fencing rule to a write: refused (a `DeadLetterFencedError`) when any range overlapping the
 * writer's was written with a higher epoch (a split child or a new owner has taken over), or another range
 * overlapping it with the same epoch (a parent taken again after its children were created); otherwise the
 * writer's range is raised to its epoch, even when the write changes nothing. Returns the new entries. @internal
 */
export function raiseFence(entries: readonly FenceEntry[], writer: DeadLetterWriter): FenceEntry[] {
  const range = writerRange(writer);
  const overlapping = entries.filter((e) => rangesOverlap(e, range));
  const highest = Math.max(-Infinity, ...overlapping.map((e) => e.epoch));
  const same = (e: FenceEntry) => e.minInclusive === range.minInclusive && e.maxExclusive === range.maxExclusive;
  // Another range at the writer's epoch: a lineage gone wrong, a split parent taken again after its children
  // were created (the lease protocol never does: a gone parent's lease is marked replaced and never taken
  // again, its children start one above it). A writer without a range fences by epoch alone.
  const tie = writer.range !== undefined && overlapping.some((e) => e.epoch === writer.epoch && !same(e));
  if (highest > writer.epoch || tie) throw new DeadLetterFencedError(writer.leaseToken, writer.epoch, highest);
  return [...entries.filter((e) => !same(e)), { minInclusive: range.minInclusive, maxExclusive: range.maxExclusive, epoch: writer.epoch }];
}

/** The key range a writer fences and writes letters over: its lease's, or the whole key space. @internal */
export function writerRange(writer: DeadLetterWriter): FeedRange {
  return writer.range ?? FULL_RANGE;
}

/**
 * Whether two letters, written over ranges `aRange` and `bRange`, are letters of one change: the same
 * document, LSN and partition key, read along one lineage (overlapping ranges: a split child re-reads its
 * parent's changes under its own lease token, with the same LSNs). A store keeps the first. @internal
 */
export function sameChange(a: DeadLetter, aRange: FeedRange, b: DeadLetter, bRange: FeedRange): boolean {
  return (
    a.documentId === b.documentId &&
    a.lsn === b.lsn &&
    JSON.stringify(a.partitionKey) === JSON.stringify(b.partitionKey) &&
    rangesOverlap(aRange, bRange)
  );
}
