import { vi } from 'vitest';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import type { LeaseListing, LeaseStore } from '../../src/leases/LeaseStore.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Page, ReadRequest, Source } from '../../src/sources/Source.js';
import type { Partition } from '../../src/core/Partition.js';
import { TransientError } from '../../src/errors/index.js';

/** A deterministic PRNG (mulberry32): same seed, same run. */
export { seededRandom } from '../../src/internal/random.js';

/**
 * Advances vitest fake timers in steps until `done()` holds; throws after `limitMs` of virtual time so a
 * broken test fails instead of spinning.
 */
export async function advanceUntil(done: () => boolean, { stepMs = 10, limitMs = 600_000 } = {}): Promise<number> {
  let elapsed = 0;
  while (!done()) {
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
