import type { RequestInfo } from '../faults.js';
import type { Headers } from '../http.js';
import type { QueryEngine } from '../query.js';
import type { Store } from '../store.js';

/** What request handlers need from the emulator. */
export interface HandlerContext {
  store: Store;
  queries: QueryEngine;
  changeFeedPageSize: number;
  queryPageSize: number;
  strictAllVersionsStart: boolean;
}

/** A request matched to a route: its parsed parts and the ids its path names. */
export interface RoutedRequest {
  method: string;
  headers: Headers;
  body: unknown;
  info: RequestInfo;
  /** Path parameters by name (`db`, `coll`, `doc`, `offer`). */
  params: Readonly<Record<string, string>>;
}
