import type { Container } from '@azure/cosmos';
import type { Partition } from '../../src/core/Partition.js';

/** One lease as the .NET v3 change feed processor (or an Azure Functions Cosmos DB trigger) left it. */
export interface DotnetLease {
  readonly partition: Partition;
  /** The host that holds it; `null` once released (`StopAsync`). */
  readonly owner: string | null;
  /** Its `ContinuationToken`: the change feed ETag of the last checkpoint (`"1234"`), `null` before the first. */
  readonly continuation: string | null;
  /** When it was last acquired, renewed or checkpointed, in ms since the epoch. */
  readonly timestampMs: number;
}

/** The .NET `timestamp`: a Newtonsoft `DateTime`, ISO 8601 UTC with 7 fractional digits. */
export function dotnetTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '1234Z');
}

/**
 * Writes a lease container's documents exactly as the .NET v3 processor does (see docs/compatibility.md):
 * DocumentServiceLeaseManagerCosmos.CreateLeaseIfNotExistAsync(PartitionKeyRange): id = GetDocumentId(token)
 *   = ContainerNamePrefix + ".." + token (DocumentServiceLeaseStoreManagerOptions), LeaseToken = range id,
 *   FeedRange = FeedRangeEpk (FeedRangeInternalConverter "Range" + RangeJsonConverter: min/max only for
 *   [min, max)), Mode = HttpConstants.A_IMHeaderValues.IncrementalFeed;
 * DocumentServiceLeaseCore: "version" 0, "Owner", "ContinuationToken", "timestamp" (7 fractional digits),
 *   "properties"; DocumentServiceLeaseStoreCosmos: the store marker `{ id: prefix + ".info" }` and the
 *   bootstrap lock `{ id: prefix + ".lock", ttl }`.
 *
 * @example
 * ```ts
 * await seedDotnetLeases(leases, prefix, [{ partition, owner: null, continuation: '"12"', timestampMs: Date.now() }]);
 * ```
 */
export async function seedDotnetLeases(
  container: Container,
  prefix: string,
  leases: readonly DotnetLease[],
  markers: { readonly info?: boolean; readonly lock?: boolean } = { info: true },
): Promise<void> {
  if (markers.info) await container.items.create({ id: `${prefix}.info` });
  if (markers.lock) await container.items.create({ id: `${prefix}.lock`, ttl: 60 });
  for (const { partition: p, owner, continuation, timestampMs } of leases) {
    await container.items.create({
      id: `${prefix}..${p.id}`,
      version: 0,
      LeaseToken: p.id,
      FeedRange: { Range: { min: p.range.minInclusive, max: p.range.maxExclusive } },
      Owner: owner,
      ContinuationToken: continuation,
      timestamp: dotnetTimestamp(timestampMs),
      properties: {},
      Mode: 'Incremental Feed',
    });
  }
}
