import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { prometheusMetrics } from '../../src/metrics/prometheusMetrics.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { mapChanges } from '../../src/operators/mapChanges.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { advanceUntil } from '../support/memory.js';

interface Doc {
  id: string;
  n: number;
}

function value(text: string, metric: string): number {
  const line = text.split('\n').find((l) => l.startsWith(metric));
  if (!line) throw new Error(`no ${metric} in:\n${text}`);
  return Number(line.split(' ').at(-1));
}

describe('prometheusMetrics', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('reports leases owned, credit in use, checkpoints and item failures of a running processor', async () => {
    const source = new MemorySource<Doc>({ partitions: 3 });
    for (let i = 0; i < 90; i++) source.write({ id: `d${i}`, n: i });
    // Two failed reads of one partition: below the 3 in a row that make an error event, counted all the same.
    source.faults.add({ kind: 'throttle', retryAfterMs: 10, count: 1, partition: '0' });
    source.faults.add({ kind: 'transient', statusCode: 503, count: 1, partition: '0' });
    const feed = createChangeFeed<Doc>({ source, leases: new MemoryLeaseStore(), leasePrefix: 'test.', instanceName: 'host-a', pollIntervalMs: 100 });
    const registry = new Registry();
    const metrics = await prometheusMetrics(feed, { registry });
    let seen = 0;
    const subscription = feed.changes$
      .pipe(
        mapChanges((c) => {
          if (c.document?.n === 7) throw new Error('poison');
          return c;
        }, { onFailure: { retry: { attempts: 1 }, skip: true } }),
        checkpointEvery({ count: 10, ms: 50 }),
      )
      .subscribe((b) => (seen += b.origin?.readCount ?? 0));
    await advanceUntil(() => seen === 90);
    await vi.advanceTimersByTimeAsync(100);

    const text = await registry.metrics();
    expect(value(text, 'rxfeed_leases_owned{owner="host-a"}')).toBe(3);
    expect(value(text, 'rxfeed_in_flight_changes{owner="host-a"}')).toBe(0);
    expect(value(text, 'rxfeed_lease_events_total{owner="host-a",event="acquired"}')).toBe(3);
    expect(value(text, 'rxfeed_read_failures_total{owner="host-a",failure="throttled"}')).toBe(1);
    expect(value(text, 'rxfeed_read_failures_total{owner="host-a",failure="unavailable"}')).toBe(1);
    expect(text).not.toContain('rxfeed_errors_total{owner="host-a",error="TransientError"');
    expect(value(text, 'rxfeed_checkpointed_changes_total{owner="host-a"}')).toBe(90);
    expect(value(text, 'rxfeed_checkpoints_total{owner="host-a"}')).toBeGreaterThanOrEqual(3);
    expect(value(text, 'rxfeed_errors_total{owner="host-a",error="HandlerError",kind="item"}')).toBe(1);
    expect(text).not.toContain('rxfeed_dead_letters_total{'); // skipped, not dead-lettered

    await feed.stop();
    subscription.unsubscribe();
    expect(value(await registry.metrics(), 'rxfeed_leases_owned{owner="host-a"}')).toBe(0);
    metrics.stop();
    expect(await registry.metrics()).not.toContain('rxfeed_');
  });

  it('counts the changes written to the dead-letter sink', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    for (let i = 0; i < 20; i++) source.write({ id: `d${i}`, n: i });
    const feed = createChangeFeed<Doc>({ source, leases: new MemoryLeaseStore(), leasePrefix: 'dl.', instanceName: 'host-a', pollIntervalMs: 100 });
    const registry = new Registry();
    const metrics = await prometheusMetrics(feed, { registry });
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    let seen = 0;
    const subscription = feed.changes$
      .pipe(
        mapChanges((c) => {
          if (c.document!.n % 7 === 3) throw new Error('poison');
          return c;
        }, { onFailure: { retry: { attempts: 1 }, deadLetter } }),
        checkpointEvery({ count: 5, ms: 50 }),
      )
      .subscribe((b) => (seen += b.origin?.readCount ?? 0));
    await advanceUntil(() => seen === 20);
    expect(deadLetter.size).toBe(3); // d3, d10, d17
    expect(value(await registry.metrics(), 'rxfeed_dead_letters_total{owner="host-a"}')).toBe(3);
    await feed.stop();
    subscription.unsubscribe();
    metrics.stop();
  });

  it('exports the lag of each owned lease at scrape time, in changes and seconds, without wiring lag$', async () => {
    const source = new MemorySource<Doc>({ partitions: 2 });
    const leases = new MemoryLeaseStore();
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}`, n: i });
    const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'host-a', leasePrefix: 'm.', pollIntervalMs: 1_000 });
    const registry = new Registry();
    const metrics = await prometheusMetrics(feed, { registry, lag: { source, leases, leasePrefix: 'm.', intervalMs: 0 } });
    let seen = 0;
    const subscription = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 10 })).subscribe((b) => (seen += b.size));
    await advanceUntil(() => seen === 40);
    await vi.advanceTimersByTimeAsync(20);
    const [p0, p1] = source.partitions();
    let text = await registry.metrics();
    expect(value(text, `rxfeed_lease_lag_changes{owner="host-a",lease="${p0!.id}"}`)).toBe(0);
    expect(value(text, `rxfeed_lease_lag_changes{owner="host-a",lease="${p1!.id}"}`)).toBe(0);

    // Ten new changes in one partition, scraped before the reader's next poll: that lease is 10 behind.
    let written = 0;
    for (let i = 100; written < 10; i++) {
      if (source.partitionFor(`x${i}`) !== p0!.id) continue;
      source.write({ id: `x${i}`, n: i });
      written++;
    }
    // Scraped before the reader's next poll (virtual time stands still): that lease is 10 behind.
    text = await registry.metrics();
    expect(value(text, `rxfeed_lease_lag_changes{owner="host-a",lease="${p0!.id}"}`)).toBe(10);
    expect(value(text, `rxfeed_lease_lag_changes{owner="host-a",lease="${p1!.id}"}`)).toBe(0);
    expect(value(text, `rxfeed_lease_lag_seconds{owner="host-a",lease="${p0!.id}"}`)).toBe(0);
    await advanceUntil(() => seen === 50);
    await vi.advanceTimersByTimeAsync(20);
    expect(value(await registry.metrics(), `rxfeed_lease_lag_changes{owner="host-a",lease="${p0!.id}"}`)).toBe(0);
    await feed.stop();
    subscription.unsubscribe();
    // Leases this host no longer owns are not reported.
    expect(await registry.metrics()).not.toMatch(/rxfeed_lease_lag_changes\{[^}]*\} /);
    metrics.stop();
  });
});
