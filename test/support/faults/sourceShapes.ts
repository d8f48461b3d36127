import type { Partition, Position, StartFrom } from '../../../src/core/Partition.js';
import { RxfeedError } from '../../../src/errors/index.js';
import type { Source } from '../../../src/sources/Source.js';
import { forwardSource } from './forwardSource.js';

/**
 * Positions shaped like a Cosmos DB continuation (base64 of a JSON document holding a quoted etag), not like
 * `MemorySource`'s `mem:<lsn>`: whatever reads or compares positions as text breaks on them.
 */
export const opaquePositions = {
  /** The opaque form of a `mem:<lsn>` position. */
  encode(position: Position): Position {
    const lsn = position.replace(/^mem:/, '');
    return Buffer.from(JSON.stringify({ V: 2, Rid: 'c2ltAA==', Continuation: [{ State: { type: 'continuation', value: `"${lsn}"` } }] })).toString('base64');
  },
  /** The `mem:<lsn>` position an opaque one stands for; throws for one this codec did not make. */
  decode(position: Position): Position {
    try {
      const doc = JSON.parse(Buffer.from(position, 'base64').toString('utf8')) as { Continuation: { State: { value: string } }[] };
      const value = doc.Continuation[0]!.State.value;
      return `mem:${JSON.parse(value) as string}`;
    } catch {
      throw new RxfeedError(`position ${JSON.stringify(position)} was not made by this source`);
    }
  },
};

/**
 * A source whose positions are opaque continuation documents ({@link opaquePositions}), over one that makes
 * `mem:<lsn>` positions: every page, `positionAt` and read position is translated at the seam.
 *
 * @example
 * ```ts
 * const source = withOpaquePositions(new MemorySource({ partitions: 2 }));
 * ```
 */
export function withOpaquePositions<T>(source: Source<T>): Source<T> {
  const from = (start: StartFrom): StartFrom => (typeof start === 'object' && !(start instanceof Date) ? { position: opaquePositions.decode(start.position) } : start);
  return forwardSource(source, {
    checkStart: (checkStart) => (start) => checkStart(from(start)),
    positionAt: (positionAt) => async (p, at, signal) => opaquePositions.encode(await positionAt(p, at, signal)),
    read: (read) => async (request) => {
      const page = await read({ ...request, from: from(request.from) });
      return { ...page, position: opaquePositions.encode(page.position) };
    },
  });
}

/** The listings a source gave over time (what a lagging listing answers from). */
export interface ListingHistory {
  /** The listing as it stood at `atMs` (the latest one made at or before it). */
  at(atMs: number): readonly Partition[];
  /** The partitions made by the latest split or merge, and when, if any. */
  readonly latestChange: { readonly atMs: number; readonly children: readonly Partition[] } | undefined;
}

/**
 * A source whose `listPartitions` lags now and then, as a client's cached routing map does: with chance
 * `staleChance` it answers the listing as it stood `lagMs` ago (a gone parent still listed, its children
 * not yet); with chance `missChance`, within `lagMs` of a split or merge, the current listing without one
 * of the new children (a listing that misses a child for a moment). Draws come from `random` only.
 *
 * @example
 * ```ts
 * const source = laggingListings(memory, history, { now: () => clock.now(), random, lagMs: 300, staleChance: 0.3, missChance: 0.1 });
 * ```
 */
export function laggingListings<T>(
  source: Source<T>,
  history: ListingHistory,
  options: { readonly now: () => number; readonly random: () => number; readonly lagMs: number; readonly staleChance: number; readonly missChance: number; readonly on: () => boolean; readonly struck?: (kind: 'stale' | 'missing') => void },
): Source<T> {
  return forwardSource(source, {
    listPartitions: (listPartitions) => async (signal) => {
      const current = await listPartitions(signal);
      if (!options.on()) return current;
      const now = options.now();
      const r = options.random();
      const change = history.latestChange;
      if (change && now - change.atMs < options.lagMs) {
        if (r < options.staleChance) {
          options.struck?.('stale');
          return history.at(now - options.lagMs);
        }
        if (r < options.staleChance + options.missChance) {
          options.struck?.('missing');
          const missing = change.children[Math.floor(options.random() * change.children.length)]!;
          return current.filter((p) => p.id !== missing.id);
        }
      }
      return current;
    },
  });
}
