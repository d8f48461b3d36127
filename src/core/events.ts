import type { Change } from './Change.js';
import type { Position } from './Partition.js';

/**
 * Why a partition feed (or the whole processor) closed. Names follow the .NET change feed processor.
 *
 * - `Shutdown`: the subscriber unsubscribed or the processor was stopped;
 * - `LeaseLost`: another host took the lease, or it expired (fencing rejected a write);
 * - `Rebalanced`: this host handed the lease over voluntarily to even out the load;
 * - `PartitionGone`: the partition was split or merged; child leases continue from its position;
 * - `ResourceGone`: the monitored container or database was deleted;
 * - `Unauthorized`: the credentials were rejected;
 * - `Halted`: user code kept failing on a change under an `onFailure: 'halt'` policy; the partition stopped
 *   before that change and its lease was given back (its checkpoint never passes the change);
 * - `Error`: an unexpected failure.
 */
export type CloseReason =
  | 'Shutdown'
  | 'LeaseLost'
  | 'Rebalanced'
  | 'PartitionGone'
  | 'ResourceGone'
  | 'Unauthorized'
  | 'Halted'
  | 'Error';

/**
 * Something the processor did or noticed. Subscribe to the events stream to log, alert or dead-letter.
 *
 * @example
 * ```ts
 * events$.subscribe((e) => { if (e.type === 'error') console.error(e.lease, e.error); });
 * ```
 */
export type FeedEvent =
  | { readonly type: 'leaseAcquired'; readonly owner: string; readonly lease: string; readonly epoch: number }
  | { readonly type: 'leaseReleased'; readonly owner: string; readonly lease: string; readonly reason: CloseReason }
  | { readonly type: 'leaseLost'; readonly owner: string; readonly lease: string; readonly newOwner?: string | null }
  /** This host took a live lease over from `from` (balancing: its owner did not hand it over in time). */
  | { readonly type: 'leaseTakenOver'; readonly owner: string; readonly lease: string; readonly from: string | null }
  | { readonly type: 'partitionSplit'; readonly owner: string; readonly lease: string; readonly children: readonly string[] }
  | {
      readonly type: 'checkpoint';
      readonly owner: string;
      readonly lease: string;
      readonly position: Position;
      /** Changes acknowledged since the previous checkpoint of this lease. */
      readonly changes: number;
    }
  | {
      readonly type: 'error';
      readonly owner: string;
      readonly lease?: string;
      readonly error: Error;
      /** What failed: user code on a change, the infrastructure, fencing, or a corrupt lease document. */
      readonly kind: ErrorKind;
      /**
       * How many times in a row this operation has failed so far (1 = first failure). A failure that keeps
       * repeating (a wrong port, an unresolvable host) is reported again at 1, 3, 10, 30, 100, … attempts.
       */
      readonly attempts?: number;
      /** The change user code failed on, for item failures. */
      readonly change?: Change<unknown>;
    }
  /**
   * A read of a partition failed and will be retried: one event per failed read, so metrics can count
   * every transient failure (`error` events for transient failures start at the 3rd in a row).
   */
  | {
      readonly type: 'readRetry';
      readonly owner: string;
      readonly lease: string;
      /** What failed, by cause; see {@link ReadFailureKind}. */
      readonly failure: ReadFailureKind;
      /** The error's class name (`TransientError`, …). */
      readonly error: string;
      /** Consecutive failed reads of this lease so far (1 = first). */
      readonly attempts: number;
      /** Wait before the next attempt, in ms. */
      readonly delayMs: number;
    }
  | {
      readonly type: 'stall';
      readonly owner: string;
      readonly lease?: string;
      /** What is wrong and what to do about it. */
      readonly message: string;
    }
  /**
   * Changes user code gave up on were written to the dead-letter sink (`onFailure: { deadLetter }`): the
   * checkpoint may now pass them. Each of them was reported before as an `error` event of kind `item`.
   * One event per write whose reply came back, from the host that made it; nothing is announced that the
   * sink did not accept. A write whose reply was lost is retried while the partition is owned (the retry's
   * reply is announced); if the ownership ends first, its letters may be stored unannounced by this host: the
   * next owner reads the changes again (the checkpoint never passed them) and writes and announces them
   * itself, except a version superseded since in `latestVersion` mode, which no read returns again.
   */
  | {
      readonly type: 'deadLettered';
      readonly owner: string;
      readonly lease: string;
      /** The dead-lettered changes' LSNs, in order (a poison change's LSN group goes with it). */
      readonly lsns: readonly number[];
      /** The sink's description (e.g. `postgres dead letters rxfeed.dead_letters`). */
      readonly sink: string;
      /** The operator or handler that gave up (`eachBatch`, `materializeToView`, `processChanges`, …). */
      readonly operator: string;
    };

/**
 * What an `error` event is about:
 *
 * - `item`: user code failed on one change (e.g. a `HandlerError`); the feed goes on;
 * - `infrastructure`: a source, lease store or sink call failed (network, throttling, timeouts); retried;
 * - `fencing`: another host owns the lease now (a rejected lease or view write); this host let it go;
 * - `corrupt`: a document in the lease store is not a readable lease; reported once and skipped.
 */
export type ErrorKind = 'item' | 'infrastructure' | 'fencing' | 'corrupt';

/**
 * Why a read failed: `throttled` (429), `unavailable` (503 and other 5xx), `timeout` (408 or no answer in
 * time), `network` (no HTTP status: connection refused or reset, DNS), `other` (anything else).
 */
export type ReadFailureKind = 'throttled' | 'unavailable' | 'timeout' | 'network' | 'other';

/** The `type` of a {@link FeedEvent}. */
export type FeedEventType = FeedEvent['type'];
