/**
 * Poison changes on a running processor (MemorySource, MemoryLeaseStore, fake timers): retried, then
 * dead-lettered (the partition moves on, the checkpoint passes the change only after the letter is
 * written) or halting only their partition (the checkpoint never passes the change).
 */
import { concatMap } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import { callbackDeadLetterSink } from '../../src/deadletter/callbackDeadLetterSink.js';
import type { DeadLetter } from '../../src/deadletter/DeadLetter.js';
import type { OnFailure } from '../../src/failures/failurePolicy.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { DeadLetterFencedError, HandlerError, InvalidOptionsError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { eachBatch } from '../../src/operators/eachBatch.js';
import { eachChange } from '../../src/operators/eachChange.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import { materializeToView } from '../../src/sinks/materializeToView.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { batch as testBatch, recordingTracker } from '../operators/batches.js';
import { withFakeTimers } from '../support/fakeTimers.js';
import { FAST_TIMINGS, memoryFeed } from '../support/memory.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { ...FAST_TIMINGS, leasePrefix: 'p.' } as const;
const RETRY = { attempts: 3, initialBackoffMs: 10, jitter: 0 } as const;

const subscriptions = withFakeTimers();

/** A processor over two partitions with `docs` written; `poison` is the id that fails. */
function setup(docs = 20) {
  const { source, leases, events, feed, checkpoints } = memoryFeed<Doc>({ partitions: 2, writes: docs, prefix: FAST.leasePrefix, options: { instanceName: 'a', ...FAST, maxItemCount: 5 } });
  /** The LSN stored for `token`'s lease (-1 while it has none). */
  const checkpointOf = async (token: string) => (await checkpoints()).get(token) ?? -1;
  return { source, leases, events, feed, checkpointOf };
}

/** The LSN a memory position ends with (-1: no checkpoint yet). */
function lsnOf(position: string | null): number {
  return position === null ? -1 : Number(/(\d+)$/.exec(position)?.[1]);
}

/** A chain that fails for `poison` `failures` times (Infinity: always), recording what it processed. */
function flaky(poison: string, failures: number) {
  const calls = new Map<string, number>();
  const done: string[] = [];
  const chain = concatMap(async (c: Change<Doc>) => {
    const n = (calls.get(c.id) ?? 0) + 1;
    calls.set(c.id, n);
    if (c.id === poison && n <= failures) throw new Error(`cannot process ${c.id} (injected)`);
    done.push(c.id);
    return c;
  });
  return { chain, calls, done };
}

describe('onFailure on eachChange', () => {
  it('a change that fails twice then succeeds is processed once, with no dead letter', async () => {
    const { feed, events } = setup();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const { chain, calls, done } = flaky('d7', 2);
    subscriptions.push(feed.changes$.pipe(eachChange(chain, { onFailure: { retry: RETRY, deadLetter } }), checkpointEvery({ count: 1, ms: 10 })).subscribe());
    await vi.advanceTimersByTimeAsync(3_000);
    expect(calls.get('d7')).toBe(3);
    expect(done.filter((id) => id === 'd7')).toHaveLength(1);
    expect(new Set(done).size).toBe(20);
    expect(deadLetter.size).toBe(0);
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
  });

  it('a change that always fails is dead-lettered after the configured attempts, and its partition goes on', async () => {
    const { feed, source, events, checkpointOf } = setup();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const { chain, calls, done } = flaky('d7', Infinity);
    subscriptions.push(feed.changes$.pipe(eachChange(chain, { onFailure: { retry: RETRY, deadLetter } }), checkpointEvery({ count: 1, ms: 10 })).subscribe());
    await vi.advanceTimersByTimeAsync(3_000);
    expect(calls.get('d7')).toBe(3);
    const [letter] = await deadLetter.list();
    expect(deadLetter.size).toBe(1);
    const partition = letter!.leaseToken;
    expect(letter).toMatchObject({ documentId: 'd7', operation: 'upsert', document: { id: 'd7', n: 7 }, attempts: 3, epoch: expect.any(Number) });
    expect(letter!.error.message).toMatch(/cannot process d7/);
    expect(letter!.epoch).toBeGreaterThan(0);
    // The item failure is an event of kind 'item' with its attempts; never a feed failure.
    expect(events).toContainEqual(expect.objectContaining({ type: 'error', kind: 'item', lease: partition, attempts: 3 }));
    // Then the dead letter is an event of its own (metrics count it; nobody needs to read the store to know).
    expect(events.filter((e) => e.type === 'deadLettered')).toEqual([
      expect.objectContaining({ lease: partition, lsns: [letter!.lsn], sink: deadLetter.description, operator: 'eachChange' }),
    ]);
    // The partition goes on: later writes to it are processed and the checkpoint passes the poison.
    const later = source.write({ id: 'later', n: 99 }, { partitionKey: 'd7' });
    expect(later.partition).toBe(partition);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(done).toContain('later');
    expect(await checkpointOf(partition)).toBe(later.lsn);
    expect(done).not.toContain('d7');
  });

  it('a dead-letter sink that is down holds the checkpoint (nothing lost) until it recovers', async () => {
    const { feed, source, events, checkpointOf } = setup(0);
    let down = true;
    const letters: DeadLetter<Doc>[] = [];
    const deadLetter = callbackDeadLetterSink<Doc>((batch) => {
      if (down) throw new Error('queue unreachable (injected)');
      letters.push(...batch);
    }, 'test queue');
    const { chain, done } = flaky('poison', Infinity);
    subscriptions.push(feed.changes$.pipe(eachChange(chain, { onFailure: { retry: RETRY, deadLetter } }), checkpointEvery({ count: 1, ms: 10 })).subscribe());
    await vi.advanceTimersByTimeAsync(500);
    const before = source.write({ id: 'before', n: 1 }, { partitionKey: 'k' });
    await vi.advanceTimersByTimeAsync(500);
    const poison = source.write({ id: 'poison', n: 2 }, { partitionKey: 'k' });
    await vi.advanceTimersByTimeAsync(200);
    const after = source.write({ id: 'after', n: 3 }, { partitionKey: 'k' });
    await vi.advanceTimersByTimeAsync(10_000);
    // Held: the checkpoint stays before the poison, the change after it waits, the failure is visible.
    expect(await checkpointOf(before.partition)).toBe(before.lsn);
    expect(poison.lsn).toBeGreaterThan(before.lsn);
    expect(done).not.toContain('after');
    expect(letters).toEqual([]);
    expect(events.some((e) => e.type === 'error' && e.kind === 'infrastructure' && /dead-letter write to test queue failed/.test(e.error.message))).toBe(true);
    down = false;
    await vi.advanceTimersByTimeAsync(40_000);
    expect(letters.map((l) => l.documentId)).toEqual(['poison']);
    expect(done).toContain('after');
    expect(await checkpointOf(before.partition)).toBe(after.lsn);
  });

  it("'halt' stops only its partition, gives its lease back with close reason Halted, and never checkpoints past the change", async () => {
    const { feed, source, events, checkpointOf } = setup(0);
    const { chain, calls, done } = flaky('poison', Infinity);
    const closed: string[] = [];
    subscriptions.push(
      feed.partitions$.subscribe((p) => {
        p.pipe(eachChange(chain, { onFailure: { retry: RETRY, halt: true } }), checkpointEvery({ count: 1, ms: 10 })).subscribe({
          complete: () => closed.push(`${p.leaseToken}:${p.closeReason}`),
        });
      }),
    );
    await vi.advanceTimersByTimeAsync(500);
    const before = source.write({ id: 'before', n: 1 }, { partitionKey: 'k' });
    const poisoned = before.partition;
    const other = source.partitions().find((p) => p.id !== poisoned)!.id;
    await vi.advanceTimersByTimeAsync(500);
    source.write({ id: 'poison', n: 2 }, { partitionKey: 'k' });
    source.write({ id: 'after', n: 3 }, { partitionKey: 'k' });
    await vi.advanceTimersByTimeAsync(300);
    expect(closed).toEqual([`${poisoned}:Halted`]);
    expect(events).toContainEqual(expect.objectContaining({ type: 'leaseReleased', lease: poisoned, reason: 'Halted' }));
    expect(events).toContainEqual(expect.objectContaining({ type: 'error', kind: 'item', lease: poisoned, attempts: 3 }));
    expect(await checkpointOf(poisoned)).toBe(before.lsn);
    expect(done).not.toContain('after');
    // The other partition goes on.
    let otherKey = 0;
    while (source.partitionFor(`o${otherKey}`) !== other) otherKey++;
    source.write({ id: 'elsewhere', n: 4 }, { partitionKey: `o${otherKey}` });
    await vi.advanceTimersByTimeAsync(300);
    expect(done).toContain('elsewhere');
    // Nothing is skipped: the lease comes back (after one expiration) and the change is tried again.
    const tried = calls.get('poison')!;
    await vi.advanceTimersByTimeAsync(3_000);
    expect(calls.get('poison')!).toBeGreaterThan(tried);
    expect(await checkpointOf(poisoned)).toBe(before.lsn);
    expect(done).not.toContain('poison');
  });
});

describe("'halt' on a partition that split", () => {
  /**
   * A source whose gone partitions still answer what they held until read to their end (`drainGone`): a
   * halted parent never reads to its end, so only the listing tells it is gone. As with Cosmos DB (whose gone
   * parent answers 410 at once), its children take over from its checkpoint and only the one holding the
   * failing change halts; before, the parent was retaken and halted again forever, holding up the whole range.
   */
  it('hands a halted split parent to its children from its checkpoint: only the child holding the change halts', async () => {
    const source = new MemorySource<Doc>({ partitions: 1, drainGone: true });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'a', ...FAST, maxItemCount: 5, events: (e) => events.push(e) });
    const checkpointOf = async (token: string) => lsnOf((await leases.list('p.')).leases.find((l) => l.leaseToken === token)?.continuation ?? null);
    const { chain, done } = flaky('poison', Infinity);
    subscriptions.push(feed.changes$.pipe(eachChange(chain, { onFailure: { retry: RETRY, halt: true } }), checkpointEvery({ count: 1, ms: 10 })).subscribe());
    await vi.advanceTimersByTimeAsync(500);
    source.write({ id: 'before', n: 0 }, { partitionKey: 'before' });
    await vi.advanceTimersByTimeAsync(500);
    const poison = source.write({ id: 'poison', n: 1 }, { partitionKey: 'poison' });
    const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
    for (const [i, k] of keys.entries()) source.write({ id: k, n: i + 2 }, { partitionKey: k });
    await vi.advanceTimersByTimeAsync(300);
    expect(events).toContainEqual(expect.objectContaining({ type: 'leaseReleased', lease: '0', reason: 'Halted' }));
    expect(done).toEqual(['before']);

    source.split('0');
    const poisoned = source.partitionFor('poison');
    const healthy = keys.filter((k) => source.partitionFor(k) !== poisoned);
    const held = keys.filter((k) => source.partitionFor(k) === poisoned);
    expect(healthy.length).toBeGreaterThan(0);
    source.write({ id: 'late', n: 99 }, { partitionKey: healthy[0] });
    await vi.advanceTimersByTimeAsync(6_000);
    // The parent was replaced from its checkpoint (not retaken and halted again)...
    expect(events).toContainEqual(expect.objectContaining({ type: 'partitionSplit', lease: '0' }));
    expect((await leases.list('p.')).leases.map((l) => l.leaseToken)).not.toContain('0');
    // ...the healthy half went on, also with what the parent held after the failing change...
    expect(done).toEqual(expect.arrayContaining([...healthy, 'late']));
    // ...and only the child holding the failing change halted, before it.
    expect(events).toContainEqual(expect.objectContaining({ type: 'leaseReleased', lease: poisoned, reason: 'Halted' }));
    for (const k of [...held, 'poison']) expect(done).not.toContain(k);
    expect(await checkpointOf(poisoned)).toBeLessThan(poison.lsn);
  });

  it('keeps halting a partition the listing still shows (a lagging listing, or a live partition)', async () => {
    const source = new MemorySource<Doc>({ partitions: 1, drainGone: true });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'a', ...FAST, maxItemCount: 5, events: (e) => events.push(e) });
    const { chain } = flaky('poison', Infinity);
    subscriptions.push(feed.changes$.pipe(eachChange(chain, { onFailure: { retry: RETRY, halt: true } }), checkpointEvery({ count: 1, ms: 10 })).subscribe());
    await vi.advanceTimersByTimeAsync(500);
    source.write({ id: 'poison', n: 1 }, { partitionKey: 'poison' });
    await vi.advanceTimersByTimeAsync(4_000);
    const halts = events.filter((e) => e.type === 'leaseReleased' && e.reason === 'Halted');
    expect(halts.length).toBeGreaterThanOrEqual(2);
    expect(events.some((e) => e.type === 'partitionSplit')).toBe(false);
    expect((await leases.list('p.')).leases.map((l) => l.leaseToken)).toContain('0');
  });
});

describe('onFailure on eachBatch and materializeToView', () => {
  it('eachBatch runs a batch that keeps failing change by change and dead-letters only the change that fails alone', async () => {
    const { feed } = setup();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const seen: ChangeBatch<Doc>[] = [];
    const done: string[] = [];
    let calls = 0;
    const work = async (b: ChangeBatch<Doc>) => {
      if (b.changes.some((c) => c.id === 'd3')) {
        calls++;
        throw new Error('batch rejected (injected)');
      }
      done.push(...b.changes.map((c) => c.id));
    };
    subscriptions.push(feed.changes$.pipe(eachBatch(work, { onFailure: { retry: RETRY, deadLetter } }), checkpointEvery(1)).subscribe((b) => seen.push(b)));
    await vi.advanceTimersByTimeAsync(3_000);
    expect(calls).toBe(3); // the batch once, then d3 alone twice
    const letters = await deadLetter.list();
    expect(letters.map((l) => [l.documentId, l.attempts])).toEqual([['d3', 3]]);
    expect(letters[0]!.error.message).toBe('batch rejected (injected)');
    const ids = seen.flatMap((b) => b.changes.map((c) => c.id));
    expect(ids).not.toContain('d3');
    expect(ids).toHaveLength(19);
    expect(new Set(done).size).toBe(19);
  });

  it('materializeToView retries a projection like every operator, then dead-letters the change and writes the rest', async () => {
    const { feed } = setup();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const view = new MemoryViewStore<{ n: number }>();
    const project = (c: Change<Doc>) => {
      if (c.id === 'd5') throw new TypeError('no total (injected)');
      return { n: c.document!.n };
    };
    subscriptions.push(feed.changes$.pipe(materializeToView(view, { project, onFailure: { deadLetter } }), checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(3_000);
    // `retry` means the same everywhere: the default policy's 3 attempts, not one silent try.
    expect((await deadLetter.list()).map((l) => [l.documentId, l.attempts])).toEqual([['d5', 3]]);
    expect(await view.rows()).toHaveLength(19);
  });
});

describe('onFailure: halt on a view', () => {
  it('leaves the halting partition out of the view write and gives its lease back; the other partition is written', async () => {
    const { feed, source, events } = setup(0);
    const view = new MemoryViewStore<{ n: number }>();
    const project = (c: Change<Doc>) => {
      if (c.id === 'poison') throw new TypeError('cannot project (injected)');
      return { n: c.document!.n };
    };
    subscriptions.push(feed.changes$.pipe(materializeToView(view, { project, mode: 'exactlyOnce', onFailure: 'halt' }), checkpointEvery(1)).subscribe());
    await vi.advanceTimersByTimeAsync(500);
    const poison = source.write({ id: 'poison', n: 1 }, { partitionKey: 'k' });
    source.write({ id: 'sibling', n: 2 }, { partitionKey: 'k' });
    let i = 0;
    while (source.partitionFor(`o${i}`) === poison.partition) i++;
    source.write({ id: `o${i}`, n: 3 }, { partitionKey: `o${i}` });
    await vi.advanceTimersByTimeAsync(500);
    expect(events).toContainEqual(expect.objectContaining({ type: 'leaseReleased', lease: poison.partition, reason: 'Halted' }));
    expect((await view.rows()).map((r) => r.key)).toEqual([`o${i}`]);
    expect((await view.positions()).get(poison.partition)?.lsn ?? -1).toBeLessThan(poison.lsn);
  });
});

describe('onFailure, unit', () => {
  it('rejects a policy that says neither where to put letters nor to halt', () => {
    expect(() => eachChange(concatMap(async (c: Change<Doc>) => c), { onFailure: {} as OnFailure })).toThrow(InvalidOptionsError);
    expect(() => eachChange(concatMap(async (c: Change<Doc>) => c), { onFailure: { deadLetter: new MemoryDeadLetterStore(), halt: true } as unknown as OnFailure })).toThrow(/not several/);
    expect(() => eachBatch(() => undefined, { onFailure: { retry: { attempts: 0 }, halt: true } })).toThrow(/onFailure\.retry\.attempts/);
  });

  it('a fenced dead-letter write drops the batch back to its reader with the fencing error', async () => {
    const tracker = recordingTracker('0');
    const fenced = new DeadLetterFencedError('0', 1, 2);
    const deadLetter = callbackDeadLetterSink(() => Promise.reject(fenced));
    const out: unknown[] = [];
    const { of } = await import('rxjs');
    of(testBatch('0', [1, 2], { tracker }))
      .pipe(eachBatch(() => Promise.reject(new Error('x')), { onFailure: { retry: { attempts: 1 }, deadLetter } }))
      .subscribe((b) => out.push(b));
    await vi.advanceTimersByTimeAsync(10);
    expect(out).toEqual([]);
    expect(tracker.dropped).toEqual([[1, fenced]]);
    expect(tracker.errors.some((e) => e instanceof HandlerError)).toBe(true);
  });

  it('halting a batch with no reader fails the stream rather than skip the change', async () => {
    const { of } = await import('rxjs');
    const errors: unknown[] = [];
    of(testBatch('0', [1]))
      .pipe(eachBatch(() => Promise.reject(new Error('x')), { onFailure: { retry: { attempts: 1 }, halt: true } }))
      .subscribe({ error: (e) => errors.push(e) });
    await vi.advanceTimersByTimeAsync(10);
    expect(errors[0]).toBeInstanceOf(HandlerError);
  });
});

describe("'halt' across hosts: the fleet-wide backoff of a halted lease", () => {
  /** Two hosts over two partitions, sharing a source and a lease store; the chain fails on `poison` while `failing()`. */
  function twoHosts(failing: () => boolean) {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    const events: FeedEvent[] = [];
    const done: string[] = [];
    const calls = { poison: 0 };
    for (const name of ['a', 'b']) {
      const feed = createChangeFeed<Doc>({ source, leases, instanceName: name, ...FAST, maxItemCount: 5, events: (e) => events.push(e) });
      const chain = concatMap(async (c: Change<Doc>) => {
        if (c.id === 'poison') {
          calls.poison++;
          if (failing()) throw new Error('cannot process poison (injected)');
        }
        done.push(c.id);
        return c;
      });
      subscriptions.push(feed.changes$.pipe(eachChange(chain, { onFailure: { retry: RETRY, halt: true } }), checkpointEvery({ count: 1, ms: 10 })).subscribe());
    }
    /** Virtual times (ms) of the acquisitions of lease `token`, by any host, in order. */
    const acquisitions = (token: string) => events.filter((e) => e.type === 'leaseAcquired' && e.lease === token).length;
    const lease = async (token: string) => (await leases.list(FAST.leasePrefix)).leases.find((l) => l.leaseToken === token)!;
    return { source, leases, events, done, calls, acquisitions, lease };
  }

  it('a poison change does not bounce its lease around the fleet: it is retried after growing pauses, and the healthy lease stays put', async () => {
    const w = twoHosts(() => true);
    await vi.advanceTimersByTimeAsync(2_000);
    const poisoned = w.source.write({ id: 'poison', n: 1 }, { partitionKey: 'k' }).partition;
    const healthy = w.source.partitions().find((p) => p.id !== poisoned)!.id;
    const healthyBefore = w.acquisitions(healthy);
    const before = w.acquisitions(poisoned);
    const haltTimes: number[] = [];
    for (let t = 0; t < 30_000; t += 50) {
      const halts = w.events.filter((e) => e.type === 'leaseReleased' && e.lease === poisoned && e.reason === 'Halted').length;
      while (haltTimes.length < halts) haltTimes.push(t);
      await vi.advanceTimersByTimeAsync(50);
    }
    const taken = w.acquisitions(poisoned) - before;
    // Backoffs of 2, 4, 8, … acquire intervals (100 ms here): 0.2 + 0.4 + … + 12.8 s is about 25 s, so at most
    // 8 or 9 tries in 30 s, where without the backoff the two hosts took it hundreds of times.
    expect(taken).toBeGreaterThanOrEqual(3);
    expect(taken).toBeLessThanOrEqual(10);
    // The pauses between halts grow.
    const gaps = haltTimes.slice(1).map((t, i) => t - haltTimes[i]!);
    expect(gaps.at(-1)!).toBeGreaterThanOrEqual(4 * gaps[0]!);
    // The halted lease says so, with the count of consecutive halts, and the healthy lease never moved.
    const stored = await w.lease(poisoned);
    expect(Number(stored.properties['rxfeed.halts'])).toBe(haltTimes.length);
    expect(w.acquisitions(healthy)).toBe(healthyBefore);
    expect(w.done).not.toContain('poison');
  });

  it('the host that takes a halted lease next and gets past the change clears the signal', async () => {
    let failing = true;
    const w = twoHosts(() => failing);
    await vi.advanceTimersByTimeAsync(2_000);
    const poisoned = w.source.write({ id: 'poison', n: 1 }, { partitionKey: 'k' }).partition;
    await vi.advanceTimersByTimeAsync(3_000);
    expect((await w.lease(poisoned)).properties['rxfeed.haltedAtEpoch']).toBeDefined();
    failing = false;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(w.done).toContain('poison');
    const stored = await w.lease(poisoned);
    expect(stored.owner).not.toBeNull();
    expect(stored.properties['rxfeed.haltedAtEpoch']).toBeUndefined();
    expect(stored.properties['rxfeed.halts']).toBeUndefined();
  });
});
