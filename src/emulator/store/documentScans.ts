import { MAX_EPK, type PartitionKeyComponent } from '../hash.js';
import { partitionKeyMatcher } from './partitionKeys.js';
import { inRange } from './ranges.js';
import type { ContainerState, Doc } from './types.js';

/** Which documents a read covers: an EPK interval and/or a partition key (or key prefix). */
export interface DocumentScope {
  min?: string;
  max?: string;
  pk?: PartitionKeyComponent[];
}

/** A document and its place in the container: its EPK, then its key (partition key and id). */
export interface PositionedDoc {
  epk: string;
  key: string;
  body: Doc;
}

/** Container order: by EPK, then by key. */
export function comparePositions(a: { epk: string; key: string }, b: { epk: string; key: string }): number {
  if (a.epk !== b.epk) return a.epk < b.epk ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * The documents of a container in `scope`, each with the place it holds whatever the ranges are (its EPK, then its
 * key), in the container's order: a position in this order stays valid across splits and merges.
 */
export function documentsInScope(c: ContainerState, scope: DocumentScope): PositionedDoc[] {
  const keyMatches = scope.pk && partitionKeyMatcher(scope.pk);
  const out: PositionedDoc[] = [];
  for (const [key, d] of c.docs) {
    if (scope.min !== undefined && !inRange(d.epk, scope.min, scope.max ?? MAX_EPK)) continue;
    if (keyMatches && !keyMatches(d.pk)) continue;
    out.push({ epk: d.epk, key, body: d.body });
  }
  return out.sort(comparePositions);
}
