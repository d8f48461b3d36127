// Protocol: the lease protocol in one place — the contract between the hosts of one processor, and with the
// .NET processor, Azure Functions and KEDA, which read the same documents. Code outside `src/leases/` imports
// lease internals from here only. docs/lease-protocol.md is its prose and model/leases.pml its checked
// model: the three change together.
// What the public API refers to is exported as such; the rest is internal (kept out of the published .d.ts:
// a re-export of an internal name would dangle there).
export { type LeaseScheme } from './documents.js';
/** @internal */
export { buriedEpoch, confirmEpochFloor, deleteLease, floorDocument, floorId, goneId, infoId, isLeaseOf, isMarkerId, leaseDocument, leaseIdsOf, lockId, markerDocument, markerIdsOf, namingOf, raiseEpochRecord, readEpochFloor, type LeaseIds, type LeaseNaming } from './documents.js';
export { type CosmosLeaseDocument, type CosmosMarkerDocument } from './cosmosDocuments.js';
/** @internal */
export { fromDocument, toDocument } from './cosmosDocuments.js';
export { type LeaseNamingOptions } from './listing.js';
/** @internal */
export { listProcessorLeases, resolveLeaseIds } from './listing.js';
export { LOAD_PROPERTY, publishedLoad } from './signals.js';
/** @internal */
export { formatChildren, formatLoad, HANDOFF_AT, HANDOFF_TO, handoffRequest, inheritedProperties, isReplaced, isUntaken, onlyNoticeChanged, PARENT_LEASE, RELEASED_AT, RELEASED_BY, recordedChildren, releaseNotice, REPLACED_AT_EPOCH, REPLACED_BY, REPLACEMENT_CHILDREN, type RecordedChild, UNTAKEN_AT_EPOCH, withoutNotice, withoutRequest, withoutSignals } from './signals.js';
/** @internal */
export { clearHaltOnProgress, HALT_BACKOFF_CAP_MS, haltBackoffMs, haltBackoffUntil, haltCount, HALTED_AT_EPOCH, HALTS, haltsHeldBack, isHaltRelease, withHalt, withoutHalt } from './haltBackoff.js';
/** @internal */
export { announceRelease, askForLease, handBack, type HandBackContext } from './handover.js';
export { isLeaseExpired } from './timings.js';
/** @internal */
export { resolveTimings, type Timings } from './timings.js';
export { DEFAULT_LEASE_PREFIX } from './validation.js';
/** @internal */
export { checkBalanceBy, checkLeasePrefix, checkLeaseScheme } from './validation.js';
