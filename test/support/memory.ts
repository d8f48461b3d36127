import { vi } from 'vitest';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import type { LeaseListing, LeaseStore } from '../../src/leases/LeaseStore.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Page, ReadRequest, Source } from '../../src/sources/Source.js';
import type { Partition } from '../../src/core/Partition.js';
import type { FeedEvent } from '../../src/core/events.js';
import type { FeedMode } from '../../src/core/Partition.js';
import { TransientError } from '../../src/errors/index.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../../src/feed/index.js';
import type { ChangeFeedOptions } from '../../src/feed/options.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { MemorySource } from '../../src/sources/MemorySource.js';

/** A deterministic PRNG (mulberry32): same seed, same run. */
export { seededRandom } from '../../src/internal/random.js';

/**
 * Advances vitest fake timers in steps until `done()` holds (a condition that reads a store may return a
 * promise); throws after `limitMs` of virtual time so a broken test fails instead of spinning.
 */
export async function advanceUntil(done: () => boolean | Promise<boolean>, { stepMs = 10, limitMs = 600_000 } = {}): Promise<number> {
  let elapsed = 0;
  for (;;) {
    const held = done();
    if (typeof held === 'boolean' ? held : await held) break;
    if (elapsed >= limitMs) throw new Error(`condition not reached within ${limitMs} ms of virtual time`);
    await vi.advanceTimersByTimeAsync(stepMs);
    elapsed += stepMs;
  }
  return elapsed;
}

/**
 * A lease store seen through one host's connection, which the test can interrupt: `crash()` and no call
 * ever settles again (a process that died); `cut = true` and every call fails with a timeout until it is
 * set back (a network partition).
 */
export class CrashableLeaseStore implements LeaseStore {
  crashed = false;
  cut = false;
  constructor(readonly inner: LeaseStore) {}
  crash(): void {
    this.crashed = true;
  }
  #guard<R>(work: () => Promise<R>): Promise<R> {
    if (this.crashed) return new Promise<R>(() => undefined);
    if (this.cut) return Promise.reject(new TransientError('connection timed out (injected)'));
    return work();
  }
  list(prefix: string): Promise<LeaseListing> {
    return this.#guard(() => this.inner.list(prefix));
  }
  read(id: string): Promise<Lease | undefined> {
    return this.#guard(() => this.inner.read(id));
  }
  createIfAbsent(lease: NewLease): Promise<Lease | undefined> {
    return this.#guard(() => this.inner.createIfAbsent(lease));
  }
  replace(lease: Lease): Promise<Lease> {
    return this.#guard(() => this.inner.replace(lease));
  }
  delete(lease: Lease): Promise<void> {
    return this.#guard(() => this.inner.delete(lease));
  }
  tombstone(lease: Lease): Promise<void> {
    return this.#guard(() => (this.inner.tombstone ? this.inner.tombstone(lease) : this.inner.delete(lease)));
  }
}

/** Wraps a source to count reads and the changes they returned. */
export class CountingSource<T> implements Source<T> {
  reads = 0;
  changesRead = 0;
  readonly requests: ReadRequest[] = [];
  /** Called after every successful read with the page returned. */
  onPage: ((page: Page<T>, request: ReadRequest) => void) | undefined;
  constructor(readonly inner: Source<T>) {}
  get description(): string {
    return this.inner.description;
  }
  get mode() {
    return this.inner.mode;
  }
  listPartitions(signal?: AbortSignal): Promise<readonly Partition[]> {
    return this.inner.listPartitions(signal);
  }
  async read(request: ReadRequest): Promise<Page<T>> {
    this.reads++;
    this.requests.push(request);
    const page = await this.inner.read(request);
    this.changesRead += page.changes.length;
    this.onPage?.(page, request);
    return page;
  }
}

/** The LSN a MemorySource position stands for. */
export function lsnOfPosition(position: string | null | undefined): number {
  if (!position) return 0;
  return Number(position.replace(/^mem:/, ''));
}

/** Ids of the changes in batches. */
export function idsOf<T>(batches: readonly ChangeBatch<T>[]): string[] {
  return batches.flatMap((b) => b.changes.map((c) => c.id));
}

/**
 * Lease timings for engine tests on virtual time (ms): a read every 50, a lease scan every 100, renewals every
 * 300, expiry after 1 000 — a lost host's leases move within a second or two of virtual time.
 */
export const FAST_TIMINGS = { pollIntervalMs: 50, leaseAcquireIntervalMs: 100, leaseRenewIntervalMs: 300, leaseExpirationMs: 1_000 } as const;

/**
 * The checkpoints stored under `prefix`: lease token → LSN of its continuation (0 for none), of the leases only
 * (marker documents, whose tokens start with a dot, are left out).
 */
export async function storedCheckpoints(leases: LeaseStore, prefix: string): Promise<Map<string, number>> {
  return new Map(
    (await leases.list(prefix)).leases.filter((l) => !l.leaseToken.startsWith('.')).map((l) => [l.leaseToken, lsnOfPosition(l.continuation)]),
  );
}

/** What {@link memoryFeed} sets up. */
export interface MemoryFeedSetup<T> {
  /** Partitions of the source. Default 3. */
  readonly partitions?: number;
  /** The source's mode. Default `'latestVersion'`. */
  readonly mode?: FeedMode;
  /** Changes written before the feed is created: `{ id: 'd<i>', n: i }` for i below this. Default 0. */
  readonly writes?: number;
  /** The lease prefix. Default `'test.'`. */
  readonly prefix?: string;
  /** More feed options, over the defaults (host `host-a`, reads and scans every 100 ms, events collected). */
  readonly options?: Partial<ChangeFeedOptions<T>>;
}

/**
 * One host's feed on a MemorySource and a MemoryLeaseStore, for tests on fake timers: the source, the store,
 * the feed's events as they come, and `checkpoints()` ({@link storedCheckpoints} under the prefix).
 */
export function memoryFeed<T extends { id: string; n: number }>(setup: MemoryFeedSetup<T> = {}) {
  const prefix = setup.prefix ?? 'test.';
  const source = new MemorySource<T>({ partitions: setup.partitions ?? 3, ...(setup.mode ? { mode: setup.mode } : {}) });
  const leases = new MemoryLeaseStore();
  for (let i = 0; i < (setup.writes ?? 0); i++) source.write({ id: `d${i}`, n: i } as T);
  const events: FeedEvent[] = [];
  const feed: ChangeFeedProcessor<T> = createChangeFeed<T>({
    source,
    leases,
    instanceName: 'host-a',
    leasePrefix: prefix,
    pollIntervalMs: 100,
    leaseAcquireIntervalMs: 100,
    events: (e) => events.push(e),
    ...setup.options,
  });
  const checkpoints = () => storedCheckpoints(leases, prefix);
  return { source, leases, events, feed, prefix, checkpoints };
}
