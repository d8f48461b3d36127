/**
 * `rxfeed/emulator`: a local Azure Cosmos DB emulator for tests, examples and demos.
 *
 * @example
 * ```ts
 * import { CosmosEmulator, faults } from 'rxfeed/emulator';
 * const emulator = await CosmosEmulator.start();
 * ```
 */
export { CosmosEmulator, EMULATOR_KEY, startEmulator } from './CosmosEmulator.js';
export type { CosmosEmulatorOptions, EmulatorDump, EmulatorRange } from './CosmosEmulator.js';
export type { SqlEngineChoice } from './QueryEngine.js';
export type { CrossPartitionQueries } from './handlers/context.js';
export type { Doc as EmulatorDocument } from './store/Store.js';
export { faults } from './faults.js';
export type { FaultAction, FaultHandle, FaultMatch, FaultRule, OperationFault, RequestInfo, RequestKind } from './faults.js';
export type { LoggedRequest } from './server.js';
export type { EmulatorAbortSignal, EmulatorHttpClient, EmulatorHttpHeaders, EmulatorHttpRequest, EmulatorHttpResponse } from './inProcess.js';
export { effectivePartitionKey } from './hash.js';
export type { PartitionKeyComponent, PartitionKeyDefinition } from './hash.js';
