import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { CloseReason, FeedEvent } from '../../src/core/events.js';
import type { Position, StartFrom } from '../../src/core/Partition.js';
import { LeaseLostError, ResourceGoneError, TransientError } from '../../src/errors/index.js';
import { CreditPool } from '../../src/feed/CreditPool.js';
import { backoffMs } from '../../src/feed/reader/ReadFailures.js';
import { readPartition, type ReaderContext } from '../../src/feed/reader/readPartition.js';
import type { OwnedLease } from '../../src/leases/LeaseCoordinator.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { CountingSource } from '../support/memory.js';

interface Doc {
  id: string;
}

/**
 * An ownership as the coordinator hands it to a reader, recording what the reader asks of it. Its lease
 * writes can be made to fail (`failWrites`), as a real lease store's can.
 */
function fakeOwned(source: MemorySource<Doc>, partitionId = '0', continuation: Position | null = null) {
  const controller = new AbortController();
  const partition = source.partitions().find((p) => p.id === partitionId)!;
  let closeReason: CloseReason | undefined;
  const drains: (() => Promise<void>)[] = [];
  const checkpoints: Position[] = [];
  const gone: (Position | null)[] = [];
  const released: string[] = [];
  const control = { failWrites: 0 };
  const end = (reason: CloseReason) => {
    if (closeReason) return;
    closeReason = reason;
    controller.abort(reason);
  };
  const write = async () => {
    if (closeReason) throw new LeaseLostError(partition.id, 'me');
    if (control.failWrites > 0) {
      control.failWrites--;
      throw new TransientError('lease store unavailable', { statusCode: 503 });
    }
  };
  const owned: OwnedLease = {
    leaseToken: partition.id,
    partition,
    lease: {
      id: `x${partition.id}`,
      leaseToken: partition.id,
      feedRange: partition.range,
      owner: 'me',
      continuation,
      timestampMs: 0,
      epoch: 3,
      mode: 'latestVersion',
      properties: {},
      etag: '1',
    },
    epoch: 3,
    signal: controller.signal,
    get closeReason() {
      return closeReason;
    },
    checkpoint: async (position) => {
      await write();
      checkpoints.push(position);
    },
    partitionGone: async (position) => {
      await write();
      gone.push(position);
      end('PartitionGone');
    },
    onDrain: (fn) => void drains.push(fn),
    lose: () => end('LeaseLost'),
    release: (why) => {
      released.push(why);
      end('Error');
    },
  };
  return { owned, end, drains, checkpoints, gone, released, control };
}

function context(
  source: CountingSource<Doc>,
  overrides: Partial<ReaderContext<Doc>> = {},
): ReaderContext<Doc> & { events: FeedEvent[]; fatals: Error[] } {
  const events: FeedEvent[] = [];
  const fatals: Error[] = [];
  return {
    source,
    owner: 'me',
    startFrom: 'beginning' as StartFrom,
    maxItemCount: 10,
    pollIntervalMs: 1_000,
    stallTimeoutMs: 60_000,
    drainTimeoutMs: 5_000,
    unreadableTimeoutMs: 60_000,
    scheduler: asyncScheduler,
    pool: new CreditPool(1_000, 10),
    emit: (e) => events.push(e),
    writes: new Set(),
    fatal: (e) => fatals.push(e),
    events,
    fatals,
    ...overrides,
  };
}

describe('partition reader', () => {
  let memory: MemorySource<Doc>;
  let source: CountingSource<Doc>;

  beforeEach(() => {
    vi.useFakeTimers();
    memory = new MemorySource<Doc>({ partitions: 1 });
    source = new CountingSource(memory);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('re-polls at once after a full page and waits pollIntervalMs after a partial or empty one', async () => {
    for (let i = 0; i < 25; i++) memory.write({ id: `d${i}` });
    const { owned } = fakeOwned(memory);
    const batches: ChangeBatch<Doc>[] = [];
    const sub = readPartition(owned, context(source)).subscribe((b) => batches.push(b));
    await vi.advanceTimersByTimeAsync(0);
    // 10 + 10 + 5: two full pages then a partial one, all without waiting
    expect(batches.map((b) => b.size)).toEqual([10, 10, 5]);
    expect(source.reads).toBe(3);
    await vi.advanceTimersByTimeAsync(999);
    expect(source.reads).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(source.reads).toBe(4); // empty read: no batch (the position did not move)
    expect(batches).toHaveLength(3);
    memory.write({ id: 'late' });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(batches.map((b) => b.size)).toEqual([10, 10, 5, 1]);
    expect(batches[3]!.epoch).toBe(3);
    expect(batches.map((b) => b.origin?.sequence)).toEqual([1, 2, 3, 4]);
    sub.unsubscribe();
  });

  it("emits one empty batch for the first 'now' read (a position to checkpoint), then only changes", async () => {
    memory.write({ id: 'old' });
    const { owned } = fakeOwned(memory);
    const batches: ChangeBatch<Doc>[] = [];
    readPartition(owned, context(source, { startFrom: 'now' })).subscribe((b) => batches.push(b));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches).toHaveLength(1);
    expect(batches[0]!.isEmpty).toBe(true);
    memory.write({ id: 'new' });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(batches.map((b) => b.changes.map((c) => c.id))).toEqual([[], ['new']]);
  });

  it("pins a 'now' start in the lease at once, so a host taking over before the first checkpoint skips nothing", async () => {
    memory.write({ id: 'before-start' });
    const { owned, checkpoints } = fakeOwned(memory);
    readPartition(owned, context(source, { startFrom: 'now' })).subscribe();
    await vi.advanceTimersByTimeAsync(0);
    expect(checkpoints).toHaveLength(1);
    const pinned = checkpoints[0]!;
    // The host dies here, before checkpointEvery wrote anything; the next owner resumes from the pin.
    memory.write({ id: 'after-start' });
    const next = fakeOwned(memory, '0', pinned);
    const batches: ChangeBatch<Doc>[] = [];
    readPartition(next.owned, context(source, { startFrom: 'now' })).subscribe((b) => batches.push(b));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches.flatMap((b) => b.changes.map((c) => c.id))).toEqual(['after-start']);
    expect(next.checkpoints).toEqual([]);
  });

  it("resumes from the lease's continuation, ignoring startFrom", async () => {
    for (let i = 0; i < 5; i++) memory.write({ id: `d${i}` });
    const { owned } = fakeOwned(memory, '0', 'mem:3');
    const batches: ChangeBatch<Doc>[] = [];
    readPartition(owned, context(source, { startFrom: 'now' })).subscribe((b) => batches.push(b));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches.flatMap((b) => b.changes.map((c) => c.lsn))).toEqual([4, 5]);
  });

  it('backs off exponentially (capped) on transient errors, and honours retry-after on throttling', async () => {
    memory.write({ id: 'a' });
    memory.faults.add({ kind: 'transient', count: 3 });
    memory.faults.add({ kind: 'throttle', retryAfterMs: 700 });
    const { owned } = fakeOwned(memory);
    const batches: ChangeBatch<Doc>[] = [];
    const ctx = context(source);
    readPartition(owned, ctx).subscribe((b) => batches.push(b));
    const readsAt = async (ms: number, reads: number) => {
      await vi.advanceTimersByTimeAsync(ms - 1);
      expect(source.reads).toBe(reads - 1);
      await vi.advanceTimersByTimeAsync(1);
      expect(source.reads).toBe(reads);
    };
    await vi.advanceTimersByTimeAsync(0);
    expect(source.reads).toBe(1);
    await readsAt(100, 2); // backoff 100, 200, 400 ms
    await readsAt(200, 3);
    await readsAt(400, 4); // this read is throttled: retry after 700 ms
    await readsAt(700, 5);
    expect(batches.map((b) => b.size)).toEqual([1]);
    // A 503 or a 429 is routine until it repeats: the third failure in a row is reported, with its count.
    expect(ctx.events.filter((e) => e.type === 'error').map((e) => e.type === 'error' && [e.kind, e.attempts])).toEqual([['infrastructure', 3]]);
    // Every failed read is a readRetry event all the same (what metrics count), with its cause and delay.
    expect(ctx.events.filter((e) => e.type === 'readRetry').map((e) => e.type === 'readRetry' && [e.failure, e.attempts, e.delayMs])).toEqual([
      ['unavailable', 1, 100],
      ['unavailable', 2, 200],
      ['unavailable', 3, 400],
      ['throttled', 4, 700],
    ]);
    expect([1, 2, 3, 8, 30].map(backoffMs)).toEqual([100, 200, 400, 10_000, 10_000]);
  });

  it('retries unknown errors with backoff and reports them at once, then as they keep repeating (1, 3, 10, …)', async () => {
    memory.faults.add({ kind: 'error', error: new Error('boom'), count: 4 });
    const { owned } = fakeOwned(memory);
    const ctx = context(source);
    readPartition(owned, ctx).subscribe();
    await vi.advanceTimersByTimeAsync(1_500);
    expect(source.reads).toBe(5);
    expect(ctx.events.filter((e) => e.type === 'readRetry')).toHaveLength(4);
    expect(ctx.events.filter((e) => e.type === 'error').map((e) => e.type === 'error' && [e.lease, e.error.message, e.attempts])).toEqual([
      ['0', 'boom', 1],
      ['0', 'boom', 3],
    ]);
  });

  it('aborts the read in flight when unsubscribed', async () => {
    memory.faults.add({ kind: 'latency', ms: 10_000 });
    const { owned } = fakeOwned(memory);
    const sub = readPartition(owned, context(source)).subscribe();
    await vi.advanceTimersByTimeAsync(10);
    const signal = source.requests[0]!.signal!;
    expect(signal.aborted).toBe(false);
    sub.unsubscribe();
    expect(signal.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(20_000);
    expect(source.reads).toBe(1);
  });

  it('completes with the close reason when ownership ends, also during a poll wait', async () => {
    const { owned, end } = fakeOwned(memory);
    const feed = readPartition(owned, context(source));
    let completed = false;
    feed.subscribe({ complete: () => (completed = true) });
    await vi.advanceTimersByTimeAsync(10);
    expect(completed).toBe(false);
    end('LeaseLost');
    await vi.advanceTimersByTimeAsync(0);
    expect(completed).toBe(true);
    expect(feed.closeReason).toBe('LeaseLost');
    expect(feed.leaseToken).toBe('0');
    expect(feed.epoch).toBe(3);
  });

  it('hands a gone partition to the coordinator at the last acknowledged position', async () => {
    for (let i = 0; i < 5; i++) memory.write({ id: `d${i}` });
    const { owned, gone } = fakeOwned(memory);
    const feed = readPartition(owned, context(source));
    const batches: ChangeBatch<Doc>[] = [];
    feed.subscribe((b) => {
      batches.push(b);
      b.origin!.tracker.acknowledge(b.origin!.sequence, b.position);
    });
    await vi.advanceTimersByTimeAsync(0);
    memory.split('0');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(gone).toEqual([batches[0]!.position]);
    expect(feed.closeReason).toBe('PartitionGone');
  });

  it('hands the batches still out over before a gone partition is replaced: their signal aborts first (seed 1722)', async () => {
    // A split parent read to its end while its last batch is still in the pipeline (a relay waiting for a slow
    // broker): the drain gives up, and the children are created from the stored checkpoint. The batch must be
    // ended by then, or a sink or relay still working on it writes after a child's owner wrote later changes.
    const drainGone = new MemorySource<Doc>({ partitions: 1, drainGone: true });
    for (let i = 0; i < 5; i++) drainGone.write({ id: `d${i}` });
    const { owned } = fakeOwned(drainGone);
    const seen: { aborted: boolean; reason: unknown; feedAborted: boolean }[] = [];
    const held: ChangeBatch<Doc>[] = [];
    const feed = readPartition(
      { ...owned, partitionGone: async () => void seen.push({ aborted: held[0]!.origin!.tracker.signal.aborted, reason: held[0]!.origin!.tracker.signal.reason, feedAborted: feed.signal.aborted }) },
      context(new CountingSource(drainGone), { drainTimeoutMs: 500 }),
    );
    feed.subscribe((b) => void held.push(b)); // never acknowledged
    await vi.advanceTimersByTimeAsync(0);
    drainGone.split('0');
    await vi.advanceTimersByTimeAsync(2_000);
    expect(held).toHaveLength(1);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.aborted).toBe(true);
    expect(seen[0]!.reason).toMatchObject({ name: 'AbortError', message: 'ownership of lease 0 ended: PartitionGone' });
    // The feed's signal too (a handler's context.signal): a handler that publishes itself stops as a relay does.
    expect(seen[0]!.feedAborted).toBe(true);
    expect(feed.signal.reason).toBe(seen[0]!.reason);
  });

  it('fails and stops the processor when the resource is gone', async () => {
    memory.faults.add({ kind: 'error', error: new ResourceGoneError('memory') });
    const { owned } = fakeOwned(memory);
    const ctx = context(source);
    const errors: unknown[] = [];
    const feed = readPartition(owned, ctx);
    feed.subscribe({ error: (e) => errors.push(e) });
    await vi.advanceTimersByTimeAsync(0);
    expect(errors[0]).toBeInstanceOf(ResourceGoneError);
    expect(ctx.fatals).toHaveLength(1);
    expect(ctx.events.map((e) => e.type)).toEqual(['error']);
    expect(feed.closeReason).toBe('ResourceGone');
  });

  it('never reads more than its credit, and resumes when acknowledgements return credit', async () => {
    for (let i = 0; i < 100; i++) memory.write({ id: `d${i}` });
    const { owned } = fakeOwned(memory);
    const ctx = context(source, { pool: new CreditPool(25, 10) });
    const batches: ChangeBatch<Doc>[] = [];
    readPartition(owned, ctx).subscribe((b) => batches.push(b));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches.map((b) => b.size)).toEqual([10, 10, 5]);
    expect(ctx.pool.inFlight).toBe(25);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(source.reads).toBe(3);
    // acknowledging batch 2 frees batches 1 and 2 (cumulative)
    const second = batches[1]!;
    second.origin!.tracker.acknowledge(second.origin!.sequence, second.position);
    await vi.advanceTimersByTimeAsync(0);
    expect(ctx.pool.inFlight).toBe(25);
    expect(batches.map((b) => b.size)).toEqual([10, 10, 5, 10, 10]);
  });

  it('drains on a voluntary release: stops reading, waits for acknowledgements, writes the final checkpoint', async () => {
    for (let i = 0; i < 30; i++) memory.write({ id: `d${i}` });
    const { owned, end, drains, checkpoints } = fakeOwned(memory);
    const batches: ChangeBatch<Doc>[] = [];
    const feed = readPartition(owned, context(source));
    feed.subscribe((b) => batches.push(b));
    await vi.advanceTimersByTimeAsync(0);
    let drained = false;
    void drains[0]!().then(() => (drained = true));
    memory.write({ id: 'after-drain' });
    await vi.advanceTimersByTimeAsync(2_000);
    expect(drained).toBe(false);
    const readsAtDrain = source.reads;
    for (const b of batches) b.origin!.tracker.acknowledge(b.origin!.sequence, b.position);
    await vi.advanceTimersByTimeAsync(0);
    expect(drained).toBe(true);
    expect(checkpoints).toEqual([batches.at(-1)!.position]);
    expect(source.reads).toBe(readsAtDrain);
    end('Shutdown');
    await vi.advanceTimersByTimeAsync(0);
    expect(feed.closeReason).toBe('Shutdown');
  });

  it('drains at once when everything read is acknowledged while a poll is in flight (no drain timeout)', async () => {
    memory.faults.add({ kind: 'latency', ms: 10_000 });
    const { owned, end, drains } = fakeOwned(memory);
    readPartition(owned, context(source)).subscribe();
    await vi.advanceTimersByTimeAsync(0);
    // A read is in flight holding a credit reservation; nothing was emitted, so nothing awaits an ack.
    let drained = false;
    void drains[0]!().then(() => (drained = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(drained).toBe(true);
    end('Shutdown');
  });
});
