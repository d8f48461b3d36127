/**
 * Safe by default, through the public API (MemorySource, MemoryLeaseStore, fake timers):
 * - with no `onFailure`, a failing change is never checkpointed past: retried, then its partition halts,
 *   loudly (error events with attempts, `leaseReleased` with reason `Halted`); a "database down" inside
 *   `eachBatch` loses nothing, and once it is back every change is processed;
 * - a fencing error inside a handler (`ViewFencedError`: another host owns the partition now) is never an
 *   item failure: nothing is retried change by change or dead-lettered (repro-handler-fenced-deadletter).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FAST_TIMINGS } from '../support/memory.js';
import {
  checkpointEvery,
  createChangeFeed,
  eachBatch,
  type FeedEvent,
  HandlerError,
  MemoryDeadLetterStore,
  MemoryLeaseStore,
  MemorySource,
  MemoryViewStore,
  processChanges,
  type ChangeProcessorHandle,
  ViewFencedError,
} from '../../src/index.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { ...FAST_TIMINGS, leasePrefix: 's.', startFrom: 'beginning' } as const;

const handles: ChangeProcessorHandle[] = [];
const stops: (() => Promise<void>)[] = [];
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(async () => {
  const closing = Promise.allSettled([...handles.splice(0).map((h) => h.close()), ...stops.splice(0).map((s) => s())]);
  await vi.advanceTimersByTimeAsync(5_000);
  await closing;
  vi.useRealTimers();
});

const lsnOf = (position: string | null | undefined) => (position ? Number(/(\d+)$/.exec(position)?.[1]) : -1);

describe('with no onFailure', () => {
  it('a handler that keeps failing on a change halts its partition before it: retried, reported, never checkpointed past', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const processed: string[] = [];
    for (let i = 0; i < 6; i++) source.write({ id: `d${i}`, n: i });
    const poison = source.write({ id: 'poison', n: -1 });
    source.write({ id: 'after', n: 7 });
    const calls = new Map<string, number>();
    handles.push(
      processChanges<Doc>(
        { source, leases, instanceName: 'a', ...FAST, maxItemCount: 5, checkpoint: { count: 1, ms: 10 }, events: (e) => events.push(e) },
        {
          processChanges(changes) {
            for (const c of changes) calls.set(c.id, (calls.get(c.id) ?? 0) + 1);
            if (changes.some((c) => c.id === 'poison')) throw new Error('cannot ship poison (injected)');
            processed.push(...changes.map((c) => c.id));
          },
        },
      ),
    );
    await vi.advanceTimersByTimeAsync(3_000);
    // d0..d4 in the first call; d5 alone after the batch [d5, poison] failed (then again each time the
    // partition is taken back and retried from its checkpoint); poison 3 attempts per round; 'after' never.
    expect(processed.slice(0, 6)).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(new Set(processed.slice(5))).toEqual(new Set(['d5']));
    expect(calls.get('poison')! % 3).toBe(0);
    expect(events).toContainEqual(expect.objectContaining({ type: 'error', kind: 'item', attempts: 3, change: expect.objectContaining({ id: 'poison' }) }));
    expect(events).toContainEqual(expect.objectContaining({ type: 'leaseReleased', reason: 'Halted' }));
    const [lease] = (await leases.list('s.')).leases.filter((l) => l.leaseToken === '0');
    expect(lsnOf(lease?.continuation)).toBeLessThan(poison.lsn);
    expect(processed).not.toContain('after');
  });

  it('a database that is down for a while inside eachBatch loses nothing: the partition halts and resumes, every change is processed once it is back', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}`, n: i });
    let down = true;
    const saved = new Set<string>();
    const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'a', ...FAST, maxItemCount: 5, events: (e) => events.push(e) });
    stops.push(() => feed.stop());
    const subscription = feed.changes$
      .pipe(
        eachBatch(async (batch) => {
          if (down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
          for (const c of batch.changes) saved.add(c.id);
        }),
        checkpointEvery({ count: 1, ms: 10 }),
      )
      .subscribe();
    stops.push(async () => subscription.unsubscribe());
    await vi.advanceTimersByTimeAsync(5_000);
    expect(saved.size).toBe(0);
    // Loud: item failures with their attempts, and halted partitions.
    expect(events.some((e) => e.type === 'error' && e.kind === 'item' && e.error instanceof HandlerError)).toBe(true);
    expect(events.some((e) => e.type === 'leaseReleased' && e.reason === 'Halted')).toBe(true);
    // Nothing was checkpointed past a change that was not saved.
    for (const lease of (await leases.list('s.')).leases) expect(lease.continuation ?? null).toBeNull();
    down = false;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(saved.size).toBe(20);
  });
});

describe('a fencing error inside a handler', () => {
  it('is not an item failure: the change is neither retried alone nor dead-lettered, and the lease goes to its new owner', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const leases = new MemoryLeaseStore();
    const view = new MemoryViewStore<Doc>();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const events: FeedEvent[] = [];
    const attempts: string[] = [];
    handles.push(
      processChanges<Doc>(
        {
          source, leases, instanceName: 'A', ...FAST, leaseRenewIntervalMs: 10_000, leaseExpirationMs: 30_000, leaseAcquireIntervalMs: 10_000,
          checkpoint: { count: 1, ms: 100 }, onFailure: { retry: { attempts: 3, initialBackoffMs: 50 }, deadLetter }, events: (e) => events.push(e),
        },
        {
          async processChanges(changes, ctx) {
            attempts.push(changes.map((c) => c.id).join(','));
            await view.write({
              mode: 'guarded',
              changes: changes.map((c) => ({ key: c.id, row: c.document!, lsn: c.lsn, timestampMs: c.timestampMs, partition: ctx.leaseToken })),
              partitions: [{ partition: ctx.leaseToken, epoch: ctx.epoch, position: `"${changes.at(-1)!.lsn}"`, lsn: changes.at(-1)!.lsn }],
            });
          },
        },
      ),
    );
    source.write({ id: 'a', n: 1 });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(attempts).toEqual(['a']);
    // Host B takes the lease over (epoch + 1) and writes to the view first; A has not noticed yet.
    const lease = (await leases.read('s.0'))!;
    await leases.replace({ ...lease, owner: 'B', epoch: lease.epoch + 1, timestampMs: Date.now() });
    await view.write({ mode: 'guarded', changes: [], partitions: [{ partition: lease.leaseToken, epoch: lease.epoch + 1, position: lease.continuation ?? '"0"', lsn: 0 }] });
    source.write({ id: 'b', n: 2 });
    source.write({ id: 'c', n: 3 });
    await vi.advanceTimersByTimeAsync(1_500);
    expect(await deadLetter.list()).toEqual([]);
    // One call for [b, c], fenced: not run again change by change.
    expect(attempts).toEqual(['a', 'b,c']);
    expect(events).toContainEqual(expect.objectContaining({ type: 'error', kind: 'fencing', error: expect.any(ViewFencedError) }));
    expect(events.some((e) => e.type === 'error' && e.kind === 'item')).toBe(false);
    expect(events).toContainEqual(expect.objectContaining({ type: 'leaseLost', lease: '0' }));
  });
});
