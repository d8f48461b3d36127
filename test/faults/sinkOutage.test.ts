/**
 * A sink outage must not end processing for good. Through the public API on a running processor
 * (MemorySource, MemoryLeaseStore, a fault-injecting view store, fake timers):
 * - a view that is down for 6 s (connection refused) is waited out inside the sink: the leases are kept and
 *   renewed (no `leaseLost`, no `leaseReleased`), the failure is an `error` event of kind `infrastructure`
 *   with a running `attempts` count, and once the view is back every change is written and checkpointed;
 * - a write that cannot succeed by waiting (a missing table) ends the stream with a typed `SinkError`.
 */
import { asyncScheduler, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { checkpointEvery, createChangeFeed, type FeedEvent, materializeToView, MemoryLeaseStore, MemorySource, MemoryViewStore, SinkError } from '../../src/index.js';
import { FaultEnv, faultyViewStore } from '../support/faults/index.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { pollIntervalMs: 50, leaseAcquireIntervalMs: 200, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000, leasePrefix: 'o.', startFrom: 'beginning' } as const;

let subscription: Subscription | undefined;
let stop: (() => Promise<void>) | undefined;
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(async () => {
  subscription?.unsubscribe();
  const stopping = stop?.();
  await vi.advanceTimersByTimeAsync(5_000);
  await stopping;
  subscription = stop = undefined;
  vi.useRealTimers();
});

function setup(kind: 'unavailable' | 'rejected') {
  const source = new MemorySource<Doc>({ partitions: 3 });
  const leases = new MemoryLeaseStore();
  const rows = new MemoryViewStore<{ n: number }>();
  const env = new FaultEnv({ seed: 1, scheduler: asyncScheduler });
  const view = faultyViewStore(rows, { write: [{ kind, probability: 1, during: 'outage' }] }, env);
  const events: FeedEvent[] = [];
  const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'a', ...FAST, events: (e) => events.push(e) });
  stop = () => feed.stop();
  let failure: unknown;
  subscription = feed.changes$
    .pipe(materializeToView(view, { project: (c) => ({ n: c.document!.n }) }), checkpointEvery({ count: 1, ms: 10 }))
    .subscribe({ error: (e: unknown) => (failure = e) });
  return { source, leases, rows, env, events, failure: () => failure };
}

describe('a view that is down', () => {
  it('is waited out inside the sink with the leases kept, reported with running attempts, and nothing is lost', async () => {
    const { source, leases, rows, env, events, failure } = setup('unavailable');
    await vi.advanceTimersByTimeAsync(1_000);
    const owned = events.filter((e) => e.type === 'leaseAcquired').length;
    expect(owned).toBe(3);
    env.turnOn('outage');
    for (let i = 0; i < 30; i++) source.write({ id: `d${i}`, n: i });
    await vi.advanceTimersByTimeAsync(6_000);
    expect(await rows.rows()).toEqual([]);
    env.turnOff('outage');
    await vi.advanceTimersByTimeAsync(12_000);

    expect(failure()).toBeUndefined();
    expect((await rows.rows()).length).toBe(30);
    // The leases were kept and renewed all along (expiration is 1 s; the outage lasted 6 s).
    expect(events.filter((e) => e.type === 'leaseLost' || e.type === 'leaseReleased')).toEqual([]);
    expect(events.filter((e) => e.type === 'leaseAcquired')).toHaveLength(owned);
    const reports = events.flatMap((e) => (e.type === 'error' ? [e] : []));
    expect(reports.length).toBeGreaterThan(0);
    for (const e of reports) {
      expect(e.kind).toBe('infrastructure');
      expect(e.error.message).toMatch(/ECONNREFUSED/);
    }
    // A running count, thinned (1, 3, 10, …): the outage is visible without flooding.
    const attempts = new Set(reports.map((e) => e.attempts));
    expect(attempts.has(1) && attempts.has(3)).toBe(true); // backoff 100 ms doubling: ~7 attempts in 6 s
    expect([...attempts].every((n) => [1, 3, 10, 30, 100].includes(n!))).toBe(true);
    // Every partition's checkpoint reached its last change.
    const { leases: all } = await leases.list('o.');
    const last = new Map<string, number>();
    for (const row of await rows.rows()) last.set(row.partition, Math.max(row.lsn, last.get(row.partition) ?? 0));
    for (const lease of all.filter((l) => last.has(l.leaseToken))) expect(lease.continuation).toMatch(new RegExp(`${last.get(lease.leaseToken)}$`));
  });

  it('ends the stream with a SinkError when waiting cannot help (a missing table)', async () => {
    const { source, env, failure } = setup('rejected');
    await vi.advanceTimersByTimeAsync(1_000);
    env.turnOn('outage');
    source.write({ id: 'x', n: 1 });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(failure()).toBeInstanceOf(SinkError);
    expect(failure()).toMatchObject({ code: '42P01' });
  });
});
