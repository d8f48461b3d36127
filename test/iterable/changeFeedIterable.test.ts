import { NEVER, Subject } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import type { PartitionTracker } from '../../src/core/PartitionTracker.js';
import { InvalidOptionsError, RxfeedError } from '../../src/errors/index.js';
import { changeFeedIterable, iterateProcessor, type ChangeFeedIterableOptions } from '../../src/iterable/changeFeedIterable.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { advanceUntil, storedCheckpoints } from '../support/memory.js';

interface Doc {
  id: string;
  n: number;
}

const PREFIX = 'pull.';

function setup(partitions = 3, writes = 300) {
  const source = new MemorySource<Doc>({ partitions });
  const leases = new MemoryLeaseStore();
  for (let i = 0; i < writes; i++) source.write({ id: `d${i}`, n: i });
  const events: FeedEvent[] = [];
  const options = (extra: Partial<ChangeFeedIterableOptions<Doc>> = {}): ChangeFeedIterableOptions<Doc> => ({
    source,
    leases,
    instanceName: 'host-a',
    leasePrefix: PREFIX,
    pollIntervalMs: 100,
    leaseAcquireIntervalMs: 100,
    maxItemCount: 10,
    events: (e) => events.push(e),
    ...extra,
  });
  const checkpoints = () => storedCheckpoints(leases, PREFIX);
  return { source, leases, events, options, checkpoints };
}

/** Runs `loop` in the background; `finished()` says whether it has returned (or thrown). */
function background(loop: () => Promise<void>) {
  let state: 'running' | 'done' | 'failed' = 'running';
  let error: unknown;
  const promise = loop().then(
    () => void (state = 'done'),
    (e: unknown) => {
      state = 'failed';
      error = e;
    },
  );
  return { promise, finished: () => state !== 'running', state: () => state, error: () => error };
}

describe('changeFeedIterable (MemorySource + MemoryLeaseStore)', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('delivers every change in per-partition order and writes the checkpoints when the loop breaks', async () => {
    const { source, options, events, checkpoints } = setup(3, 300);
    const feed = changeFeedIterable(options({ checkpoint: { count: 50 } }));
    const seen: ChangeBatch<Doc>[] = [];
    const run = background(async () => {
      for await (const batch of feed) {
        seen.push(batch);
        await feed.checkpoint(batch);
        if (seen.reduce((n, b) => n + b.size, 0) >= 300) break;
      }
    });
    await advanceUntil(run.finished);
    expect(run.state()).toBe('done');
    const ids = seen.flatMap((b) => b.changes.map((c) => c.id));
    expect(new Set(ids).size).toBe(300);
    for (const p of source.partitions()) {
      const lsns = seen.filter((b) => b.partition === p.id).flatMap((b) => b.changes.map((c) => c.lsn));
      expect(lsns).toEqual([...lsns].sort((a, b) => a - b));
    }
    // Leaving the loop wrote the last checkpointed position of every partition and released the leases.
    const stored = await checkpoints();
    for (const p of source.partitions()) expect(stored.get(p.id)).toBe(source.latestLsn(p.id));
    expect(events.filter((e) => e.type === 'leaseReleased')).toHaveLength(3);
    expect(events.filter((e) => e.type === 'error' || e.type === 'stall')).toEqual([]);
  });

  it('reads again what was not checkpointed: a second run resumes right after the last checkpoint', async () => {
    const { source, options, checkpoints } = setup(2, 100);
    const first = changeFeedIterable(options());
    const firstSeen: string[] = [];
    const run1 = background(async () => {
      let batches = 0;
      for await (const batch of first) {
        firstSeen.push(...batch.changes.map((c) => c.id));
        // Checkpoint the first three batches only, then leave without checkpointing the fourth.
        if (++batches <= 3) await first.checkpoint(batch);
        else break;
      }
    });
    await advanceUntil(run1.finished);
    expect(run1.state()).toBe('done');
    const afterFirst = await checkpoints();
    expect([...afterFirst.values()].reduce((a, b) => a + b, 0)).toBe(30); // three pages of 10

    const second = changeFeedIterable(options({ instanceName: 'host-b' }));
    const secondSeen: { id: string; partition: string; lsn: number }[] = [];
    const run2 = background(async () => {
      for await (const batch of second) {
        secondSeen.push(...batch.changes.map((c) => ({ id: c.id, partition: batch.partition, lsn: c.lsn })));
        await second.checkpoint(batch);
        if (secondSeen.length >= 70) break;
      }
    });
    await advanceUntil(run2.finished);
    expect(run2.state()).toBe('done');
    // Nothing skipped: every change seen across both runs; the fourth batch of run 1 is seen again.
    expect(new Set([...firstSeen, ...secondSeen.map((c) => c.id)]).size).toBe(100);
    expect(secondSeen).toHaveLength(70);
    for (const p of source.partitions()) {
      const lsns = secondSeen.filter((c) => c.partition === p.id).map((c) => c.lsn);
      if (lsns.length > 0) expect(Math.min(...lsns)).toBe((afterFirst.get(p.id) ?? 0) + 1);
    }
  });

  it('never holds more unacknowledged changes than maxInFlightChanges', async () => {
    const { options } = setup(2, 200);
    const feed = changeFeedIterable(options({ maxInFlightChanges: 40, maxItemCount: 10 }));
    const pending: ChangeBatch<Doc>[] = [];
    let most = 0;
    let total = 0;
    // A slow worker: checkpoints what the loop collected every 500 ms, so the loop runs ahead if it can.
    const worker = setInterval(() => {
      for (const b of pending.splice(0)) void feed.checkpoint(b);
    }, 500);
    const run = background(async () => {
      for await (const batch of feed) {
        pending.push(batch);
        total += batch.size;
        most = Math.max(most, pending.reduce((n, b) => n + b.size, 0));
        if (total >= 200) break;
      }
    });
    await advanceUntil(run.finished);
    clearInterval(worker);
    expect(run.state()).toBe('done');
    expect(total).toBe(200);
    expect(most).toBe(40);
  });

  it('ends a loop that is waiting for a batch when its signal aborts, and releases the leases', async () => {
    const { options, events } = setup(2, 0);
    const controller = new AbortController();
    const feed = changeFeedIterable(options({ signal: controller.signal }));
    let changes = 0;
    const run = background(async () => {
      for await (const batch of feed) {
        changes += batch.size;
        await feed.checkpoint(batch);
      }
    });
    await advanceUntil(() => events.filter((e) => e.type === 'leaseAcquired').length === 2);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(run.finished()).toBe(false);
    controller.abort();
    await advanceUntil(run.finished);
    expect([run.state(), changes]).toEqual(['done', 0]);
    expect(events.filter((e) => e.type === 'leaseReleased')).toHaveLength(2);
    await expect(feed.checkpoint([])).rejects.toThrow(RxfeedError);
  });

  it('stop() from outside lets the loop finish the batches already read, then ends it', async () => {
    const { options, source, checkpoints, events } = setup(2, 60);
    const feed = changeFeedIterable(options());
    const seen: string[] = [];
    const run = background(async () => {
      for await (const batch of feed) {
        seen.push(...batch.changes.map((c) => c.id));
        await feed.checkpoint(batch);
      }
    });
    await advanceUntil(() => seen.length >= 60);
    let stopped = false;
    void feed.stop().then(() => (stopped = true));
    await advanceUntil(() => stopped && run.finished());
    expect(run.state()).toBe('done');
    expect(events.filter((e) => e.type === 'error' || e.type === 'stall')).toEqual([]);
    const stored = await checkpoints();
    for (const p of source.partitions()) expect(stored.get(p.id)).toBe(source.latestLsn(p.id));
  });

  it('validates the checkpoint policy at construction', () => {
    const { options } = setup(1, 0);
    expect(() => changeFeedIterable(options({ checkpoint: 0 }))).toThrow(InvalidOptionsError);
    expect(() => changeFeedIterable(options({ checkpoint: { ms: -5 } }))).toThrow(/ms/);
  });
});

describe('iterateProcessor (stub processor)', () => {
  function stub() {
    const changes$ = new Subject<ChangeBatch<Doc>>();
    const acknowledged: number[] = [];
    const written: string[] = [];
    let stops = 0;
    const tracker: PartitionTracker = {
      leaseToken: '0',
      acknowledge: (sequence) => void acknowledged.push(sequence),
      checkpoint: async (position) => void written.push(position),
      reportError: () => undefined,
      drop: () => undefined,
      signal: new AbortController().signal,
    };
    const batch = (sequence: number) =>
      new ChangeBatch<Doc>({
        partition: '0',
        changes: [{ id: `d${sequence}`, operation: 'create', document: { id: `d${sequence}`, n: sequence }, lsn: sequence, timestampMs: 0 }],
        position: `p${sequence}`,
        origin: { tracker, sequence, readCount: 1 },
      });
    const processor = {
      changes$,
      events$: NEVER,
      owner: 'stub',
      stop: async () => void stops++,
    };
    return { changes$, processor, batch, acknowledged, written, stops: () => stops };
  }

  it('acknowledges on checkpoint(), writes per policy and on return(), and stops the processor', async () => {
    const { changes$, processor, batch, acknowledged, written, stops } = stub();
    const feed = iterateProcessor(processor, { count: 2 });
    const iterator = feed[Symbol.asyncIterator]();
    changes$.next(batch(1));
    changes$.next(batch(2));
    changes$.next(batch(3));
    const first = await iterator.next();
    await feed.checkpoint(first.value as ChangeBatch<Doc>);
    expect([acknowledged, written]).toEqual([[1], []]);
    const second = await iterator.next();
    await feed.checkpoint(second.value as ChangeBatch<Doc>);
    await Promise.resolve();
    expect([acknowledged, written]).toEqual([[1, 2], ['p2']]);
    const third = await iterator.next();
    await feed.checkpoint(third.value as ChangeBatch<Doc>);
    expect(changes$.observed).toBe(true);
    await iterator.return?.();
    // return(): unsubscribed, the last position written, the processor stopped; later pulls are done.
    expect([changes$.observed, written, stops()]).toEqual([false, ['p2', 'p3'], 1]);
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });

  it('aborts a next() that is waiting when return() is called', async () => {
    const { processor } = stub();
    const feed = iterateProcessor(processor, { count: 1 });
    const iterator = feed[Symbol.asyncIterator]();
    const waiting = iterator.next();
    await iterator.return?.();
    expect(await waiting).toEqual({ done: true, value: undefined });
  });

  it('delivers queued batches, then rethrows a feed failure after stopping the processor', async () => {
    const { changes$, processor, batch, stops } = stub();
    const feed = iterateProcessor(processor, { count: 1 });
    changes$.next(batch(1)); // before iteration starts: not subscribed yet, so never delivered
    const seen: string[] = [];
    const loop = (async () => {
      for await (const b of feed) seen.push(b.position);
    })();
    changes$.next(batch(2));
    changes$.error(new Error('resource gone'));
    await expect(loop).rejects.toThrow('resource gone');
    expect([seen, stops()]).toEqual([['p2'], 1]);
  });

  it('can be iterated only once', () => {
    const { processor } = stub();
    const feed = iterateProcessor(processor, { count: 1 });
    feed[Symbol.asyncIterator]();
    expect(() => feed[Symbol.asyncIterator]()).toThrow(/only once/);
  });
});
