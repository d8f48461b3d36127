import type { OperationFault, RequestInfo } from '../faults.js';
import type { Headers } from '../http.js';
import type { QueryEngine } from '../QueryEngine.js';
import type { Store } from '../store/Store.js';

/** What request handlers need from the emulator. */
export interface HandlerContext {
  store: Store;
  queries: QueryEngine;
  changeFeedPageSize: number;
  queryPageSize: number;
  strictAllVersionsStart: boolean;
  crossPartitionQueries: CrossPartitionQueries;
}

/** Who runs a query over a whole multi-range container: the gateway (as the service does for streaming queries) or the client, range by range. */
export type CrossPartitionQueries = 'gateway' | 'client';

/** A request matched to a route: its parsed parts and the ids its path names. */
export interface RoutedRequest {
  method: string;
  headers: Headers;
  body: unknown;
  info: RequestInfo;
  /** Path parameters by name (`db`, `coll`, `doc`, `offer`). */
  params: Readonly<Record<string, string>>;
  /** A fault's failing operations of a batch or bulk request (see `FaultAction`'s `operations`). */
  operationFault?: (index: number) => OperationFault | undefined;
}
