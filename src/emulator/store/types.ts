import type { PartitionKeyComponent, PartitionKeyDefinition } from '../hash.js';

/** A JSON document as stored, system properties included. */
export type Doc = Record<string, unknown>;

/** What happened to a document; the names the AllVersionsAndDeletes metadata uses. */
export type Operation = 'create' | 'replace' | 'delete';

/** One write in a range's log: the change feed is a view over these. */
export interface LogEntry {
  readonly lsn: number;
  readonly op: Operation;
  readonly key: string;
  readonly id: string;
  readonly pk: readonly PartitionKeyComponent[];
  readonly epk: string;
  /** The image after the write, without `_lsn` (the change feed adds it); absent for deletes. */
  readonly current?: Doc;
  /** The image before the write; absent for creates. */
  readonly previous?: Doc;
  /** The LSN of the write that produced `previous`. */
  readonly previousLsn?: number;
  readonly timestampMs: number;
  readonly ttlExpired: boolean;
}

/** A physical partition key range with its own LSN sequence and log. */
export interface RangeState {
  readonly id: string;
  readonly min: string;
  readonly max: string;
  readonly parents: readonly string[];
  lsn: number;
  /** Ordered by LSN (non-decreasing: a merged range interleaves its parents' logs). */
  log: LogEntry[];
  /** Document key → LSN of its newest log entry here, so LatestVersion reads skip superseded entries. */
  latest: Map<string, number>;
}

/** A document with what the store needs to route and expire it. */
export interface StoredDoc {
  /** The document as every response other than the change feed shows it: system properties, no `_lsn`. */
  body: Doc;
  /** The LSN of the write that produced `body`. */
  lsn: number;
  pk: PartitionKeyComponent[];
  epk: string;
  /** When the document expires under TTL (ms), if it does. */
  expiresAtMs?: number | undefined;
}

/** A container: its resource body, documents and live ranges. */
export interface ContainerState {
  readonly id: string;
  readonly rid: string;
  resource: Doc;
  readonly partitionKey: PartitionKeyDefinition;
  ranges: RangeState[];
  /** Ranges that were split or merged away; reads addressed to them answer 410/1002. */
  readonly goneRanges: Set<string>;
  readonly docs: Map<string, StoredDoc>;
  nextRangeId: number;
  docCounter: number;
  /** Earliest TTL expiry among the documents (ms), so requests skip the expiry sweep until then. */
  nextExpiryMs: number;
  /** The container's throughput offer (`/offers`). */
  offer: Doc;
}

/** A database and its containers. */
export interface DatabaseState {
  readonly id: string;
  readonly rid: string;
  readonly resource: Doc;
  readonly containers: Map<string, ContainerState>;
  containerCounter: number;
}

/** Conditions a write may carry (`If-Match`). */
export interface WriteConditions {
  ifMatch?: string | undefined;
}
