// Public: the lease store seam — conditional writes on an etag, listing by prefix.
import type { CorruptLeaseError } from '../errors/CorruptLeaseError.js';
import type { Lease, NewLease } from './Lease.js';

/** What {@link LeaseStore.list} found under a prefix. */
export interface LeaseListing {
  /** The readable leases. */
  readonly leases: readonly Lease[];
  /** Documents under the prefix that are not readable leases; reported and skipped, never overwritten. */
  readonly corrupt: readonly CorruptLeaseError[];
}

/**
 * Storage for leases with optimistic concurrency. Every write is conditional on the lease's `etag`, which
 * is what makes ownership and checkpoints safe across hosts.
 *
 * Implementations: `MemoryLeaseStore` (one process) and `CosmosLeaseStore` (a Cosmos DB lease container,
 * shared by many processes). Both pass one conformance suite.
 *
 * @example
 * ```ts
 * import { MemoryLeaseStore } from 'rxfeed';
 * const store = new MemoryLeaseStore();
 * const { leases } = await store.list('orders-view.');
 * ```
 */
export interface LeaseStore {
  /** All leases whose id starts with `prefix`. */
  list(prefix: string): Promise<LeaseListing>;
  /** Reads one lease by id; `undefined` when absent. */
  read(id: string): Promise<Lease | undefined>;
  /** Creates the lease unless a document with its id exists; returns the stored lease or `undefined`. */
  createIfAbsent(lease: NewLease): Promise<Lease | undefined>;
  /**
   * Replaces the stored lease if its etag still equals `lease.etag`; returns the stored result with its
   * new etag. Throws {@link LeaseConflictError} when the etag changed and when the lease is gone.
   */
  replace(lease: Lease): Promise<Lease>;
  /** Deletes the lease if its etag still equals `lease.etag`; throws {@link LeaseConflictError} otherwise. */
  delete(lease: Lease): Promise<void>;
  /**
   * Optional: calls `listener` with what each request cost where the store is charged for them (request units
   * of Cosmos DB); returns a function that stops the calls. A processor reports them in its telemetry.
   */
  watchRequestCharges?(listener: (operation: string, requestUnits: number) => void): () => void;
}
