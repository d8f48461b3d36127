// Public: the lease record every store keeps (fields as in docs/lease-protocol.md, "Documents").
import type { FeedMode, FeedRange, Position } from '../core/Partition.js';

/**
 * One lease: the ownership record and checkpoint of one partition, stored as one document in a lease
 * store. Field meanings follow the .NET/Java change feed processors (see the Cosmos lease store for the
 * document shape).
 */
export interface Lease {
  /** Document id: `<prefix><leaseToken>`. */
  readonly id: string;
  /** The partition id this lease covers (`LeaseToken`). */
  readonly leaseToken: string;
  /** The key range the partition covers (`FeedRange`). */
  readonly feedRange: FeedRange | undefined;
  /** Host that owns the lease, or `null` when free (`Owner`). */
  readonly owner: string | null;
  /** The checkpoint: position to resume after, or `null` before the first checkpoint (`ContinuationToken`). */
  readonly continuation: Position | null;
  /** Last time the owner acquired, renewed or checkpointed, in ms since the epoch (`timestamp`). */
  readonly timestampMs: number;
  /** Fencing token: incremented on every change of owner, so writes from a deposed owner can be rejected. */
  readonly epoch: number;
  /** Feed mode the lease was created for (`Mode`). */
  readonly mode: FeedMode | undefined;
  /** Free-form string properties, copied to child leases on a split (`properties`). */
  readonly properties: Readonly<Record<string, string>>;
  /** Concurrency token of the stored document; every update is conditional on it. */
  readonly etag: string;
}

/** The fields of a lease a store fills in itself. */
export type NewLease = Omit<Lease, 'etag'>;
