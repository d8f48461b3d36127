// The public factory of the lease coordinator; the coordinator itself is `coordinator/Coordinator.ts` and its
// roles beside it (docs/architecture.md), the lease protocol it speaks is `protocol/` (docs/lease-protocol.md).
import { Coordinator } from './coordinator/Coordinator.js';
import type { LeaseCoordinatorOptions } from './coordinator/options.js';
import type { LeaseCoordinator } from './LeaseCoordinator.js';

export { LEASE_DEFAULTS } from './coordinator/options.js';
export { DEFAULT_LEASE_PREFIX } from './protocol/validation.js';
export type { LeaseCoordinatorOptions, LeaseOptions } from './coordinator/options.js';

/**
 * Creates the lease coordinator of one host: it bootstraps one lease per partition under `prefix`
 * (exactly once, however many hosts start together), acquires free and expired leases, renews the ones
 * it owns, balances them evenly with the other hosts (taking over from the most loaded), fences every
 * write with the lease etag and an epoch, replaces leases of split/merged partitions, and drains then
 * releases its leases on {@link LeaseCoordinator.stop}, telling the other hosts so they take them at once.
 * One coordinator runs once: after `stop()` create another.
 *
 * Nothing runs until `acquired$` is subscribed.
 *
 * @example
 * ```ts
 * const coordinator = createLeaseCoordinator({ store: new MemoryLeaseStore(), source, owner: 'host-a', prefix: 'orders.' });
 * coordinator.acquired$.subscribe((lease) => startReading(lease));
 * process.on('SIGTERM', () => void coordinator.stop());
 * ```
 * @throws InvalidOptionsError when an option is missing or out of range.
 */
export function createLeaseCoordinator(options: LeaseCoordinatorOptions): LeaseCoordinator {
  return new Coordinator(options);
}
