export { checkpointEvery } from './checkpointEvery.js';
export { eachBatch } from './eachBatch.js';
export { eachChange } from './eachChange.js';
export { filterChanges } from './filterChanges.js';
export { flattenChanges } from './flattenChanges.js';
export { latestPerDocument } from './latestPerDocument.js';
export { mapChanges } from './mapChanges.js';
export { mapDocuments } from './mapDocuments.js';
export type { AnyBatches, ConcurrencyOptions, DocumentOf, ItemErrorOptions, OnItemError, Rebatched } from './types.js';
