export { processChanges } from './processChanges.js';
export type { ChangeHandlers, ChangeProcessorHandle, PartitionContext, ProcessChangesOptions } from './types.js';
