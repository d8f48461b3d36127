/**
 * rxfeed: partitioned change feeds (Azure Cosmos DB first) as RxJS Observables, with leases shared across
 * processes and checkpoints that only move over work finished downstream.
 *
 * The local Cosmos DB emulator is a separate entry point: `rxfeed/emulator`.
 */

// The flow unit
export { ChangeBatch, asBatches, type ChangeBatchInit, type BatchOrBatches } from './core/ChangeBatch.js';
export type { Change, Operation } from './core/Change.js';
export { rangesOverlap, type FeedMode, type FeedRange, type Partition, type Position, type StartFrom } from './core/Partition.js';
export type { CloseReason, FeedEvent, FeedEventType } from './core/events.js';

// Errors
export * from './errors/index.js';
export { LeaseConflictError } from './leases/LeaseConflictError.js';

// Feeds
export * from './feed/index.js';
export * from './iterable/index.js';

// Operators
export * from './operators/index.js';

// Sources
export type { Source, Page, ReadRequest } from './sources/Source.js';
export * from './sources/MemorySource.js';
export * from './sources/CosmosSource.js';

// Leases
export type { Lease, NewLease } from './leases/Lease.js';
export type { LeaseStore, LeaseListing } from './leases/LeaseStore.js';
export type { LeaseCoordinator, OwnedLease } from './leases/LeaseCoordinator.js';
export { MemoryLeaseStore } from './leases/MemoryLeaseStore.js';
export { CosmosLeaseStore, type CosmosLeaseStoreOptions, type CosmosLeaseDocument } from './leases/CosmosLeaseStore.js';
export { createLeaseCoordinator, LEASE_DEFAULTS, type LeaseCoordinatorOptions } from './leases/createLeaseCoordinator.js';
export { planBalance, isLeaseExpired, type BalanceOptions, type BalancePlan } from './leases/balancing.js';

// Lag
export * from './estimator/index.js';

// Views and search
export * from './sinks/index.js';

// Metrics (optional prom-client)
export { prometheusMetrics, type PrometheusMetrics, type PrometheusMetricsOptions } from './metrics/prometheusMetrics.js';

// Handlers: the per-partition handler form, and poison changes (retry, dead-letter, halt)
export * from './handlers/index.js';
export * from './deadletter/index.js';
export * from './deadletter/postgres.js';
export type { FailureOptions, OnFailure } from './deadletter/failurePolicy.js';
export type { EachBatchOptions } from './operators/eachBatch.js';
export type { EachChangeOptions } from './operators/eachChange.js';
export type { ErrorKind } from './core/events.js';
