/** The first page of a lease read beside the write that makes it this host's (FirstPages), and the reader taking it. */
import { asyncScheduler } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { Partition } from '../../src/core/Partition.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { FirstPages } from '../../src/feed/reader/FirstPages.js';
import { ReadLimiter } from '../../src/feed/reader/ReadLimiter.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import type { Page, ReadRequest, Source } from '../../src/sources/Source.js';
import { forwardSource } from '../support/faults/forwardSource.js';
import { withFakeTimers } from '../support/fakeTimers.js';
import { FAST_TIMINGS } from '../support/memory.js';

const partition: Partition = { id: '0', range: { minInclusive: '', maxExclusive: 'FF' } };

/** A source whose reads are recorded and answered by hand (an abort fails a read). */
function handSource() {
  const reads: { request: ReadRequest; answer: (page: Page<unknown>) => void }[] = [];
  const source = {
    read: (request: ReadRequest) =>
      new Promise<Page<unknown>>((resolve, reject) => {
        reads.push({ request, answer: resolve });
        request.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      }),
  } as unknown as Source<unknown>;
  return { source, reads };
}

describe('FirstPages', () => {
  const subscriptions = withFakeTimers();

  it('gives the page read for an ownership to the reader of that ownership, from that position, once', async () => {
    const { source, reads } = handSource();
    const limiter = new ReadLimiter(4);
    const pages = new FirstPages(source, limiter, asyncScheduler, new AbortController().signal, 100, 1_000);
    pages.read('p.0', 2, partition, 'lsn-5', 'beginning');
    expect(reads.map((r) => r.request.from)).toEqual([{ position: 'lsn-5' }]);
    expect(reads[0]!.request.maxItemCount).toBe(100);
    expect(limiter.inFlight).toBe(1); // it holds a read slot while in flight
    const read = pages.take('p.0', 2, 'lsn-5');
    expect(read).toBeDefined();
    expect(pages.take('p.0', 2, 'lsn-5')).toBeUndefined(); // taken once
    const page = read!(new AbortController().signal);
    reads[0]!.answer({ changes: [], position: 'lsn-6' });
    await expect(page).resolves.toEqual({ changes: [], position: 'lsn-6' });
    expect(limiter.inFlight).toBe(0);
  });

  it('is not used for another epoch or position (the read is aborted), and nothing is read for a start still to pin', () => {
    const { source, reads } = handSource();
    const pages = new FirstPages(source, new ReadLimiter(4), asyncScheduler, new AbortController().signal, 100, 1_000);
    pages.read('p.0', 2, partition, 'lsn-5', 'now');
    expect(pages.take('p.0', 3, 'lsn-5')).toBeUndefined();
    expect(reads[0]!.request.signal!.aborted).toBe(true);
    pages.read('p.0', 2, partition, null, 'beginning');
    expect(pages.take('p.0', 2, 'lsn-5')).toBeUndefined();
    expect(reads[1]!.request.signal!.aborted).toBe(true);
    // A lease with no position whose start is 'now' (or a time) is pinned by its reader: nothing read here.
    pages.read('p.0', 2, partition, null, 'now');
    expect(reads).toHaveLength(2);
    expect(pages.size).toBe(0);
  });

  it('reads nothing without a free read slot; a page nobody takes is dropped after keepMs', async () => {
    const { source, reads } = handSource();
    const limiter = new ReadLimiter(1);
    const pages = new FirstPages(source, limiter, asyncScheduler, new AbortController().signal, 100, 1_000);
    expect(limiter.tryAcquire()).toBe(true);
    pages.read('p.0', 1, partition, null, 'beginning');
    expect(reads).toHaveLength(0);
    limiter.release();
    pages.read('p.0', 1, partition, null, 'beginning');
    expect(pages.size).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(pages.size).toBe(0);
    expect(reads[0]!.request.signal!.aborted).toBe(true);
    expect(pages.take('p.0', 1, null)).toBeUndefined();
    // The write did not make the lease this host's: the page is dropped at once.
    const drop = pages.read('p.1', 1, partition, null, 'beginning');
    expect(pages.size).toBe(1);
    drop!();
    expect(pages.size).toBe(0);
    expect(reads[1]!.request.signal!.aborted).toBe(true);
  });

  it('a fresh processor reads its first pages while the creates of its leases are on their way, and reads each only once', async () => {
    const memory = new MemorySource<{ id: string }>({ partitions: 4 });
    for (let i = 0; i < 40; i++) memory.write({ id: `d${i}` });
    const inner = new MemoryLeaseStore();
    // Every lease request takes 50 ms; the reads answer at once.
    const slow = <R>(work: () => Promise<R>) => new Promise<void>((resolve) => setTimeout(resolve, 50)).then(work);
    const store: LeaseStore = {
      list: (p) => slow(() => inner.list(p)),
      read: (id) => slow(() => inner.read(id)),
      createIfAbsent: (l) => slow(() => inner.createIfAbsent(l)),
      replace: (l) => slow(() => inner.replace(l)),
      delete: (l) => slow(() => inner.delete(l)),
    };
    const started = Date.now();
    const readsAt: { partition: string; from: unknown; at: number }[] = [];
    const source = forwardSource(memory, {
      read: (read) => (request) => {
        readsAt.push({ partition: request.partition.id, from: request.from, at: Date.now() - started });
        return read(request);
      },
    });
    const createsAt: number[] = [];
    const watched: LeaseStore = { ...store, createIfAbsent: (l) => (l.leaseToken.startsWith('.') ? undefined : createsAt.push(Date.now() - started), store.createIfAbsent(l)) };
    const feed = createChangeFeed({ source, leases: watched, instanceName: 'a', leasePrefix: 'f.', ...FAST_TIMINGS, pollIntervalMs: 10_000 });
    const batches: number[] = [];
    subscriptions.push(feed.changes$.pipe(checkpointEvery(1)).subscribe(() => batches.push(Date.now() - started)));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(createsAt).toHaveLength(4);
    const sent = createsAt[0]!;
    // The first read of each partition left with the creates, and the first batches came as the creates answered.
    const firstReads = readsAt.filter((r) => r.from === 'beginning');
    expect(firstReads.map((r) => r.partition).sort()).toEqual(['0', '1', '2', '3']);
    expect(firstReads.every((r) => r.at === sent)).toBe(true);
    expect(Math.min(...batches)).toBe(sent + 50);
    // Each page was read once: the reader took the page read for it, and went on from its end.
    expect(readsAt.filter((r) => r.from === 'beginning')).toHaveLength(4);
    expect(batches.length).toBeGreaterThanOrEqual(4);
    const stopped = feed.stop();
    await vi.advanceTimersByTimeAsync(2_000);
    await stopped;
  });
});
