/**
 * rxfeed: partitioned change feeds (Azure Cosmos DB first) as RxJS Observables, with leases shared across
 * processes and checkpoints that only move over work finished downstream.
 *
 * Optional parts live in their own entry points, so this one needs only `@azure/cosmos` and `rxjs`:
 * `rxfeed/postgres` (views, search and dead letters on PostgreSQL or PGlite), `rxfeed/metrics`
 * (Prometheus, needs `prom-client`), `rxfeed/emulator` (a local Cosmos DB emulator), `rxfeed/sse` (a change
 * feed served to browsers as Server-Sent Events) and `rxfeed/leases` (the lease coordinator and balancing,
 * for custom hosts).
 *
 * @packageDocumentation
 */

// The flow unit
export { ChangeBatch, asBatches, type ChangeBatchInit, type BatchOrBatches } from './core/ChangeBatch.js';
export type { Change, Operation } from './core/Change.js';
export { type FeedMode, type FeedRange, type Partition, type Position, type StartFrom } from './core/Partition.js';
export type { CloseReason, ErrorKind, FeedEvent, FeedEventType, ReadFailureKind } from './core/events.js';

// Errors
export * from './errors/index.js';

// Feeds
export * from './feed/index.js';
export * from './iterable/index.js';

// Operators
export * from './operators/index.js';

// Observability: OpenTelemetry, health probes, signals
export * from './telemetry/index.js';
export * from './health/index.js';

// Sources
export type { Source, Page, ReadRequest } from './sources/Source.js';
export * from './sources/MemorySource.js';
export * from './sources/CosmosSource.js';

// Leases
export type { Lease, NewLease } from './leases/Lease.js';
export type { LeaseStore, LeaseListing } from './leases/LeaseStore.js';
export { MemoryLeaseStore } from './leases/MemoryLeaseStore.js';
export {
  CosmosLeaseStore,
  type CosmosLeaseStoreOptions,
  type CosmosLeaseDocument,
  type CosmosMarkerDocument,
} from './leases/CosmosLeaseStore.js';
export { dotnetLeasePrefix, type DotnetLeasePrefixOptions } from './leases/dotnetLeasePrefix.js';
export type { LeaseNamingOptions, LeaseScheme } from './leases/protocol/index.js';
export type { LeaseOptions } from './leases/coordinator/options.js';

// Lease administration
export * from './admin/index.js';

// Lag
export * from './estimator/index.js';

// Views and search (the PostgreSQL and PGlite stores are in `rxfeed/postgres`)
export type {
  ViewMode,
  ViewChange,
  ViewCommit,
  ViewWrite,
  ViewWriteResult,
  ViewWriteOptions,
  ViewRow,
  ViewPartitionState,
  ViewStore,
} from './sinks/ViewStore.js';
export { MemoryViewStore } from './sinks/MemoryViewStore.js';
export { materializeToView, type MaterializeToViewOptions } from './sinks/materializeToView.js';
export { syncToIndex, type SyncToIndexOptions } from './sinks/syncToIndex.js';
export type { SearchDocument, SearchHit, SearchIndex, SearchOptions } from './sinks/SearchIndex.js';
export { alignLeasesWithView, type AlignLeasesWithViewOptions, type AlignedLease } from './sinks/alignLeasesWithView.js';

// Retries and dead letters (the PostgreSQL and PGlite stores are in `rxfeed/postgres`)
export * from './deadletter/index.js';

// Handlers: the per-partition handler form, and poison changes (retry, dead-letter, halt)
export * from './handlers/index.js';
export type { FailureOptions, OnFailure } from './failures/failurePolicy.js';
export type { RetryPolicy } from './failures/RetryPolicy.js';
export type { EachBatchOptions } from './operators/eachBatch.js';
export type { EachChangeOptions } from './operators/eachChange.js';
