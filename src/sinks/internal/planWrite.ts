import type { ViewChange, ViewCommit, ViewWrite } from '../ViewStore.js';
import { ViewFencedError } from '../ViewFencedError.js';

/** What a store knows about a partition before a write (inside the write's transaction). */
export interface StoredPartition {
  readonly epoch: number;
  readonly lsn: number | undefined;
}

/** The statements a write comes down to, the same for every store. */
export interface WritePlan<R> {
  /** Changes that write a row, one per key, ordered by key (a stable lock order across transactions). */
  readonly upserts: readonly ViewChange<R>[];
  /** Changes that remove a row, one per key, ordered by key. */
  readonly deletes: readonly ViewChange<R>[];
  /** Partitions whose position, epoch and LSN move. */
  readonly commits: readonly ViewCommit[];
  /** Changes dropped before reaching the rows (already applied, or superseded in the same write). */
  readonly dropped: number;
}

/**
 * Turns a write into a plan, given what the store holds for its partitions:
 *
 * 1. fencing: a partition whose epoch is lower than the stored one rejects the whole write;
 * 2. exactly-once: changes at or below the partition's stored LSN were applied before and are dropped;
 * 3. coalescing: one change per key. Guarded mode keeps the highest LSN (LSNs of one document increase
 *    along its partition lineage, children of a split continue the parent's numbering); exactly-once mode
 *    keeps the last one in write order (keys may gather documents of several partitions);
 * 4. positions never move back: a commit whose changes all lie at or below the stored LSN keeps the
 *    stored position.
 */
export function planWrite<R>(write: ViewWrite<R>, stored: ReadonlyMap<string, StoredPartition>): WritePlan<R> {
  for (const commit of write.partitions) {
    const current = stored.get(commit.partition);
    if (current !== undefined && commit.epoch < current.epoch) {
      throw new ViewFencedError(commit.partition, commit.epoch, current.epoch);
    }
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
  const byKey = (a: ViewChange<R>, b: ViewChange<R>) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  upserts.sort(byKey);
  deletes.sort(byKey);

  const commits: ViewCommit[] = [];
  for (const commit of write.partitions) {
    const current = stored.get(commit.partition);
    const replayed = commit.lsn !== undefined && current?.lsn !== undefined && commit.lsn <= current.lsn;
    if (replayed) continue;
    commits.push({
      partition: commit.partition,
      position: commit.position,
      epoch: Math.max(commit.epoch, current?.epoch ?? commit.epoch),
      lsn: maxDefined(commit.lsn, current?.lsn),
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
