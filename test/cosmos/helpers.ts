import type { Container, CosmosClient } from '@azure/cosmos';
import type { Change } from '../../src/core/Change.js';
import type { Partition, Position, StartFrom } from '../../src/core/Partition.js';
import { PartitionGoneError } from '../../src/errors/index.js';
import type { Source } from '../../src/sources/Source.js';
import { freshContainer as freshContainerIn } from '../support/cosmos.js';

export interface Doc {
  id: string;
  pk: string;
  v: number;
}

/** A fresh container (`/pk`, hash V2) in database `db`, with a name no other test uses. */
export function freshContainer(client: CosmosClient, prefix = 'src'): Promise<Container> {
  return freshContainerIn(client, `${prefix}-${process.pid}`, { paths: ['/pk'], version: 2 });
}

/** Writes `count` documents `${prefix}${i}` with partition keys spread over the key space. */
export async function writeDocs(container: Container, count: number, prefix = 'd', start = 0): Promise<string[]> {
  const ids: string[] = [];
  const batch: Promise<unknown>[] = [];
  for (let i = start; i < start + count; i++) {
    const id = `${prefix}${i}`;
    ids.push(id);
    batch.push(container.items.create<Doc>({ id, pk: `k${i}`, v: i }));
    if (batch.length >= 50) await Promise.all(batch.splice(0));
  }
  await Promise.all(batch);
  return ids;
}

/** Reads one partition from `from` until a read returns nothing new; returns the changes and the end position. */
export async function drainPartition<T>(
  source: Source<T>,
  partition: Partition,
  from: StartFrom,
  maxItemCount = 100,
): Promise<{ changes: Change<T>[]; position: Position }> {
  const changes: Change<T>[] = [];
  let start = from;
  for (;;) {
    const page = await source.read({ partition, from: start, maxItemCount });
    changes.push(...page.changes);
    start = { position: page.position };
    if (page.changes.length === 0) return { changes, position: page.position };
  }
}

/**
 * Reads every partition to its end, following splits the way a lease coordinator does: a gone partition is
 * replaced by the partitions now covering its range, each starting at the gone one's position.
 */
export async function drainAll<T>(
  source: Source<T>,
  positions: Map<string, StartFrom>,
  maxItemCount = 100,
): Promise<Change<T>[]> {
  const out: Change<T>[] = [];
  for (let round = 0; round < 10; round++) {
    const partitions = await source.listPartitions();
    let gone = false;
    for (const p of partitions) {
      const from = positions.get(p.id) ?? parentStart(p, positions) ?? 'beginning';
      try {
        const { changes, position } = await drainPartition(source, p, from, maxItemCount);
        out.push(...changes);
        positions.set(p.id, { position });
      } catch (err) {
        if (!(err instanceof PartitionGoneError)) throw err;
        gone = true;
      }
    }
    if (!gone) return out;
  }
  throw new Error('partitions kept changing');
}

function parentStart(p: Partition, positions: Map<string, StartFrom>): StartFrom | undefined {
  for (const parent of [...(p.parents ?? [])].reverse()) {
    const from = positions.get(parent);
    if (from) return from;
  }
  return undefined;
}

/** Resolves after `ms` of real time (integration tests only). */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
