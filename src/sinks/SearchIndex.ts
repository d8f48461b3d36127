import type { ViewStore } from './ViewStore.js';

/** What a search index stores for one document: searchable `title` (ranked higher) and `text`, plus `data`. */
export interface SearchDocument {
  /** Short, important text (names, titles); matches here rank above matches in `text`. */
  readonly title?: string;
  /** The searchable body. */
  readonly text: string;
  /** Anything to hand back with a hit (not searched). Must be JSON-serialisable. */
  readonly data?: unknown;
}

/** One search result. */
export interface SearchHit {
  /** The indexed key (the document id unless `syncToIndex` was given another `id`). */
  readonly id: string;
  /** The indexed document: title, text and data as `syncToIndex`'s `document` made them. */
  readonly document: SearchDocument;
  /** `ts_rank` of the match; higher is better. */
  readonly rank: number;
}

/** Options of {@link SearchIndex.search}. */
export interface SearchOptions {
  /** Most hits to return. Default 10. */
  readonly limit?: number;
}

/** A full-text index that `syncToIndex` writes to: a view of {@link SearchDocument}s with a `search` helper. */
export interface SearchIndex extends ViewStore<SearchDocument> {
  /**
   * Hits for a web-search style query (`"exact phrase"`, `or`, `-excluded`), best first.
   */
  search(query: string, options?: SearchOptions): Promise<SearchHit[]>;
}
