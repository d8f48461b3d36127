export { listLeases, type LeaseListingReport, type LeaseStatus } from './listLeases.js';
export { rewindLeases, type RewindLeasesOptions, type RewindTarget } from './rewindLeases.js';
export { releaseLeases, type ReleaseLeasesOptions } from './releaseLeases.js';
export { resetLeases, type ResetLeasesOptions } from './resetLeases.js';
export type { LeaseAdminOptions } from './options.js';
export type { LeaseChange } from './changeLeases.js';
