import type { Change, Operation } from '../../core/Change.js';

type Json = Record<string, unknown>;

/**
 * How to find a document's partition key: the container's key paths (`/tenant`, `/a/b`), split into
 * segments once (this runs for every change read). @internal
 */
export interface PartitionKeyPaths {
  readonly paths: readonly string[];
  /** `paths` split into property names. */
  readonly segments: readonly (readonly string[])[];
}

/** Compiles a container's partition key paths. @internal */
export function partitionKeyPaths(paths: readonly string[]): PartitionKeyPaths {
  return { paths, segments: paths.map((p) => p.split('/').filter((s) => s !== '')) };
}

function valueAt(doc: Json, segments: readonly string[]): unknown {
  let value: unknown = doc;
  for (const segment of segments) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Json)[segment];
  }
  return value;
}

/** The document's partition key value: a single value for `Hash`, an array for hierarchical keys. */
function partitionKeyOf(doc: Json, key: PartitionKeyPaths | undefined): unknown {
  if (!key || key.segments.length === 0) return undefined;
  if (key.segments.length === 1) return valueAt(doc, key.segments[0]!);
  return key.segments.map((s) => valueAt(doc, s));
}

/** AVAD delete metadata carries the key as `{ "<path without leading slash>": value }`. */
function partitionKeyFromMetadata(map: unknown, key: PartitionKeyPaths | undefined): unknown {
  if (map === null || typeof map !== 'object') return undefined;
  const m = map as Json;
  if (!key || key.paths.length === 0) {
    const values = Object.values(m);
    return values.length === 1 ? values[0] : values;
  }
  const values = key.paths.map((p) => m[p.replace(/^\//, '')]);
  return key.paths.length === 1 ? values[0] : values;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/**
 * Maps one LatestVersion change feed document to a {@link Change}. The feed does not say whether a document
 * was created or replaced, so the operation is `upsert`; LSN and timestamp come from `_lsn` and `_ts`
 * (seconds). `fallbackLsn` is used when a document carries no `_lsn`.
 *
 * @internal
 */
export function latestVersionChange<T>(raw: unknown, key: PartitionKeyPaths | undefined, fallbackLsn: number): Change<T> {
  const doc = raw as Json;
  const partitionKey = partitionKeyOf(doc, key);
  const id = String(doc['id']);
  const lsn = num(doc['_lsn']) ?? fallbackLsn;
  const timestampMs = (num(doc['_ts']) ?? 0) * 1000;
  // One literal per shape, each with all its properties (no spreads, nothing added after): this runs for
  // every change; changes of one container keep one shape, whose map the literal's site keeps alive.
  return partitionKey !== undefined
    ? { id, operation: 'upsert', document: doc as T, lsn, timestampMs, partitionKey }
    : { id, operation: 'upsert', document: doc as T, lsn, timestampMs };
}

const OPERATIONS: Record<string, Operation> = { create: 'create', replace: 'replace', delete: 'delete', upsert: 'upsert' };

/**
 * Maps one AllVersionsAndDeletes item (`{ current, previous?, metadata }`, wire format 2021-09-15) to a
 * {@link Change}: operation from `metadata.operationType`, LSN from `metadata.lsn`, timestamp from
 * `metadata.crts` (seconds), and for deletes the id and key from the metadata and the previous image.
 *
 * @internal
 */
export function allVersionsChange<T>(raw: unknown, key: PartitionKeyPaths | undefined, fallbackLsn: number): Change<T> {
  const item = raw as Json;
  const metadata = (item['metadata'] ?? {}) as Json;
  const current = item['current'] as Json | undefined;
  const previous = item['previous'] as Json | undefined;
  const type = String(metadata['operationType'] ?? '').toLowerCase();
  const operation = OPERATIONS[type] ?? 'upsert';
  const isDelete = operation === 'delete';
  const document = !isDelete && current && Object.keys(current).length > 0 ? current : undefined;
  const id = metadata['id'] ?? document?.['id'] ?? previous?.['id'];
  const partitionKey =
    (isDelete ? partitionKeyFromMetadata(metadata['partitionKey'], key) : undefined) ??
    partitionKeyOf(document ?? previous ?? {}, key);
  const seconds = num(metadata['crts']) ?? num(document?.['_ts']) ?? num(previous?.['_ts']) ?? 0;
  return {
    id: String(id),
    operation,
    document: document as T | undefined,
    ...(previous !== undefined && previous !== null ? { previous: previous as T } : {}),
    lsn: num(metadata['lsn']) ?? num(document?.['_lsn']) ?? fallbackLsn,
    timestampMs: seconds * 1000,
    ...(partitionKey !== undefined ? { partitionKey } : {}),
    ...(metadata['timeToLiveExpired'] === true ? { timeToLiveExpired: true } : {}),
  };
}
