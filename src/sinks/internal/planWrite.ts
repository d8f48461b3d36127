import type { FeedRange, Position } from '../../core/Partition.js';
import { rangesOverlap } from '../../core/Partition.js';
import type { ViewChange, ViewCommit, ViewWrite } from '../ViewStore.js';
import { ViewFencedError } from '../../errors/ViewFencedError.js';

/**
 * What a store knows about a partition before a write (inside the write's transaction): its epoch, its LSN
 * mark (its own or, when it has none, the one {@link inheritedLsn} gives), and the highest epoch other
 * partitions wrote over its key range (the range fence).
 */
export interface StoredPartition {
  readonly epoch: number;
  readonly lsn: number | undefined;
  /** Highest epoch stored for another partition whose range overlaps the commit's (a split child, a merge). */
  readonly rangeEpoch?: number;
}

/** Another partition as stored, with its key range: what the range fence and the lineage marks read. */
export interface StoredRange {
  readonly partition: string;
  readonly range: FeedRange;
  readonly epoch: number;
  readonly lsn: number | undefined;
}

/**
 * What a store holds for one commit of a write, given its partition's own row (`own`) and the partitions
 * stored with a range (`others`; the commit's own partition among them is ignored): over the commit's range
 * (or, for a commit without one, the range stored with its partition), the highest epoch of the others (the
 * fence: a split or merge parent is refused once a child wrote), and, when it has no LSN mark of its own,
 * the mark it inherits from them (lineage rule). `undefined` when the store knows nothing of it.
 */
export function storedPartition(
  commit: ViewCommit,
  own: (StoredPartition & { readonly range?: FeedRange | undefined }) | undefined,
  others: readonly StoredRange[],
): StoredPartition | undefined {
  const range = commit.range ?? own?.range;
  const overlapping = range ? others.filter((o) => o.partition !== commit.partition && rangesOverlap(o.range, range)) : [];
  const rangeEpoch = overlapping.length > 0 ? Math.max(...overlapping.map((o) => o.epoch)) : undefined;
  const marks = overlapping.flatMap((o) => (o.lsn === undefined ? [] : [{ range: o.range, lsn: o.lsn }]));
  // Only a commit that gives its range inherits marks: the lineage is known from the batches being written.
  const lsn = own?.lsn ?? (commit.range && inheritedLsn(commit.range, marks));
  if (own === undefined && lsn === undefined && rangeEpoch === undefined) return undefined;
  return { epoch: own?.epoch ?? 0, lsn, ...(rangeEpoch !== undefined ? { rangeEpoch } : {}) };
}

/**
 * The fencing rule of a commit at `epoch`, given what the store holds for its partition: refused below its
 * partition's own epoch (equal passes: the same ownership writes again), and at or below the epoch another
 * partition wrote over part of its range. A tie with another partition is a lineage gone wrong: a gone
 * parent's lease is marked replaced before its children are created, one epoch above it, and never taken
 * again, so a parent and a child at one epoch means leases written without that rule (the parent taken again
 * after its children were created). Its position was handed to them; its write must not land after theirs,
 * and a child refused this way is taken again one epoch higher.
 */
export function isFenced(epoch: number, current: StoredPartition | undefined): boolean {
  if (current === undefined) return false;
  return epoch < current.epoch || (current.rangeEpoch !== undefined && epoch <= current.rangeEpoch);
}

/** The epoch a fenced commit is refused for (the `highest` of its `ViewFencedError`). */
export function fenceEpoch(current: StoredPartition | undefined): number {
  return Math.max(current?.epoch ?? -Infinity, current?.rangeEpoch ?? -Infinity);
}

/** What a write stores for one partition. `position` is `undefined` for a replay: keep the stored one. */
export interface PartitionCommit {
  readonly partition: string;
  readonly epoch: number;
  readonly position: Position | undefined;
  readonly lsn: number | undefined;
  readonly range: FeedRange | undefined;
}

/** A stored partition's range and LSN mark, as {@link inheritedLsn} reads them. */
export interface RangeMark {
  readonly range: FeedRange;
  readonly lsn: number;
}

/**
 * The exactly-once mark a partition without one of its own inherits from the partitions stored before it
 * over `range` (its split parent, the parents of a merge, older ancestors): each part of `range` gets the
 * highest mark of the stored ranges covering it (LSNs never decrease along a lineage, so the newest
 * ancestor's mark is the highest), and the result is the lowest of those over the parts (a merged range is
 * only applied up to its least advanced parent). `undefined` when some part of `range` is covered by none.
 */
export function inheritedLsn(range: FeedRange, marks: readonly RangeMark[]): number | undefined {
  const overlapping = marks.filter((m) => rangesOverlap(m.range, range));
  if (overlapping.length === 0) return undefined;
  const cuts = new Set([range.minInclusive, range.maxExclusive]);
  for (const { range: r } of overlapping) {
    for (const cut of [r.minInclusive, r.maxExclusive]) if (cut > range.minInclusive && cut < range.maxExclusive) cuts.add(cut);
  }
  const points = [...cuts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let mark = Infinity;
  for (let i = 0; i + 1 < points.length; i++) {
    const min = points[i]!;
    const max = points[i + 1]!;
    let best: number | undefined;
    for (const m of overlapping) {
      if (m.range.minInclusive <= min && max <= m.range.maxExclusive) best = Math.max(best ?? -Infinity, m.lsn);
    }
    if (best === undefined) return undefined;
    mark = Math.min(mark, best);
  }
  return mark;
}

/** The statements a write comes down to, the same for every store. */
export interface WritePlan<R> {
  /**
   * Changes that write a row, one per key, in no particular order: the SQL upsert sorts them by key itself
   * (a stable lock order across transactions), faster than sorting here.
   */
  readonly upserts: readonly ViewChange<R>[];
  /** Changes that remove a row, one per key, ordered by key (a SQL delete cannot sort its input). */
  readonly deletes: readonly ViewChange<R>[];
  /** One per partition of the write: its epoch is raised always, its position unless the write is a replay. */
  readonly commits: readonly PartitionCommit[];
  /** Changes dropped before reaching the rows (already applied, or superseded in the same write). */
  readonly dropped: number;
}

/**
 * Turns a write into a plan, given what the store holds for its partitions:
 *
 * 1. fencing: a commit whose epoch is lower than its partition's stored epoch, or not above the epoch
 *    another partition wrote over part of its key range ({@link isFenced}), rejects the whole write;
 * 2. exactly-once: changes at or below the partition's stored LSN were applied before and are dropped;
 * 3. coalescing: one change per key. Guarded mode keeps the highest LSN (LSNs of one document increase
 *    along its partition lineage, children of a split continue the parent's numbering); exactly-once mode
 *    keeps the last one in write order (keys may gather documents of several partitions);
 * 4. positions never move back: a commit whose last LSN read lies at or below the stored LSN keeps the
 *    stored position; its epoch is raised all the same, so the new owner's replays fence the old owner.
 */
export function planWrite<R>(write: ViewWrite<R>, stored: ReadonlyMap<string, StoredPartition>): WritePlan<R> {
  for (const commit of write.partitions) {
    const current = stored.get(commit.partition);
    if (isFenced(commit.epoch, current)) throw new ViewFencedError(commit.partition, commit.epoch, fenceEpoch(current));
  }

  const latest = new Map<string, ViewChange<R>>();
  let considered = 0;
  for (const change of write.changes) {
    if (write.mode === 'exactlyOnce') {
      const hwm = stored.get(change.partition)?.lsn;
      if (hwm !== undefined && change.lsn <= hwm) continue;
    }
    considered++;
    const previous = latest.get(change.key);
    if (write.mode === 'exactlyOnce' || previous === undefined || change.lsn >= previous.lsn) {
      latest.set(change.key, change);
    }
  }

  const upserts: ViewChange<R>[] = [];
  const deletes: ViewChange<R>[] = [];
  for (const change of latest.values()) (change.row === undefined ? deletes : upserts).push(change);
  deletes.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));

  const commits: PartitionCommit[] = [];
  for (const commit of write.partitions) {
    const current = stored.get(commit.partition);
    const replayed = commit.lsn !== undefined && current?.lsn !== undefined && commit.lsn <= current.lsn;
    commits.push({
      partition: commit.partition,
      position: replayed ? undefined : commit.position,
      epoch: Math.max(commit.epoch, current?.epoch ?? commit.epoch),
      lsn: maxDefined(commit.lsn, current?.lsn),
      range: commit.range,
    });
  }

  return { upserts, deletes, commits, dropped: write.changes.length - considered + (considered - latest.size) };
}

function maxDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.max(a, b);
}

/** Partitions of a write, in first-seen order (the rows a store reads and locks before applying it). */
export function partitionsOf(write: ViewWrite<unknown>): string[] {
  return [...new Set(write.partitions.map((p) => p.partition))];
}
