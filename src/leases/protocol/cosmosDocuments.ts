// Protocol: the lease and marker documents as stored in a Cosmos DB container — field names, formats and the
// .NET v2/v3 variants read — the layout the .NET processor, Azure Functions and KEDA share with rxfeed
// (docs/compatibility.md, docs/lease-protocol.md "Documents").
import type { ItemDefinition } from '@azure/cosmos';
import type { FeedMode, FeedRange } from '../../core/Partition.js';
import { CorruptLeaseError } from '../../errors/index.js';
import type { Lease, NewLease } from '../Lease.js';

/**
 * The stored lease document. Field names follow the .NET v3 / Java v4 change feed processors
 * (`DocumentServiceLeaseCore`), so tools reading those (estimators, KEDA's Cosmos scaler) can read ours.
 * `epoch` is rxfeed's own fencing token, kept in its own field (not in `properties`, which children of a
 * split inherit). `partitionKey` is present only in containers partitioned on `/partitionKey`.
 */
export interface CosmosLeaseDocument extends ItemDefinition {
  id: string;
  partitionKey?: string;
  /** 0: partition-key-range lease (token = range id); 1: EPK lease (token = `min-max`). */
  version: 0 | 1;
  LeaseToken: string;
  FeedRange?: { Range: { min: string; max: string; isMinInclusive: boolean; isMaxInclusive: boolean } };
  Owner: string | null;
  ContinuationToken: string | null;
  /** ISO 8601 UTC, as .NET writes it; `_ts` is used when absent. */
  timestamp: string;
  properties: Record<string, string>;
  /** `"Incremental Feed"` (LatestVersion) or `"Full-Fidelity Feed"` (AllVersionsAndDeletes), as .NET. */
  Mode?: string;
  epoch: number;
}

/** A marker document of the .NET scheme (`<prefix>.info`, `<prefix>.lock`): no `LeaseToken`. */
export interface CosmosMarkerDocument extends ItemDefinition {
  /** `<prefix>.info` or `<prefix>.lock`. */
  id: string;
  /** Present only in containers partitioned on `/partitionKey`. */
  partitionKey?: string;
  /** The host that wrote the marker. */
  Owner: string | null;
  /** ISO 8601 UTC; `_ts` is used when absent (as in the .NET processor's markers). */
  timestamp: string;
  /** Always 0 (markers are never fenced). */
  epoch: number;
  /** Only on a bootstrap lock handed over at a stop: the leases its bootstrap knew of (coordinator/bootstrap.ts). */
  properties?: Record<string, string>;
}

/**
 * What a lease document becomes when it is deleted with a tombstone (`LeaseStore.tombstone`): its id and epoch,
 * kept for good so that a create landing late cannot bring the lease back below that epoch. No `LeaseToken`:
 * KEDA, which lists by a shorter prefix, skips it as bookkeeping; rxfeed's own listings and reads skip it.
 * Only written in the `rxfeed` lease scheme (the .NET processor reads every document under `<prefix>..` as a
 * lease).
 */
export interface CosmosTombstoneDocument extends ItemDefinition {
  id: string;
  /** Present only in containers partitioned on `/partitionKey`. */
  partitionKey?: string;
  /** Always `true`: what tells a tombstone from a lease or a marker. */
  rxfeedTombstone: true;
  /** The epoch the lease had when it was deleted: it is created again only at this epoch or above. */
  epoch: number;
}

/** @internal The tombstone written in place of `lease` (see {@link CosmosTombstoneDocument}). */
export function tombstoneDocument(lease: { readonly id: string; readonly epoch: number }, partitionKeyPath: '/id' | '/partitionKey' = '/id'): CosmosTombstoneDocument {
  return {
    id: lease.id,
    ...(partitionKeyPath === '/partitionKey' ? { partitionKey: lease.id } : {}),
    rxfeedTombstone: true,
    epoch: lease.epoch,
  };
}

/** @internal The epoch a stored tombstone keeps, or `undefined` when the document is no tombstone. */
export function tombstoneEpoch(doc: Record<string, unknown>): number | undefined {
  if (doc.rxfeedTombstone !== true) return undefined;
  return typeof doc.epoch === 'number' && Number.isFinite(doc.epoch) ? doc.epoch : Number.MAX_SAFE_INTEGER;
}

const MODE_TO_DOC: Record<FeedMode, string> = {
  latestVersion: 'Incremental Feed',
  allVersionsAndDeletes: 'Full-Fidelity Feed',
};

/**
 * The document written for `lease` (without `_etag`, which the service sets).
 *
 * @example
 * ```ts
 * const doc = toDocument(lease); // { id, version, LeaseToken, FeedRange, Owner, ContinuationToken, timestamp, ... }
 * ```
 * @internal
 */
export function toDocument(lease: NewLease, partitionKeyPath: '/id' | '/partitionKey' = '/id'): CosmosLeaseDocument | CosmosMarkerDocument {
  if (lease.leaseToken === '') {
    // A marker of the .NET scheme (`<prefix>.info` / `.lock`): no LeaseToken, so readers that list by a
    // shorter prefix than ours (KEDA) skip it, as they skip the .NET processor's own `{ id }` markers.
    return {
      id: lease.id,
      ...(partitionKeyPath === '/partitionKey' ? { partitionKey: lease.id } : {}),
      Owner: lease.owner,
      timestamp: new Date(lease.timestampMs).toISOString(),
      epoch: lease.epoch,
      ...(Object.keys(lease.properties).length > 0 ? { properties: { ...lease.properties } } : {}),
    };
  }
  const range = lease.feedRange;
  const epk = range !== undefined && isEpkToken(lease.leaseToken, range);
  if (range && lease.mode && partitionKeyPath === '/id') {
    // The usual lease (a range, a mode, a container on /id), renewed in bulk: one literal, no spread of
    // conditional parts, no token string built to compare (same fields in the same order as below).
    return {
      id: lease.id,
      version: epk ? 1 : 0,
      LeaseToken: lease.leaseToken,
      FeedRange: { Range: { min: range.minInclusive, max: range.maxExclusive, isMinInclusive: true, isMaxInclusive: false } },
      Owner: lease.owner,
      ContinuationToken: lease.continuation,
      timestamp: new Date(lease.timestampMs).toISOString(),
      properties: { ...lease.properties },
      Mode: MODE_TO_DOC[lease.mode],
      epoch: lease.epoch,
    };
  }
  return {
    id: lease.id,
    ...(partitionKeyPath === '/partitionKey' ? { partitionKey: lease.id } : {}),
    version: epk ? 1 : 0,
    LeaseToken: lease.leaseToken,
    ...(range
      ? { FeedRange: { Range: { min: range.minInclusive, max: range.maxExclusive, isMinInclusive: true, isMaxInclusive: false } } }
      : {}),
    Owner: lease.owner,
    ContinuationToken: lease.continuation,
    timestamp: new Date(lease.timestampMs).toISOString(),
    properties: { ...lease.properties },
    ...(lease.mode ? { Mode: MODE_TO_DOC[lease.mode] } : {}),
    epoch: lease.epoch,
  };
}

/** Whether `token` is `<min>-<max>` of `range` (an EPK lease's token), without building that string. */
function isEpkToken(token: string, range: FeedRange): boolean {
  const min = range.minInclusive;
  const max = range.maxExclusive;
  return token.length === min.length + 1 + max.length && token.startsWith(min) && token.charCodeAt(min.length) === 45 /* - */ && token.endsWith(max);
}

/**
 * Reads a stored document as a lease, or says what is wrong with it.
 *
 * @example
 * ```ts
 * const lease = fromDocument(resource);
 * if (lease instanceof CorruptLeaseError) console.warn(lease.message);
 * ```
 * @internal
 */
export function fromDocument(doc: Record<string, unknown>): Lease | CorruptLeaseError {
  const id = typeof doc.id === 'string' ? doc.id : String(doc.id);
  const bad = (problem: string) => new CorruptLeaseError(id, problem);
  if (typeof doc.id !== 'string') return bad('id is not a string');
  const stored = doc.LeaseToken ?? doc.PartitionId; // PartitionId: v2 (.NET SDK 2) schema
  // Markers (`<prefix>.info`, `<prefix>.lock`) carry no LeaseToken in the .NET layout: `{ id }` and `{ id, ttl }`.
  // So do the records deleted leases leave in the .NET scheme (`<prefix>.gone.<token>`, protocol/documents.ts).
  const marker = stored === undefined && (id.endsWith('.info') || id.endsWith('.lock') || id.includes('.gone.'));
  if (!marker && (typeof stored !== 'string' || stored === '')) return bad('LeaseToken is missing or not a string');
  const token = marker ? '' : (stored as string);
  if (doc.Owner !== undefined && doc.Owner !== null && typeof doc.Owner !== 'string') return bad('Owner is not a string');
  const continuation = doc.ContinuationToken;
  if (continuation !== undefined && continuation !== null && typeof continuation !== 'string') {
    return bad('ContinuationToken is not a string');
  }
  let timestampMs = typeof doc.timestamp === 'string' ? Date.parse(doc.timestamp) : NaN;
  if (Number.isNaN(timestampMs)) {
    if (doc.timestamp === undefined && typeof doc._ts === 'number') timestampMs = doc._ts * 1000;
    else return bad('timestamp is not an ISO date');
  }
  const epoch = doc.epoch ?? 0;
  if (typeof epoch !== 'number' || !Number.isInteger(epoch) || epoch < 0) return bad('epoch is not a non-negative integer');
  const properties = doc.properties ?? {};
  if (typeof properties !== 'object' || properties === null || Array.isArray(properties)) return bad('properties is not an object');
  for (const key in properties) {
    if (Object.hasOwn(properties, key) && typeof (properties as Record<string, unknown>)[key] !== 'string') return bad('properties holds a non-string value');
  }
  let feedRange: FeedRange | undefined;
  if (doc.FeedRange !== undefined && doc.FeedRange !== null) {
    const holder = doc.FeedRange as { Range?: unknown; EffectiveRange?: unknown };
    const range = (holder.Range ?? holder.EffectiveRange) as { min?: unknown; max?: unknown } | undefined;
    if (!range || typeof range.min !== 'string' || typeof range.max !== 'string') return bad('FeedRange has no Range {min, max}');
    feedRange = { minInclusive: range.min, maxExclusive: range.max };
  }
  let mode: FeedMode | undefined;
  // As written (by rxfeed and .NET) at once; other spellings through the normalised name.
  if (doc.Mode === MODE_TO_DOC.latestVersion) mode = 'latestVersion';
  else if (doc.Mode === MODE_TO_DOC.allVersionsAndDeletes) mode = 'allVersionsAndDeletes';
  else if (typeof doc.Mode === 'string' && doc.Mode !== '') {
    const m = doc.Mode.toLowerCase().replace(/[^a-z]/g, '');
    if (m === 'incrementalfeed' || m === 'latestversion') mode = 'latestVersion';
    else if (m === 'fullfidelityfeed' || m === 'allversionsanddeletes') mode = 'allVersionsAndDeletes';
    else return bad(`Mode ${doc.Mode} is unknown`);
  }
  if (typeof doc._etag !== 'string') return bad('_etag is missing');
  return Object.freeze({
    id,
    leaseToken: token,
    feedRange,
    owner: (doc.Owner as string | null | undefined) || null,
    continuation: (continuation as string | null | undefined) ?? null,
    timestampMs,
    epoch,
    mode,
    properties: Object.freeze({ ...(properties as Record<string, string>) }),
    etag: doc._etag,
  });
}
