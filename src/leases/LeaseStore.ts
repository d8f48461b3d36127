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
  /**
   * Creates the lease unless a document with its id exists; returns the stored lease or `undefined`. Where
   * {@link LeaseStore.tombstone} left a tombstone, the lease is created in its place only at the tombstone's
   * epoch or above (conditional on the tombstone's version, so atomically); below it, `undefined`: a create
   * that lands late (its host paused, its request slow) cannot bring a deleted lease back below an epoch it had.
   */
  createIfAbsent(lease: NewLease): Promise<Lease | undefined>;
  /**
   * Replaces the stored lease if its etag still equals `lease.etag`; returns the stored result with its
   * new etag. Throws {@link LeaseConflictError} when the etag changed and when the lease is gone.
   */
  replace(lease: Lease): Promise<Lease>;
  /** Deletes the lease if its etag still equals `lease.etag`; throws {@link LeaseConflictError} otherwise. */
  delete(lease: Lease): Promise<void>;
  /**
   * Optional: deletes the lease as {@link LeaseStore.delete} does (conditional on its etag, same errors), leaving
   * a tombstone in its place that keeps its id and epoch for good. `list` and `read` do not return tombstones;
   * `replace` and `delete` find the lease gone ({@link LeaseConflictError}); `createIfAbsent` creates the id again
   * only at the tombstone's epoch or above. So the epochs of a lease id never go back, whatever order a late
   * create and a delete land in. The coordinator deletes leases this way in the `rxfeed` lease scheme (in the
   * `dotnet` scheme the .NET processor would read a tombstone under the lease prefix as a lease: plain
   * deletes). A store without it deletes plainly (no protection against late creates).
   */
  tombstone?(lease: Lease): Promise<void>;
  /**
   * Optional: calls `listener` with what each request cost where the store is charged for them (request units
   * of Cosmos DB); returns a function that stops the calls. A processor reports them in its telemetry.
   */
  watchRequestCharges?(listener: (operation: string, requestUnits: number) => void): () => void;
}
