/**
 * `rxfeed/leases`: the lease coordinator and the balancing rules behind `changeFeed`, for hosts that
 * distribute work themselves. Most applications need only `rxfeed`.
 *
 * @example
 * ```ts
 * import { MemoryLeaseStore } from 'rxfeed';
 * import { createLeaseCoordinator } from 'rxfeed/leases';
 * const coordinator = createLeaseCoordinator({ store: new MemoryLeaseStore(), owner: 'host-1', listPartitions: async () => [{ id: '0', range: { minInclusive: '', maxExclusive: 'FF' } }] });
 * ```
 *
 * @packageDocumentation
 */
export type { LeaseCoordinator, OwnedLease } from './LeaseCoordinator.js';
export { createLeaseCoordinator, LEASE_DEFAULTS, type LeaseCoordinatorOptions } from './createLeaseCoordinator.js';
export type { LeaseScheme } from './protocol/index.js';
export { planBalance, type BalanceOptions, type BalancePlan } from './balancing.js';
export { isLeaseExpired } from './protocol/index.js';
export { planLoadBalance, type LoadBalanceOptions } from './loadBalancing.js';
export { publishedLoad, LOAD_PROPERTY } from './protocol/index.js';
