// Protocol: the lease protocol in one place — the contract between the hosts of one processor, and with the
// .NET processor, Azure Functions and KEDA, which read the same documents. Code outside `src/leases/` imports
// lease internals from here only. docs/lease-protocol.md is its prose and model/leases.pml its checked
// model: the three change together.
export {
  floorDocument,
  floorId,
  infoId,
  isLeaseOf,
  isMarkerId,
  leaseDocument,
  leaseIdsOf,
  lockId,
  markerDocument,
  markerIdsOf,
  namingOf,
  type LeaseIds,
  type LeaseNaming,
  type LeaseScheme,
} from './documents.js';
export { fromDocument, toDocument, type CosmosLeaseDocument, type CosmosMarkerDocument } from './cosmosDocuments.js';
export { listProcessorLeases, resolveLeaseIds, type LeaseNamingOptions } from './listing.js';
export {
  formatLoad,
  HANDOFF_AT,
  HANDOFF_TO,
  handoffRequest,
  isUntaken,
  LOAD_PROPERTY,
  onlyNoticeChanged,
  publishedLoad,
  RELEASED_AT,
  RELEASED_BY,
  releaseNotice,
  UNTAKEN_AT_EPOCH,
  withoutNotice,
  withoutRequest,
  withoutSignals,
} from './signals.js';
export { announceRelease, askForLease, handBack, type HandBackContext } from './handover.js';
export { isLeaseExpired, resolveTimings, type Timings } from './timings.js';
export { checkBalanceBy, checkLeasePrefix, checkLeaseScheme, DEFAULT_LEASE_PREFIX } from './validation.js';
