import { catchError, concat, defer, EMPTY, finalize, ignoreElements, mergeMap, type MonoTypeOperatorFunction, type Observable, type Subscription, tap } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import type { CloseReason, FeedEvent } from '../core/events.js';
import type { Partition } from '../core/Partition.js';
import { type OnFailure, resolveOnFailure } from '../failures/failurePolicy.js';
import { InvalidOptionsError } from '../errors/index.js';
import { createChangeFeed } from '../feed/createChangeFeed.js';
import { type ChangeFeedOptions, DEFAULTS } from '../feed/options.js';
import type { PartitionFeed } from '../feed/reader/readPartition.js';
import { logger } from '../internal/log.js';
import { checkpointEvery } from '../operators/checkpointEvery.js';
import { eachBatchUnder } from '../operators/eachBatch.js';

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

/**
 * Runs a change feed processor that calls your handlers per partition: the shape of the .NET / Java change
 * feed processor and of Event Hubs' `subscribe`, as a thin layer over {@link partitionFeeds} and the Rx
 * operators, with the same guarantees and read-credit budget.
 *
 * In short: one `processChanges` call at a time per partition, partitions in parallel, checkpoints after
 * calls that succeeded, failing calls retried then dead-lettered (or halting their partition).
 *
 * @example
 * ```ts
 * import { processChanges, MemoryDeadLetterStore } from 'rxfeed';
 * const processor = processChanges<Order>(
 *   { source, leases, instanceName: 'host-1', onFailure: { retry: { attempts: 5 }, deadLetter: new MemoryDeadLetterStore() } },
 *   { processChanges: async (changes, ctx) => { await ship(changes, { signal: ctx.signal }); } },
 * );
 * process.on('SIGTERM', () => void processor.close());
 * ```
 *
 * @param options The feed's options ({@link ChangeFeedOptions}) plus `checkpoint` (default
 *   `{ count: 1000, ms: 5000 }`) and `onFailure` (default `'halt'`).
 * @param handlers `processChanges` (required), `processInitialize`, `processClose`, `processError`.
 * @returns A handle whose `close()` resolves after the last checkpoint.
 * @see {@link changeFeed} for the Rx form.
 */
export function processChanges<T>(options: ProcessChangesOptions<T>, handlers: ChangeHandlers<T>): ChangeProcessorHandle {
  if (typeof handlers?.processChanges !== 'function') {
    throw new InvalidOptionsError('handlers', 'give an object with processChanges(changes, context) (and optionally processInitialize, processClose, processError)');
  }
  for (const name of ['processInitialize', 'processClose', 'processError'] as const) {
    if (handlers[name] !== undefined && typeof handlers[name] !== 'function') throw new InvalidOptionsError(`handlers.${name}`, 'must be a function when given');
  }
  // Validates onFailure (default 'halt') now; backoff waits run on the feed's scheduler unless it names one.
  const policy = resolveOnFailure<T>(options, options?.scheduler);
  const { checkpoint = DEFAULTS.checkpoint, onFailure: _onFailure, ...feedOptions } = options ?? ({} as ProcessChangesOptions<T>);
  if (checkpoint !== 'manual' && (typeof checkpoint !== 'object' || checkpoint === null)) {
    throw new InvalidOptionsError('checkpoint', "give { count, ms } or 'manual'");
  }
  const checkpointer = (): MonoTypeOperatorFunction<ChangeBatch<T>> =>
    checkpoint === 'manual' ? releaseUnacknowledged() : checkpointEvery({ ...checkpoint, ...(feedOptions.scheduler ? { scheduler: feedOptions.scheduler } : {}) });
  checkpointer(); // validates { count, ms } now
  // The per-partition worker: one call at a time (this is one partition).
  const worker = (context: Context<T>) =>
    eachBatchUnder<ChangeBatch<T>>(
      async (batch) => {
        if (batch.isEmpty && feedOptions.maxWaitTimeMs === undefined) return; // moved position only: nothing to call
        context.current = batch;
        try {
          await handlers.processChanges(batch.changes, context);
        } finally {
          context.current = undefined;
        }
      },
      1,
      policy,
    );

  const processor = createChangeFeed<T>(feedOptions);
  const log = logger('handlers', { owner: processor.owner });
  const contexts = new Map<string, Context<T>>();
  const call = (what: string, context: PartitionContext | undefined, fn: () => Promise<void> | void): Promise<void> =>
    Promise.resolve()
      .then(fn)
      .catch((error: unknown) => {
        const err = error instanceof Error ? error : new Error(String(error));
        log('%s failed%s: %s', what, context ? ` for lease ${context.leaseToken}` : '', err.message);
        if (what !== 'processError') return call('processError', context, () => handlers.processError?.(err, context));
      });

  /** Errors already handed to processError from the events stream (a fatal one is not handed twice). */
  const reported = new WeakSet<Error>();
  // Subscribed only for processError: with no listener at all, important events become process warnings.
  const errors = (handlers.processError ? processor.events$ : EMPTY).subscribe((event) => {
    if (event.type !== 'error' || !handlers.processError) return;
    reported.add(event.error);
    const context = event.lease === undefined ? undefined : contexts.get(event.lease);
    void call('processError', context, () => handlers.processError?.(event.error, context));
  });

  const runPartition = (feed: PartitionFeed<T>): Observable<never> => {
    const context = new Context<T>(feed, processor.owner);
    contexts.set(feed.leaseToken, context);
    return concat(
      defer(() => call('processInitialize', context, () => handlers.processInitialize?.(context))).pipe(ignoreElements()),
      feed.pipe(
        worker(context),
        tap((batch) => (context.last = batch)),
        checkpointer(),
        ignoreElements(),
        // A failure here is reported; the partition's feed ends and the processor goes on.
        catchError((error: unknown) => {
          void call('processError', context, () => handlers.processError?.(error as Error, context));
          return EMPTY;
        }),
      ),
      defer(() => call('processClose', context, () => handlers.processClose?.(context, feed.closeReason ?? 'Shutdown'))).pipe(ignoreElements()),
    ).pipe(
      finalize(() => {
        if (contexts.get(feed.leaseToken) === context) contexts.delete(feed.leaseToken);
      }),
    );
  };

  let failure: Error | undefined;
  let subscription: Subscription | undefined;
  const finished = new Promise<void>((resolve) => {
    subscription = processor.partitions$.pipe(mergeMap(runPartition)).subscribe({
      complete: resolve,
      error: (error: unknown) => {
        failure = error instanceof Error ? error : new Error(String(error));
        log('stopped by %s', failure.message);
        if (!reported.has(failure)) void call('processError', undefined, () => handlers.processError?.(failure!, undefined));
        resolve();
      },
    });
  });
  let closing: Promise<void> | undefined;
  return {
    owner: processor.owner,
    events$: processor.events$,
    get inFlightChanges() {
      return processor.inFlightChanges;
    },
    close: () =>
      (closing ??= (async () => {
        await processor.stop();
        await finished;
        subscription?.unsubscribe();
        errors.unsubscribe();
        if (failure) throw failure;
      })()),
  };
}

/** The {@link PartitionContext} of one ownership, with the batch of the call in flight and the last one done. */
class Context<T> implements PartitionContext {
  readonly leaseToken: string;
  readonly partition: Partition;
  readonly epoch: number;
  readonly signal: AbortSignal;
  /** The batch whose call is in flight. */
  current: ChangeBatch<T> | undefined;
  /** The last batch whose call succeeded. */
  last: ChangeBatch<T> | undefined;
  /** Sequences acknowledged through `checkpoint()` (manual mode leaves the others to be handed back). */
  acknowledged = 0;

  constructor(
    feed: PartitionFeed<T>,
    readonly owner: string,
  ) {
    this.leaseToken = feed.leaseToken;
    this.partition = feed.partition;
    this.epoch = feed.epoch;
    this.signal = feed.signal;
  }

  async checkpoint(): Promise<void> {
    const batch = this.current ?? this.last;
    const origin = batch?.origin;
    if (!batch || !origin) return;
    if (origin.sequence > this.acknowledged) {
      this.acknowledged = origin.sequence;
      origin.tracker.acknowledge(origin.sequence, batch.position);
    }
    await origin.tracker.checkpoint(batch.position);
  }
}

/**
 * Manual checkpointing: a batch whose call succeeded without `context.checkpoint()` returns its read
 * credit (its position is not acknowledged; a later checkpoint covers it).
 */
function releaseUnacknowledged<T>(): MonoTypeOperatorFunction<ChangeBatch<T>> {
  // Dropping a batch `context.checkpoint()` acknowledged is a no-op: the ledger is past it.
  return tap((batch) => batch.origin?.tracker.drop(batch.origin.sequence));
}
