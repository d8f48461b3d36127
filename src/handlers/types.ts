import type { Observable } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { CloseReason, FeedEvent } from '../core/events.js';
import type { Partition } from '../core/Partition.js';
import type { OnFailure } from '../failures/failurePolicy.js';
import type { ChangeFeedOptions } from '../feed/options.js';

/**
 * What a handler knows about the partition it is called for. One context per ownership of a lease: a lease
 * acquired again (after a rebalance) gets a new one.
 */
export interface PartitionContext {
  /** Lease token (partition id) of the lease. */
  readonly leaseToken: string;
  /** The partition (its key range). */
  readonly partition: Partition;
  /** Fencing token of this ownership: every write made for it may carry it. */
  readonly epoch: number;
  /** This host's name (the lease owner). */
  readonly owner: string;
  /**
   * Aborted when this host's ownership of the lease ends (lost, handed over, split, shutdown, halted); its `reason`
   * is an `AbortError` (a `DOMException`) whose message names the lease and the close reason.
   */
  readonly signal: AbortSignal;
  /**
   * Checkpoints everything up to the end of the current call's changes (or, outside a call, of the last
   * call that succeeded). Resolves once the lease is written; rejects with `LeaseLostError` when another
   * host owns the lease now. Needed only with `checkpoint: 'manual'`; otherwise checkpoints are automatic.
   */
  checkpoint(): Promise<void>;
}

/**
 * The handlers of {@link processChanges}, named like the Event Hubs / change feed processor callbacks.
 * Each may return a promise; calls for one partition never overlap.
 */
export interface ChangeHandlers<T> {
  /**
   * Processes the changes of one batch of one partition, in LSN order. The next call for the partition
   * waits until this one settles. Throwing (or rejecting) is an item failure: see `onFailure`. Called with
   * an empty array only for idle batches (`maxWaitTimeMs`).
   */
  processChanges(changes: readonly Change<T>[], context: PartitionContext): Promise<void> | void;
  /** Called once when this host starts owning a lease, before its first `processChanges`. */
  processInitialize?(context: PartitionContext): Promise<void> | void;
  /** Called once when the ownership ended, after its last `processChanges` settled, with why it ended. */
  processClose?(context: PartitionContext, reason: CloseReason): Promise<void> | void;
  /**
   * Called for every `error` event: item failures of `processChanges` (a `HandlerError`, with its attempt
   * count on the events stream), infrastructure errors being retried, fencing. `context` is the
   * partition's, or `undefined` for errors of no partition (a fatal error ends the processor too).
   */
  processError?(error: Error, context: PartitionContext | undefined): Promise<void> | void;
}

/** Options of {@link processChanges}: the feed's options, plus when to checkpoint and what to do with failures. */
export interface ProcessChangesOptions<T> extends ChangeFeedOptions<T> {
  /**
   * Automatic checkpoints after calls that succeeded, throttled like `checkpointEvery`: once `count`
   * changes are done or `ms` milliseconds after the first unwritten one, and at shutdown. Or `'manual'`:
   * only `context.checkpoint()` checkpoints. Default `{ count: 1000, ms: 5000 }`.
   */
  readonly checkpoint?: { readonly count?: number; readonly ms?: number } | 'manual';
  /**
   * A failing call is retried (the batch once, then the changes of each LSN alone under `retry`: changes
   * sharing an LSN, as a transactional batch's or a merged partition's do, stay together in one call), then,
   * for an LSN group that keeps failing (a poison change takes the other changes of its LSN with it):
   * `'halt'` (default) stops the partition before it (nothing past it is checkpointed, the lease is given
   * back with close reason `Halted`); `'skip'` reports its changes and moves on; `{ deadLetter }`
   * dead-letters all of them; `'throw'` ends the partition's processing. Every failure is also an `error` event (and
   * goes to `processError`). A fencing error (`ViewFencedError`, `LeaseLostError`: another host owns the
   * partition now) is never a failure of the changes: the call's batch is dropped for the new owner. See
   * {@link OnFailure}.
   */
  readonly onFailure?: OnFailure<T>;
}

/** A running {@link processChanges}. */
export interface ChangeProcessorHandle {
  /** This host's name (the lease owner). */
  readonly owner: string;
  /** Lease, checkpoint, error and stall events (the same as the Rx form's). */
  readonly events$: Observable<FeedEvent>;
  /** Changes read but not yet checkpointed (or, in manual mode, not yet processed), over all partitions. */
  readonly inFlightChanges: number;
  /**
   * Stops reading, lets calls in flight finish (bounded by `drainTimeoutMs` for the lease hand-over),
   * writes the last checkpoints, releases the leases and calls `processClose`. Resolves after all of that;
   * rejects with the error that stopped the processor, if one did. Idempotent.
   */
  close(): Promise<void>;
}
