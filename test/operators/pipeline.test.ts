import { bufferTime, concatMap, map, mergeMap, timer, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { asBatches, type BatchOrBatches } from '../../src/core/ChangeBatch.js';
import { HandlerError } from '../../src/errors/index.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { eachBatch } from '../../src/operators/eachBatch.js';
import { eachChange } from '../../src/operators/eachChange.js';
import { filterChanges } from '../../src/operators/filterChanges.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { advanceUntil, lsnOfPosition, memoryFeed, seededRandom } from '../support/memory.js';

/** The operators on a real feed (MemorySource + MemoryLeaseStore, fake timers): what reaches the checkpoint. */

interface Doc {
  id: string;
  n: number;
}

const PREFIX = 'ops.';

function setup(partitions: number, writes: number) {
  const { source, feed, events, checkpoints } = memoryFeed<Doc>({ partitions, writes, prefix: PREFIX, options: { maxItemCount: 20, maxInFlightChanges: 200 } });
  /** True once every partition's checkpoint is stored at its latest LSN. */
  const caughtUp = async () => {
    const positions = await checkpoints();
    return source.partitions().every((p) => positions.get(p.id) === source.latestLsn(p.id));
  };
  return { source, feed, events, caughtUp };
}

describe('operators on a running feed', () => {
  let subscription: Subscription | undefined;
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    subscription?.unsubscribe();
    subscription = undefined;
    vi.useRealTimers();
  });

  it("a mapChanges handler that throws, under onFailure 'skip', surfaces as error events with the partition and the change; the checkpoint still reaches the end", async () => {
    const { feed, events, caughtUp } = setup(3, 300);
    const poison = new Set(['d7', 'd150', 'd299']);
    const seen: string[] = [];
    subscription = feed.changes$
      .pipe(
        mapChanges((c) => {
          if (poison.has(c.id)) throw new Error(`cannot map ${c.id}`);
          return c;
        }, { onFailure: { retry: { attempts: 1 }, skip: true } }),
        checkpointEvery({ count: 50, ms: 1_000 }),
      )
      .subscribe((b) => seen.push(...asBatches(b).flatMap((x) => x.changes.map((c) => c.id))));
    await advanceUntil(caughtUp, { stepMs: 50 });
    const errors = events.flatMap((e) => (e.type === 'error' ? [e] : []));
    expect(errors.map((e) => e.change?.id).sort()).toEqual([...poison].sort());
    for (const e of errors) {
      expect(e.error).toBeInstanceOf(HandlerError);
      expect(e.lease).toBe((e.error as HandlerError).partition);
    }
    expect(seen).toHaveLength(297);
    expect(seen.filter((id) => poison.has(id))).toEqual([]);
    await stop(feed);
  });

  it('a filterChanges that drops every change still moves every checkpoint to the end, without stalls', async () => {
    const { feed, events, caughtUp } = setup(4, 400);
    let kept = 0;
    subscription = feed.changes$
      .pipe(filterChanges(() => false), checkpointEvery({ count: 100, ms: 500 }))
      .subscribe((b) => (kept += asBatches(b).reduce((n, x) => n + x.size, 0)));
    await advanceUntil(caughtUp, { stepMs: 50 });
    expect(kept).toBe(0);
    expect(events.filter((e) => e.type === 'stall')).toEqual([]);
    await stop(feed);
  });

  it.each([1, 2, 3, 4, 5])(
    'eachBatch and eachChange with random durations keep every partition in order at the checkpoint (seed %i)',
    async (seed) => {
      const random = seededRandom(seed);
      const { source, feed, events, caughtUp } = setup(4, 400);
      const reached = new Map<string, number[]>(); // partition → LSNs that reached the checkpoint
      const positions = new Map<string, number[]>(); // partition → batch positions, in arrival order
      const record = (value: BatchOrBatches<Doc>) => {
        for (const b of asBatches(value)) {
          reached.set(b.partition, [...(reached.get(b.partition) ?? []), ...b.changes.map((c) => c.lsn)]);
          positions.set(b.partition, [...(positions.get(b.partition) ?? []), lsnOfPosition(b.position)]);
        }
      };
      const slowly = <C extends Change<Doc>>(c: C) => timer(Math.floor(random() * 30)).pipe(map(() => c));
      subscription = feed.changes$
        .pipe(
          eachChange(mergeMap(slowly, 4), { concurrency: 2 }),
          bufferTime(50),
          eachBatch(() => timer(Math.floor(random() * 300)), { concurrency: 3 }),
          eachChange(concatMap(slowly)),
          checkpointEvery({ count: 100, ms: 1_000 }),
        )
        .subscribe(record);
      await advanceUntil(caughtUp, { stepMs: 50 });
      for (const p of source.partitions()) {
        // Every change exactly once (mergeMap may reorder changes inside a batch, never batches).
        const lsns = [...(reached.get(p.id) ?? [])].sort((a, b) => a - b);
        expect(lsns).toEqual(Array.from({ length: source.latestLsn(p.id) }, (_, i) => i + 1));
        const order = positions.get(p.id) ?? [];
        expect(order).toEqual([...order].sort((a, b) => a - b));
      }
      // The reader reports batches that reach the checkpoint out of order (or never) as stalls.
      expect(events.filter((e) => e.type === 'stall' || e.type === 'error')).toEqual([]);
      await stop(feed);
    },
  );
});

async function stop(feed: { stop(): Promise<void> }): Promise<void> {
  let stopped = false;
  void feed.stop().then(() => (stopped = true));
  await advanceUntil(() => stopped);
}
