export type {
  ViewMode,
  ViewChange,
  ViewCommit,
  ViewWrite,
  ViewWriteResult,
  ViewRow,
  ViewPartitionState,
  ViewStore,
} from './ViewStore.js';
export { ViewFencedError } from '../errors/ViewFencedError.js';
export { MemoryViewStore } from './MemoryViewStore.js';
export { PostgresViewStore } from './PostgresViewStore.js';
export type { PostgresViewStoreOptions } from './PostgresViewStore.js';
export { PGliteViewStore } from './PGliteViewStore.js';
export type { PGliteViewStoreOptions } from './PGliteViewStore.js';
export type { PgNamedQuery, PgPoolLike, PgPoolClientLike, PgClientLike, PGliteLike, PostgresConnection } from './sql/SqlRunner.js';
export { PostgresSearchIndex } from './PostgresSearchIndex.js';
export type { PostgresSearchIndexOptions, SearchDocument, SearchHit, SearchIndex, SearchOptions } from './PostgresSearchIndex.js';
export { materializeToView } from './materializeToView.js';
export type { MaterializeToViewOptions } from './materializeToView.js';
export { syncToIndex } from './syncToIndex.js';
export type { SyncToIndexOptions } from './syncToIndex.js';
export { alignLeasesWithView } from './alignLeasesWithView.js';
export type { AlignLeasesWithViewOptions, AlignedLease } from './alignLeasesWithView.js';
