// Role: one lease this host owns — the OwnedLease the reader gets, its latest stored version, the queue that
// keeps its writes in order, its renewal timer, and its two deadlines (local, handoff), which end it as lost.
import type { SchedulerLike, Subscription } from 'rxjs';
import type { CloseReason } from '../../core/events.js';
import type { Partition, Position } from '../../core/Partition.js';
import { LinkedAbort } from '../../internal/linkedAbort.js';
import type { Logger } from '../../internal/log.js';
import type { Lease } from '../Lease.js';
import type { OwnedLease } from '../LeaseCoordinator.js';

/** @internal The roles an {@link Ownership} hands its reader's requests to. */
export interface OwnershipRoles {
  /** Writes checkpoints (the LeaseWriter). */
  readonly writer: { checkpoint(ownership: Ownership, position: Position): Promise<void> };
  /** Replaces the lease of a gone partition (GonePartitions). */
  readonly gone: { replace(ownership: Ownership, position: Position | null): Promise<void> };
  /** Ends ownerships (Endings): the ownership loses its lease at its deadlines, the reader may give it up. */
  readonly endings: {
    lose(ownership: Ownership, why: string): void;
    giveUp(ownership: Ownership, why: string, reason?: CloseReason): void;
  };
}

/**
 * One lease this host owns: the {@link OwnedLease} handed to the reader, plus what the coordinator keeps
 * per lease: the latest stored version, the queue that keeps its writes in order, the renewal timer and
 * the local deadline.
 *
 * The local deadline: another host may take the lease once `leaseExpirationMs` passed since the last
 * timestamp this host wrote. This host only knows a write landed when it returns, so it counts from the
 * moment it sent its last confirmed write and stops using the lease a margin before that expiry, whether or
 * not the write now in flight (perhaps hung) ever returns.
 *
 * @internal
 */
export class Ownership implements OwnedLease {
  readonly leaseToken: string;
  readonly epoch: number;
  closeReason: CloseReason | undefined;
  /** The latest stored version (its etag is the one the next write is conditional on). */
  current: Lease;
  /** Latest load the reader reported (changes per second), published with `balanceBy: 'load'`. */
  load: number | undefined;
  drain: (() => Promise<void>) | undefined;
  renewTimer: Subscription | undefined;
  closing: Promise<void> | undefined;
  /** The lease of its gone partition was deleted by this ownership (its reply may have been lost): a retry finds it gone. */
  parentDeleteSent = false;
  /** Every child of its gone partition was created by this ownership: a retry only deletes the parent. */
  childrenCreated = false;
  /** The ownership's signal: a link, so the reader's signals over it cost no `AbortSignal.any` each. */
  readonly #abort = new LinkedAbort();
  /** Writes to one lease run one after the other, so renewals never race our own checkpoints. */
  #queue: Promise<unknown> = Promise.resolve();
  #deadlineTimer: Subscription | undefined;
  #handoffTimer: Subscription | undefined;

  constructor(
    readonly lease: Lease,
    readonly partition: Partition,
    readonly log: Logger,
    private readonly roles: OwnershipRoles,
    private readonly scheduler: SchedulerLike,
    /** When the write that acquired the lease was sent (scheduler time). */
    sentAt: number,
    private readonly usableMs: number,
  ) {
    this.leaseToken = lease.leaseToken;
    this.epoch = lease.epoch;
    this.current = lease;
    this.confirm(lease, sentAt);
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get ended(): boolean {
    return this.closeReason !== undefined;
  }

  checkpoint(position: Position): Promise<void> {
    return this.roles.writer.checkpoint(this, position);
  }

  partitionGone(position: Position | null): Promise<void> {
    return this.roles.gone.replace(this, position);
  }

  onDrain(drain: () => Promise<void>): void {
    this.drain = drain;
  }

  reportLoad(changesPerSecond: number): void {
    if (Number.isFinite(changesPerSecond) && changesPerSecond >= 0) this.load = changesPerSecond;
  }

  lose(why: string): void {
    this.roles.endings.lose(this, why);
  }

  release(why: string, reason?: CloseReason): void {
    this.roles.endings.giveUp(this, why, reason);
  }

  /** Runs `work` after every earlier write of this lease has settled. */
  enqueue<R>(work: () => Promise<R>): Promise<R> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** A write sent at `sentAt` stored `stored`: the lease is ours until `sentAt` + expiry, less the margin. */
  confirm(stored: Lease, sentAt: number): void {
    this.current = stored;
    if (this.ended) return;
    this.#deadlineTimer?.unsubscribe();
    const dueIn = Math.max(0, sentAt + this.usableMs - this.scheduler.now());
    this.#deadlineTimer = this.scheduler.schedule(() => {
      this.roles.endings.lose(this, `no renewal confirmed within ${this.usableMs} ms (local deadline, before others may take it)`);
    }, dueIn);
  }

  /**
   * Host `to` asked for this lease and will take it by force in `dueInMs` if it is not handed over by then:
   * the ownership ends at that moment whatever the handover is doing (the earliest such moment counts).
   */
  handoffRequested(to: string, dueInMs: number): void {
    if (this.ended || this.#handoffTimer) return;
    this.#handoffTimer = this.scheduler.schedule(() => {
      this.roles.endings.lose(this, `not handed over to ${to} in time: it may take the lease by force now`);
    }, Math.max(0, dueInMs));
  }

  /** Marks the ownership ended and aborts its signal (reason: an `AbortError` naming the close reason); idempotent. */
  end(reason: CloseReason): void {
    if (this.closeReason) return;
    this.closeReason = reason;
    this.renewTimer?.unsubscribe();
    this.#deadlineTimer?.unsubscribe();
    this.#handoffTimer?.unsubscribe();
    // An Error, not the bare reason: code that rethrows `signal.reason` (throwIfAborted, fetch) throws an AbortError.
    this.#abort.abort(new DOMException(`ownership of lease ${this.leaseToken} ended: ${reason}`, 'AbortError'));
  }
}
