import type { Partition, Position, StartFrom } from '../core/Partition.js';
import { InvalidOptionsError } from '../errors/index.js';
import type { Source } from '../sources/Source.js';
import { isStartFrom } from './options.js';

/** A `startFrom` option: one start for every partition, or a function of the partition. */
export type StartOption = StartFrom | ((partition: Partition) => StartFrom);

/**
 * The start `option` gives `partition`, checked like the `startFrom` option (a function's answer is checked
 * when it is asked, and the source refuses a start it cannot read from).
 *
 * @internal
 */
export function startOf(option: StartOption, source: Source<unknown>, partition: Partition): StartFrom {
  if (typeof option !== 'function') return option;
  let start: unknown;
  try {
    start = option(partition);
  } catch (error) {
    throw new InvalidOptionsError('startFrom', `the startFrom function threw for partition ${partition.id}: ${(error as Error)?.message ?? String(error)}`);
  }
  if (!isStartFrom(start)) {
    throw new InvalidOptionsError('startFrom', `the startFrom function returned ${JSON.stringify(start)} for partition ${partition.id}; expected 'beginning', 'now', a valid Date or { position }`);
  }
  source.checkStart?.(start);
  return start;
}

/**
 * Pins a start to a concrete position of `partition`, so that "now" (and a time) means the start of the run,
 * whenever the partition is first read: the position is stored in the lease when it is created.
 *
 * - `'beginning'` → `null` (the lease starts empty, the reader starts at the beginning);
 * - `{ position }` → that position;
 * - `'now'` → the position before the first change made at or after `startedAtMs` (the run's start) when the
 *   source can start from a time (Cosmos DB resolves a time to the second, so a change made up to a second
 *   earlier may come along); otherwise (Cosmos DB's AllVersionsAndDeletes mode starts only from "now" or a
 *   position) the partition's position at this call, made before the lease exists;
 * - a `Date` → the position before the first change made at or after it.
 *
 * A source without `positionAt` cannot pin: `null`, and the reader starts from `start` at its first read.
 *
 * @internal
 */
export async function pinStart(source: Source<unknown>, start: StartFrom, partition: Partition, startedAtMs: number): Promise<Position | null> {
  if (start === 'beginning') return null;
  if (typeof start === 'object' && !(start instanceof Date)) return start.position;
  if (!source.positionAt) return null;
  const at = start === 'now' && startsFromTimes(source) ? new Date(startedAtMs) : start;
  return source.positionAt(partition, at);
}

/** Whether `source` can start from a point in time (it has no `checkStart`, or that accepts one). */
function startsFromTimes(source: Source<unknown>): boolean {
  try {
    source.checkStart?.(new Date(0));
    return true;
  } catch {
    return false;
  }
}
