/**
 * A throttling storm longer than the lease expiration (suspicion 4 of the review): throttled reads are
 * answers, not an unreadable partition, so the lease is kept (not handed round the hosts, each cooling
 * down), and reading goes on as soon as the storm ends.
 */
import { describe, expect, it } from 'vitest';
import { checkpointEvery, createChangeFeed, MemoryLeaseStore, MemorySource, type FeedEvent } from '../../src/index.js';
import { ReadFailures } from '../../src/feed/reader/ReadFailures.js';
import { FaultEnv, faultySource, VirtualClock } from '../support/faults/index.js';

describe('a throttling storm', () => {
  it('never gives the lease up, however long it lasts, and reading resumes after it', async () => {
    const clock = new VirtualClock(1_700_000_000_000);
    const env = new FaultEnv({ seed: 7, scheduler: clock });
    const memory = new MemorySource<{ id: string }>({ partitions: 1, now: () => clock.now(), scheduler: clock });
    const source = faultySource(memory, { read: [{ kind: 'throttle', probability: 1, retryAfterMs: 500, during: 'storm' }] }, env);
    const events: FeedEvent[] = [];
    const feed = createChangeFeed<{ id: string }>({
      source,
      leases: new MemoryLeaseStore(),
      instanceName: 'a',
      leasePrefix: 'storm.',
      scheduler: clock,
      pollIntervalMs: 100,
      leaseAcquireIntervalMs: 200,
      leaseRenewIntervalMs: 300,
      leaseExpirationMs: 1_000,
      events: (e) => events.push(e),
      telemetry: false,
    });
    let delivered = 0;
    const subscription = feed.changes$.pipe(checkpointEvery(1)).subscribe((b) => (delivered += b.size));
    await clock.advance(1_000);
    env.turnOn('storm');
    memory.write({ id: 'during' });
    await clock.advance(10_000); // ten lease expirations of nothing but 429s
    expect(delivered).toBe(0);
    expect(events.filter((e) => e.type === 'leaseReleased' || e.type === 'leaseLost')).toEqual([]);
    expect(events.filter((e) => e.type === 'readRetry').length).toBeGreaterThan(10);
    env.turnOff('storm');
    await clock.advance(2_000);
    expect(delivered).toBe(1);
    expect(events.filter((e) => e.type === 'leaseAcquired')).toHaveLength(1);
    await feed.stop();
    subscription.unsubscribe();
  });

  it('counts only unanswered reads towards giving a lease up', () => {
    let now = 0;
    const failures = new ReadFailures(() => now, 1_000);
    for (; now < 5_000; now += 250) expect(failures.failed(500, now, true).giveUp).toBe(false);
    expect(failures.failed(undefined, now).giveUp).toBe(false); // unanswered from now on
    now += 600;
    expect(failures.failed(undefined, now).giveUp).toBe(false);
    now += 500;
    expect(failures.failed(undefined, now).giveUp).toBe(true);
    failures.succeeded();
    expect(failures.failed(undefined, now).giveUp).toBe(false);
  });
});
