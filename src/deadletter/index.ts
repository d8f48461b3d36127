export type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';
export type { DeadLetterQuery, DeadLetterSink, DeadLetterStore } from './DeadLetterSink.js';
export { MemoryDeadLetterStore } from './MemoryDeadLetterStore.js';
export { callbackDeadLetterSink } from './callbackDeadLetterSink.js';
export { CosmosDeadLetterStore } from './CosmosDeadLetterStore.js';
export { redriveDeadLetters, type RedriveOptions, type RedriveResult } from './redriveDeadLetters.js';
