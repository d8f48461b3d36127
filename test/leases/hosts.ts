import type { SchedulerAction, SchedulerLike, Subscription } from 'rxjs';
import type { FeedEvent } from '../../src/core/events.js';
import type { FeedRange, Partition } from '../../src/core/Partition.js';
import type { LeaseCoordinatorOptions } from '../../src/leases/createLeaseCoordinator.js';
import { createLeaseCoordinator } from '../../src/leases/createLeaseCoordinator.js';
import type { LeaseCoordinator, OwnedLease } from '../../src/leases/LeaseCoordinator.js';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { VirtualScheduler } from './virtualScheduler.js';

/** Evenly spaced hex ranges `[0, 1/n)`, … covering the key space, as partitions `"0"`… `"n-1"`. */
export function partitions(n: number): Partition[] {
  const bound = (i: number): string =>
    i === 0 ? '' : i === n ? 'FF' : Math.floor((i * 0x10000) / n).toString(16).toUpperCase().padStart(4, '0');
  return Array.from({ length: n }, (_, i) => ({ id: String(i), range: { minInclusive: bound(i), maxExclusive: bound(i + 1) } }));
}

/** A mutable partition list (splits), standing in for a source's `listPartitions`. */
export class FakePartitions {
  list: Partition[];
  #next: number;
  constructor(n: number) {
    this.list = partitions(n);
    this.#next = n;
  }
  listPartitions = async (): Promise<readonly Partition[]> => this.list;
  /** Replaces partition `id` by two children splitting its range; returns their ids. */
  split(id: string): [string, string] {
    const parent = this.list.find((p) => p.id === id)!;
    const mid = midpoint(parent.range);
    const a: Partition = { id: String(this.#next++), range: { minInclusive: parent.range.minInclusive, maxExclusive: mid }, parents: [id] };
    const b: Partition = { id: String(this.#next++), range: { minInclusive: mid, maxExclusive: parent.range.maxExclusive }, parents: [id] };
    this.list = [...this.list.filter((p) => p !== parent), a, b];
    return [a.id, b.id];
  }
}

function midpoint(range: FeedRange): string {
  const min = range.minInclusive === '' ? 0 : parseInt(range.minInclusive, 16);
  const max = range.maxExclusive === 'FF' ? 0x10000 : parseInt(range.maxExclusive, 16);
  return Math.floor((min + max) / 2).toString(16).toUpperCase().padStart(4, '0');
}

/**
 * One process's view of time and of the store: `pause()` freezes it (timers wait, store calls hang
 * before and after reaching the store) until `resume()`; a crash is a pause that never ends.
 */
export class ProcessGate {
  #paused: Promise<void> | undefined;
  #resume: (() => void) | undefined;
  get paused(): boolean {
    return this.#paused !== undefined;
  }
  pause(): void {
    this.#paused ??= new Promise((resolve) => (this.#resume = resolve));
  }
  resume(): void {
    this.#resume?.();
    this.#paused = this.#resume = undefined;
  }
  async pass(): Promise<void> {
    while (this.#paused) await this.#paused;
  }
  scheduler(inner: SchedulerLike): SchedulerLike {
    return {
      now: () => inner.now(),
      schedule: <T>(work: (this: SchedulerAction<T>, state?: T) => void, delay?: number, state?: T): Subscription => {
        let cancelled = false;
        const sub = inner.schedule(() => {
          void this.pass().then(() => {
            if (!cancelled) work.call(undefined as unknown as SchedulerAction<T>, state);
          });
        }, delay);
        sub.add(() => (cancelled = true));
        return sub;
      },
    };
  }
  store(inner: LeaseStore): LeaseStore {
    const gate = <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        await this.pass();
        const result = await fn(...args);
        await this.pass();
        return result;
      };
    return {
      list: gate((p: string) => inner.list(p)),
      read: gate((id: string) => inner.read(id)),
      createIfAbsent: gate((l: NewLease) => inner.createIfAbsent(l)),
      replace: gate((l: Lease) => inner.replace(l)),
      delete: gate((l: Lease) => inner.delete(l)),
      ...(inner.tombstone ? { tombstone: gate((l: Lease) => inner.tombstone!(l)) } : {}),
    };
  }
}

/** One simulated host: a coordinator, what it holds, what it saw. */
export interface SimHost {
  readonly name: string;
  readonly coordinator: LeaseCoordinator;
  readonly gate: ProcessGate;
  readonly events: FeedEvent[];
  readonly acquired: OwnedLease[];
}

/** Starts a host (prefix `p.`) on a shared store and virtual scheduler, behind its own {@link ProcessGate}. */
export function startHost(
  name: string,
  store: LeaseStore,
  scheduler: VirtualScheduler,
  listPartitions: () => Promise<readonly Partition[]>,
  extra: Partial<LeaseCoordinatorOptions> = {},
): SimHost {
  const gate = new ProcessGate();
  const coordinator = createLeaseCoordinator({
    store: gate.store(store),
    listPartitions,
    owner: name,
    prefix: 'p.',
    scheduler: gate.scheduler(scheduler),
    ...extra,
  });
  const events: FeedEvent[] = [];
  const acquired: OwnedLease[] = [];
  coordinator.events$.subscribe((e) => events.push(e));
  coordinator.acquired$.subscribe((o) => acquired.push(o));
  return { name, coordinator, gate, events, acquired };
}

/** Live (unexpired, owned) leases per owner. */
export function countByOwner(leases: readonly Lease[], nowMs: number, expirationMs: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const l of leases) {
    if (l.owner && nowMs - l.timestampMs < expirationMs) counts.set(l.owner, (counts.get(l.owner) ?? 0) + 1);
  }
  return counts;
}

/** max − min of the live lease counts over `hosts` (a host holding nothing counts as 0). */
export function spreadOf(counts: ReadonlyMap<string, number>, hosts: readonly string[]): number {
  const values = hosts.map((h) => counts.get(h) ?? 0);
  return Math.max(...values) - Math.min(...values);
}
