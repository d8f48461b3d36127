/**
 * Nothing important is silent without a subscriber: when no one listens to a processor's events, a halted
 * partition, a failure that repeats, a stall and a fatal stop become `process.emitWarning(…, { type:
 * 'RxfeedWarning', code: 'RXFEED_<KIND>' })`, once per kind and then at a falling rate (virtual clock).
 */
import { asyncScheduler, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ProcessWarnings } from '../../src/feed/processWarnings.js';
import {
  checkpointEvery,
  createChangeFeed,
  eachBatch,
  type FeedEvent,
  materializeToView,
  MemoryLeaseStore,
  MemorySource,
  MemoryViewStore,
  processChanges,
  type ChangeProcessorHandle,
} from '../../src/index.js';
import { FaultEnv, faultyViewStore } from '../support/faults/index.js';

interface Doc {
  id: string;
  n: number;
}

const FAST = { pollIntervalMs: 50, leaseAcquireIntervalMs: 200, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000, leasePrefix: 'w.', startFrom: 'beginning' } as const;

/** Warnings rxfeed emitted while a test ran. */
let warnings: (Error & { code?: string })[] = [];
const listen = (warning: Error) => {
  if (warning.name === 'RxfeedWarning') warnings.push(warning);
};
const cleanups: (() => unknown)[] = [];
beforeEach(() => {
  warnings = [];
  process.on('warning', listen);
  vi.useFakeTimers();
});
afterEach(async () => {
  const done = Promise.allSettled(cleanups.splice(0).map((c) => c()));
  await vi.advanceTimersByTimeAsync(5_000);
  await done;
  vi.useRealTimers();
  process.off('warning', listen);
});

const codes = () => warnings.map((w) => w.code);

describe('with no one listening to events$', () => {
  it('a halted partition is a warning (RXFEED_HALTED), and a failure that repeats is one too (RXFEED_REPEATED_FAILURE)', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    source.write({ id: 'poison', n: 1 });
    const handle: ChangeProcessorHandle = processChanges<Doc>(
      { source, leases: new MemoryLeaseStore(), instanceName: 'a', ...FAST },
      {
        processChanges() {
          throw new Error('cannot ship (injected)');
        },
      },
    );
    cleanups.push(() => handle.close());
    await vi.advanceTimersByTimeAsync(2_000);
    expect(codes()).toContain('RXFEED_HALTED');
    expect(codes()).toContain('RXFEED_REPEATED_FAILURE');
    const halted = warnings.find((w) => w.code === 'RXFEED_HALTED')!;
    expect(halted.message).toMatch(/owner=a lease=0/);
    expect(halted.message).toMatch(/events\$/);
    // The partition is retried and halts again and again: still one warning per kind within the first minute.
    expect(codes().filter((c) => c === 'RXFEED_HALTED')).toHaveLength(1);
  });

  it('a sink that refuses for good is a fatal warning (RXFEED_FATAL)', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const env = new FaultEnv({ seed: 1, scheduler: asyncScheduler });
    const view = faultyViewStore(new MemoryViewStore<{ n: number }>(), { write: [{ kind: 'rejected', count: 1 }] }, env);
    const feed = createChangeFeed<Doc>({ source, leases: new MemoryLeaseStore(), instanceName: 'a', ...FAST });
    const subscription: Subscription = feed.changes$.pipe(materializeToView(view, { project: (c) => ({ n: c.document!.n }) }), checkpointEvery(1)).subscribe({ error: () => undefined });
    cleanups.push(() => subscription.unsubscribe(), () => feed.stop());
    source.write({ id: 'x', n: 1 });
    await vi.advanceTimersByTimeAsync(1_000);
    // First the fatal failure; the lease it gives back (close reason Error) may follow as a stall.
    expect(codes()[0]).toBe('RXFEED_FATAL');
    expect(codes().filter((c) => c === 'RXFEED_FATAL')).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/42P01/);
  });
});

describe('with a listener', () => {
  it('nothing is warned about: the events go to the listener', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    source.write({ id: 'poison', n: 1 });
    const events: FeedEvent[] = [];
    const feed = createChangeFeed<Doc>({ source, leases: new MemoryLeaseStore(), instanceName: 'a', ...FAST });
    const listening = feed.events$.subscribe((e) => events.push(e));
    const subscription = feed.changes$
      .pipe(
        eachBatch(() => {
          throw new Error('cannot ship (injected)');
        }),
        checkpointEvery(1),
      )
      .subscribe();
    cleanups.push(() => subscription.unsubscribe(), () => feed.stop(), () => listening.unsubscribe());
    await vi.advanceTimersByTimeAsync(2_000);
    expect(events.some((e) => e.type === 'leaseReleased' && e.reason === 'Halted')).toBe(true);
    expect(warnings).toEqual([]);
  });
});

describe('ProcessWarnings', () => {
  it('warns once per kind, then at a falling rate (1, 2, 4 … minutes apart), counting what it stood for', async () => {
    let now = 0;
    const w = new ProcessWarnings('host', () => now);
    const stall: FeedEvent = { type: 'stall', owner: 'host', lease: '3', message: 'no batch of lease 3 reached the checkpoint for 60 s' };
    const repeat: FeedEvent = { type: 'error', owner: 'host', lease: '3', error: new Error('ECONNREFUSED'), kind: 'infrastructure', attempts: 3 };
    const first: FeedEvent = { type: 'error', owner: 'host', error: new Error('once'), kind: 'infrastructure', attempts: 1 };
    const at = new Map<string, number[]>();
    const messages: string[] = [];
    // Captured as emitted (the 'warning' event itself comes a tick later, when `now` has moved on).
    const spy = vi.spyOn(process, 'emitWarning').mockImplementation(((message: string, options: { type: string; code: string }) => {
      expect(options.type).toBe('RxfeedWarning');
      at.set(options.code, [...(at.get(options.code) ?? []), now]);
      messages.push(message);
    }) as typeof process.emitWarning);
    try {
      // One stall and one repeated failure every second for 10 minutes of virtual time.
      for (; now <= 600_000; now += 1_000) {
        w.consider(stall);
        w.consider(repeat);
        w.consider(first); // a first failure is not worth a warning
        w.consider({ type: 'leaseAcquired', owner: 'host', lease: '3', epoch: 1 });
      }
      expect(at.get('RXFEED_STALL')).toEqual([0, 60_000, 180_000, 420_000]);
      expect(at.get('RXFEED_REPEATED_FAILURE')).toEqual([0, 60_000, 180_000, 420_000]);
      expect([...at.keys()].sort()).toEqual(['RXFEED_REPEATED_FAILURE', 'RXFEED_STALL']);
      expect(messages[2]).toMatch(/\(59 more like it since the last warning\)/);
    } finally {
      spy.mockRestore();
    }
  });
});
