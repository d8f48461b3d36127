// Public: a lease store in memory (one process, tests).
import type { Lease, NewLease } from './Lease.js';
import { LeaseConflictError } from '../errors/LeaseConflictError.js';
import type { LeaseListing, LeaseStore } from './LeaseStore.js';

/**
 * A {@link LeaseStore} kept in this process's memory: for tests, examples and single-process deployments
 * that keep their checkpoints elsewhere. Hosts in one process can share one instance.
 *
 * @example
 * ```ts
 * import { changeFeed, MemoryLeaseStore, MemorySource } from 'rxfeed';
 * const feed$ = changeFeed({ source: new MemorySource({ partitions: 2 }), leases: new MemoryLeaseStore(), instanceName: 'a' });
 * ```
 */
export class MemoryLeaseStore implements LeaseStore {
  readonly #leases = new Map<string, Lease>();
  /** The epoch each tombstoned id had when it was deleted ({@link MemoryLeaseStore.tombstone}). */
  readonly #tombstones = new Map<string, number>();
  #etag = 0;

  /** {@inheritDoc LeaseStore.list} */
  async list(prefix: string): Promise<LeaseListing> {
    const leases = [...this.#leases.values()].filter((l) => l.id.startsWith(prefix));
    leases.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { leases, corrupt: [] };
  }

  /** {@inheritDoc LeaseStore.read} */
  async read(id: string): Promise<Lease | undefined> {
    return this.#leases.get(id);
  }

  /** {@inheritDoc LeaseStore.createIfAbsent} */
  async createIfAbsent(lease: NewLease): Promise<Lease | undefined> {
    if (this.#leases.has(lease.id)) return undefined;
    const buried = this.#tombstones.get(lease.id);
    if (buried !== undefined && lease.epoch < buried) return undefined;
    this.#tombstones.delete(lease.id);
    return this.#store(lease);
  }

  /** {@inheritDoc LeaseStore.replace} */
  async replace(lease: Lease): Promise<Lease> {
    this.#check(lease);
    return this.#store(lease);
  }

  /** {@inheritDoc LeaseStore.delete} */
  async delete(lease: Lease): Promise<void> {
    this.#check(lease);
    this.#leases.delete(lease.id);
  }

  /** {@inheritDoc LeaseStore.tombstone} */
  async tombstone(lease: Lease): Promise<void> {
    this.#check(lease);
    const stored = this.#leases.get(lease.id)!;
    this.#leases.delete(lease.id);
    this.#tombstones.set(lease.id, Math.max(stored.epoch, this.#tombstones.get(lease.id) ?? 0));
  }

  /** A snapshot of every stored lease (for tests and inspection). */
  snapshot(): Lease[] {
    return [...this.#leases.values()];
  }

  #check(lease: Lease): void {
    const stored = this.#leases.get(lease.id);
    if (!stored) throw new LeaseConflictError(lease.id, 'missing');
    if (stored.etag !== lease.etag) throw new LeaseConflictError(lease.id, 'changed');
  }

  #store(lease: NewLease): Lease {
    const stored: Lease = Object.freeze({ ...lease, properties: { ...lease.properties }, etag: `"${++this.#etag}"` });
    this.#leases.set(stored.id, stored);
    return stored;
  }
}
