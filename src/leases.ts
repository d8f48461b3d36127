/**
 * `rxfeed/leases`: the lease coordinator and the balancing rules behind `changeFeed`, for hosts that
 * distribute work themselves. Most applications need only `rxfeed`.
 *
 * @example
 * ```ts
 * import { MemoryLeaseStore } from 'rxfeed';
 * import { createLeaseCoordinator } from 'rxfeed/leases';
 * const coordinator = createLeaseCoordinator({ store: new MemoryLeaseStore(), owner: 'host-1', listPartitions: async () => [] });
 * ```
 *
 * @packageDocumentation
 */
export type { LeaseCoordinator, OwnedLease } from './leases/LeaseCoordinator.js';
export { createLeaseCoordinator, LEASE_DEFAULTS, type LeaseCoordinatorOptions } from './leases/createLeaseCoordinator.js';
export type { LeaseScheme } from './leases/protocol/index.js';
export { planBalance, type BalanceOptions, type BalancePlan } from './leases/balancing.js';
export { isLeaseExpired } from './leases/protocol/index.js';
export { planLoadBalance, type LoadBalanceOptions } from './leases/loadBalancing.js';
export { publishedLoad, LOAD_PROPERTY } from './leases/protocol/index.js';
