export { processChanges, type ChangeHandlers, type ChangeProcessorHandle, type PartitionContext, type ProcessChangesOptions } from './processChanges.js';
