// Public: what a lease coordinator offers (`LeaseCoordinator`) and what it hands the feed engine per lease
// (`OwnedLease`): the one seam between ownership (src/leases) and processing (src/feed).
import type { Observable } from 'rxjs';
import type { CloseReason, FeedEvent } from '../core/events.js';
import type { Partition, Position } from '../core/Partition.js';
import type { Lease } from './Lease.js';

/**
 * A lease this host owns, handed by the coordinator to the feed engine, which runs one partition reader
 * per owned lease. Ownership ends when `signal` aborts; `closeReason` then says why.
 *
 * The seam between ownership (src/leases) and processing (src/feed): they share only this type.
 */
export interface OwnedLease {
  /** Lease token (= partition id). */
  readonly leaseToken: string;
  /** The partition the lease covers. */
  readonly partition: Partition;
  /** The lease as it was when acquired (its `continuation` is where reading resumes). */
  readonly lease: Lease;
  /** Fencing token of this ownership; stamped on every batch read under it. */
  readonly epoch: number;
  /** Aborted when ownership ends: lost, released, handed over, gone, or shutdown. */
  readonly signal: AbortSignal;
  /** Why ownership ended; `undefined` while owned. */
  readonly closeReason: CloseReason | undefined;
  /**
   * Writes `position` as the lease's checkpoint, conditional on still owning it (fencing). Rejects with
   * `LeaseLostError` (and ends ownership with `LeaseLost`) when another host owns the lease now.
   */
  checkpoint(position: Position): Promise<void>;
  /**
   * The reader found the partition gone (split/merge): the coordinator replaces this lease by leases for
   * the partitions now covering its range, each starting at `position` (the last position read and
   * checkpointed), then ends ownership with `PartitionGone`.
   */
  partitionGone(position: Position | null): Promise<void>;
  /**
   * Registers how to drain this partition before a voluntary release (shutdown or rebalance): stop reading,
   * wait until every batch read has been acknowledged, write the final checkpoint. The coordinator awaits it
   * (bounded by a timeout) before it releases the lease.
   */
  onDrain(drain: () => Promise<void>): void;
  /**
   * Ends this ownership now, without writing the lease: a sink found that a newer owner wrote (a fenced
   * view write), so the lease is not this host's any more. Closes with `LeaseLost`.
   */
  lose(why: string): void;
  /**
   * Ends this ownership now and releases the lease without draining, because this host cannot use it
   * (e.g. the partition has been unreadable for too long), so another host can take it. Closes with
   * `reason` (default `Error`; `Halted` for a halting failure policy); this host leaves the lease to others
   * for one expiration.
   */
  release(why: string, reason?: CloseReason): void;
  /**
   * The reader's measure of this partition's load (changes per second, ≥ 0). With `balanceBy: 'load'` the
   * coordinator publishes the latest value in the lease (property `rxfeed.load`) on its next renewal or
   * checkpoint, so the other hosts see it in the listing they read anyway; otherwise it is ignored.
   */
  reportLoad?(changesPerSecond: number): void;
}

/**
 * Owns leases for one host: bootstraps one lease per partition, acquires, renews, balances, releases.
 *
 * @example
 * ```ts
 * coordinator.acquired$.subscribe((owned) => console.log('reading', owned.leaseToken));
 * await coordinator.stop();
 * ```
 */
export interface LeaseCoordinator {
  /** This host's name (the lease `Owner`). */
  readonly owner: string;
  /**
   * Emits each lease when this host acquires it. Subscribing starts the coordinator's loops;
   * unsubscribing stops them and releases this host's leases (use {@link LeaseCoordinator.stop} to await
   * that).
   */
  readonly acquired$: Observable<OwnedLease>;
  /** Ownership events: acquired, released, lost, taken over, split, errors (e.g. corrupt lease documents). */
  readonly events$: Observable<FeedEvent>;
  /**
   * Stops acquiring, drains and releases every owned lease, and tells the other live hosts (a notice they meet
   * at their next write) so they take the leases at once; resolves when done. Idempotent.
   */
  stop(): Promise<void>;
  /** Leases currently owned by this host. */
  owned(): readonly OwnedLease[];
}
