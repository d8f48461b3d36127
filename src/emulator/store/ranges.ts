import { CosmosHttpError, SUBSTATUS } from '../errors.js';
import { evenBoundaries, MAX_EPK, midpoint, MIN_EPK, type PartitionKeyDefinition } from '../hash.js';
import type { ContainerState, LogEntry, RangeState } from './types.js';

/** True when `epk` lies in `[min, max)` (plain string order, as the SDK compares EPKs). */
export function inRange(epk: string, min: string, max: string): boolean {
  return epk >= min && epk < max;
}

/** Document key → LSN of its newest entry in a log. */
export function latestOf(log: readonly LogEntry[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const e of log) m.set(e.key, e.lsn);
  return m;
}

/** `count` empty ranges cutting the hash domain evenly, with ids `0…count-1`. */
export function initialRanges(count: number, partitionKey: PartitionKeyDefinition): RangeState[] {
  const cuts = [MIN_EPK, ...evenBoundaries(count, partitionKey), MAX_EPK];
  return Array.from({ length: count }, (_, i) => ({ id: String(i), min: cuts[i]!, max: cuts[i + 1]!, parents: [], lsn: 0, log: [], latest: new Map() }));
}

/** The live range with this id; 410/1002 if it was split or merged away, so the SDK refreshes its map. */
export function rangeById(c: ContainerState, rangeId: string): RangeState {
  const r = c.ranges.find((x) => x.id === rangeId);
  if (r) return r;
  if (c.goneRanges.has(rangeId)) {
    throw new CosmosHttpError(410, `partition key range ${rangeId} is gone (split or merged)`, SUBSTATUS.partitionKeyRangeGone);
  }
  throw new CosmosHttpError(404, `partition key range ${rangeId} does not exist in container ${c.id}`);
}

/** The live range holding an EPK. */
export function rangeOf(c: ContainerState, epk: string): RangeState {
  const r = c.ranges.find((x) => inRange(epk, x.min, x.max));
  if (!r) throw new Error(`no range holds EPK ${epk}: the range list has a gap`);
  return r;
}

function replaceRanges(c: ContainerState, old: RangeState[], added: RangeState[]): void {
  // One synchronous step: the old ids answer 410 exactly when /pkranges starts listing the new ones.
  c.ranges = [...c.ranges.filter((r) => !old.includes(r)), ...added].sort((a, b) => (a.min < b.min ? -1 : 1));
  for (const r of old) c.goneRanges.add(r.id);
}

function defaultBoundary(c: ContainerState, r: RangeState): string {
  const epks = [...new Set([...c.docs.values()].map((d) => d.epk).filter((e) => inRange(e, r.min, r.max)))].sort();
  if (epks.length >= 2) return epks[Math.floor(epks.length / 2)]!;
  const mid = midpoint(r.min, r.max, c.partitionKey);
  if (mid === undefined) throw new Error(`range ${r.id} holds fewer than two partition keys; pass a boundary EPK to split it`);
  return mid;
}

/**
 * Splits a live range in two at `boundary` (default: the median EPK of its documents, or the middle of its
 * hash interval when it holds fewer than two keys). Both children continue the parent's LSN sequence and take
 * the half of its log that falls inside them, so the parent's etags stay valid on either child.
 */
export function splitRange(c: ContainerState, rangeId: string, boundary?: string): [RangeState, RangeState] {
  const parent = rangeById(c, rangeId);
  const cut = boundary ?? defaultBoundary(c, parent);
  if (!(cut > parent.min && cut < parent.max)) {
    throw new Error(`split boundary ${cut} must lie strictly inside range ${rangeId} [${parent.min}, ${parent.max})`);
  }
  const parents = [...parent.parents, parent.id];
  const child = (min: string, max: string): RangeState => {
    const log = parent.log.filter((e) => inRange(e.epk, min, max));
    return { id: String(c.nextRangeId++), min, max, parents, lsn: parent.lsn, log, latest: latestOf(log) };
  };
  const left = child(parent.min, cut);
  const right = child(cut, parent.max);
  replaceRanges(c, [parent], [left, right]);
  return [left, right];
}

/**
 * Merges two neighbouring live ranges into one. Its log interleaves both parents' logs by LSN and its
 * sequence continues from the larger parent LSN, so a parent's etag read with that parent's EPK bounds (what
 * the SDK sends after a merge) still means the same position.
 */
export function mergeRanges(c: ContainerState, leftId: string, rightId: string): RangeState {
  const left = rangeById(c, leftId);
  const right = rangeById(c, rightId);
  if (left.max !== right.min) throw new Error(`ranges ${leftId} and ${rightId} are not neighbours (${left.max} ≠ ${right.min})`);
  const log = [...left.log, ...right.log].sort((a, b) => a.lsn - b.lsn);
  const merged: RangeState = {
    id: String(c.nextRangeId++),
    min: left.min,
    max: right.max,
    parents: [...left.parents, left.id, ...right.parents, right.id],
    lsn: Math.max(left.lsn, right.lsn),
    log,
    latest: latestOf(log),
  };
  replaceRanges(c, [left, right], [merged]);
  return merged;
}

/** Physical partitions the service gives a new container: about one per 10,000 RU/s of (maximum) throughput. */
export const RU_PER_PHYSICAL_PARTITION = 10_000;

/**
 * The partition count the service would give a container created with `throughput` RU/s (manual, or the
 * autoscale maximum): `ceil(throughput / 10,000)`, at least 1. Without a throughput (shared or serverless), 1.
 */
export function partitionsForThroughput(throughput: number | undefined): number {
  if (throughput === undefined || !(throughput > 0)) return 1;
  return Math.max(1, Math.ceil(throughput / RU_PER_PHYSICAL_PARTITION));
}
