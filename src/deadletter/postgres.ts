export {
  PGliteDeadLetterStore,
  PostgresDeadLetterStore,
  type PGliteDeadLetterStoreOptions,
  type PostgresDeadLetterStoreOptions,
} from './PostgresDeadLetterStore.js';
