import { Observable, type SchedulerLike, type Subscriber, type TeardownLogic } from 'rxjs';
import type { ChangeBatch } from '../../core/ChangeBatch.js';
import { worthReporting } from '../../errors/errorEvent.js';
import type { CloseReason } from '../../core/events.js';
import type { Partition, Position, StartFrom } from '../../core/Partition.js';
import { fatalCloseReason, isFatal, isThrottled } from '../../errors/classify.js';
import { InvalidOptionsError, PartitionGoneError, TransientError } from '../../errors/index.js';
import { logger, type Logger } from '../../internal/log.js';
import type { OwnedLease } from '../../leases/LeaseCoordinator.js';
import type { Page, Source } from '../../sources/Source.js';
import { LinkedAbort } from '../../internal/linkedAbort.js';
import { aborted, sleep } from '../../internal/wait.js';
import { LeaseTracker, type TrackerContext } from './LeaseTracker.js';
import { startOf } from '../startPosition.js';
import { RateMeter } from './RateMeter.js';
import { PollSchedule } from './PollSchedule.js';
import { ReadDeadline } from './ReadDeadline.js';
import { ReadFailures } from './ReadFailures.js';
import type { FirstPages } from './FirstPages.js';
import type { ReadLimiter } from './ReadLimiter.js';

/**
 * The batches of one owned lease: an Observable of {@link ChangeBatch} that completes when ownership ends.
 * Hot while subscribed: a second subscriber shares the one reader (it never starts a second one).
 *
 * @example
 * ```ts
 * partitionFeeds(options).pipe(mergeMap((feed) => feed.pipe(concatMap(save), checkpointEvery(100)))).subscribe();
 * ```
 */
export type PartitionFeed<T> = Observable<ChangeBatch<T>> & {
  /** Lease token (partition id) of the lease. */
  readonly leaseToken: string;
  /** Fencing token of this ownership. */
  readonly epoch: number;
  /** The partition read. */
  readonly partition: Partition;
  /** Aborted when this host's ownership of the lease ends (lost, released, handed over, shutdown), and for a gone partition once its drain is over, before its children are created (the ownership ends once they are). */
  readonly signal: AbortSignal;
  /** Why the feed closed; `undefined` while it runs. */
  readonly closeReason: CloseReason | undefined;
};

/** @internal What a partition reader needs from its processor. */
export interface ReaderContext<T> extends TrackerContext {
  readonly source: Source<T>;
  readonly startFrom: StartFrom | ((partition: Partition) => StartFrom);
  /** The start of a partition (`startFrom`, or what its function gives, asked once per run); default: asks `startFrom`. */
  readonly startFor?: (partition: Partition) => StartFrom;
  /** Emit an empty batch after this long (ms) with nothing emitted on the partition; `undefined`: never. */
  readonly maxWaitTimeMs?: number;
  /** True when the user chose `startFrom` (so ignoring it for a checkpointed lease deserves a note). */
  readonly startFromGiven?: boolean;
  /**
   * The position a lease with no checkpoint starts at, pinned to the start of the run (`null`: read from the
   * start itself); asked only for such a lease (one created without a pinned start, e.g. by an older version).
   */
  readonly startPosition?: (partition: Partition) => Promise<Position | null>;
  readonly pollIntervalMs: number;
  /** Longest wait after reads in a row that found nothing (doubling from `pollIntervalMs`); default `pollIntervalMs`. */
  readonly idlePollIntervalMs?: number;
  readonly drainTimeoutMs: number;
  /** A partition unreadable for this long (ms) has its lease given up, so another host can read it. */
  readonly unreadableTimeoutMs: number;
  /** Window (ms) over which the change rate reported as the lease's load is measured; default 30 000. */
  readonly loadWindowMs?: number;
  readonly scheduler: SchedulerLike;
  /** A failure that must stop the whole processor (resource gone, credentials, a lease of the other mode). */
  readonly fatal: (error: Error) => void;
  /** Told of every successful read, for `health()`. */
  readonly health?: { read(lease: string): void };
  /** Bounds the reads in flight over all this processor's partitions (`maxConcurrentReads`); none: unbounded. */
  readonly reads?: ReadLimiter;
  /** First pages read while this host's writes that make leases its own were on their way. */
  readonly firstPages?: FirstPages<T>;
}

/** How a read loop ended. */
type LoopEnd =
  | { readonly kind: 'stopped' }
  | { readonly kind: 'gone' }
  | { readonly kind: 'fatal'; readonly error: Error }
  | { readonly kind: 'unreadable'; readonly why: string };

function modeMismatch(owned: OwnedLease, source: Source<unknown>): InvalidOptionsError | undefined {
  const leaseMode = owned.lease.mode;
  if (leaseMode === undefined || leaseMode === source.mode) return undefined;
  // Positions of one mode mean nothing to the other; .NET refuses the switch too.
  return new InvalidOptionsError(
    'mode',
    `lease ${owned.leaseToken} was created for ${leaseMode} but the source reads ${source.mode}; ` +
      'use a new leasePrefix for the other mode (or delete these leases)',
  );
}

/**
 * Reads pages until reading is aborted (ownership ended, a drain began, the subscriber left), the partition
 * is gone, a fatal error occurs, or the partition stayed unreadable past the bound.
 *
 * Adaptive polling: a full page is followed by another read at once, a partial or empty one by a wait of
 * `pollIntervalMs`; with `idlePollIntervalMs`, each empty read in a row doubles the wait, up to that. An
 * empty batch is emitted only when the position moved (e.g. the first `'now'` read), so it can be
 * checkpointed.
 */
async function readLoop<T>(
  owned: OwnedLease,
  ctx: ReaderContext<T>,
  tracker: LeaseTracker,
  signal: AbortSignal,
  log: Logger,
  emit: (batch: ChangeBatch<T>) => void,
): Promise<LoopEnd> {
  const stored = owned.lease.continuation;
  let start: StartFrom;
  try {
    // A function of the partition is asked only for a lease with no checkpoint.
    start =
      stored !== null ? (ctx.startFrom as StartFrom) : (ctx.startFor?.(owned.partition) ?? startOf(ctx.startFrom, ctx.source as Source<unknown>, owned.partition));
  } catch (error) {
    return { kind: 'fatal', error: error as Error };
  }
  let pinnedAt: Position | null = null;
  // The bootstrap pins new leases' starts; a lease without one (made by an older version) is pinned here.
  if (stored === null && start !== 'beginning') {
    try {
      pinnedAt = (await ctx.startPosition?.(owned.partition)) ?? null;
    } catch (error) {
      if (isFatal(error)) return { kind: 'fatal', error };
      if (error instanceof PartitionGoneError) return { kind: 'gone' };
      // Reading from the start itself is what a source without positions does; the first read pins it.
      log('could not pin the start of %s: %s', owned.partition.id, (error as Error)?.message ?? String(error));
    }
  }
  let from: StartFrom = stored !== null ? { position: stored } : pinnedAt !== null ? { position: pinnedAt } : start;
  let lastPosition: Position | null = stored;
  // A start is pinned in the lease at once: a host taking over before the first checkpoint would otherwise
  // start from its own, later "now" and skip what was written in between.
  let pinned = stored !== null || start === 'beginning';
  const failures = new ReadFailures(() => ctx.scheduler.now(), ctx.unreadableTimeoutMs);
  const meter = new RateMeter(ctx.scheduler.now(), ctx.loadWindowMs);
  log('reading %s from %s', owned.partition.id, stored ?? String(start));
  if (stored !== null && ctx.startFromGiven) {
    log('startFrom %s is ignored: the lease already has a checkpoint (use a new leasePrefix, or delete the leases, to start over)', String(start));
  }
  const polls = new PollSchedule(ctx.scheduler, ctx, owned.partition.id);
  const emitBatch = (batch: ChangeBatch<T>) => {
    polls.emitted();
    emit(batch);
  };
  // Every read is given up after `unreadableTimeoutMs` if the source never answers (a hung connection).
  const deadline = new ReadDeadline(ctx.scheduler, ctx.unreadableTimeoutMs, signal);
  const partition = owned.partition;
  const what = `partition ${partition.id}`;
  try {
    return await readPages();
  } finally {
    deadline.dispose();
  }

  async function readPages(): Promise<LoopEnd> {
    /** The last read found changes: the next one continues a busy partition (see {@link ReadLimiter}). */
    let busy = false;
    // The first page, when it was read beside the write that made this lease ours (FirstPages): holding its
    // own read slot, run under this reader's credit and deadline like a read of its own.
    const firstFrom = from === 'beginning' ? null : typeof from === 'object' && !(from instanceof Date) ? from.position : undefined;
    let early = firstFrom !== undefined ? ctx.firstPages?.take(owned.lease.id, owned.epoch, firstFrom) : undefined;
    while (!signal.aborted) {
      // Most reads find credit at once; only wait (a promise and a tick) when there is none.
      const credit = tracker.tryCredit() || (await tracker.awaitCredit(signal));
      if (signal.aborted) {
        tracker.settle(0);
        break;
      }
      // A read waits for a slot among the processor's reads in flight (a read that continues a partition with
      // changes goes before waiting polls); the wait is not the read's, so it is outside its deadline.
      const read = early;
      early = undefined;
      const reads = read ? undefined : ctx.reads;
      if (reads && !reads.tryAcquire() && !(await reads.acquire(busy, signal))) {
        tracker.settle(0);
        break;
      }
      let page: Page<T>;
      const startedAt = ctx.scheduler.now();
      try {
        const position = from;
        page = await deadline.run((attempt) => (read ? read(attempt) : ctx.source.read({ partition, from: position, maxItemCount: credit, signal: attempt })), what);
        reads?.release();
      } catch (error) {
        reads?.release();
        tracker.settle(0);
        tracker.telemetry?.read(ctx.scheduler.now() - startedAt, undefined, error instanceof Error ? error : new Error(String(error)));
        if (signal.aborted) break;
        if (error instanceof PartitionGoneError) return { kind: 'gone' };
        if (isFatal(error)) return { kind: 'fatal', error };
        const err = error instanceof Error ? error : new Error(String(error));
        const decision = failures.failed(error instanceof TransientError ? error.retryAfterMs : undefined, startedAt, isThrottled(error));
        log('read failed (%s); attempt %d, retry in %d ms', err.message, decision.attempts, decision.delayMs);
        tracker.reportRetry(err, decision.attempts, decision.delayMs);
        if (decision.giveUp) return { kind: 'unreadable', why: `unreadable for ${ctx.unreadableTimeoutMs} ms (${decision.attempts} failed reads, last: ${err.message})` };
        // A transient error (throttling, 503, timeout) is routine until it repeats; anything else is reported
        // at once. Either way a failure that keeps repeating stays visible, with its count.
        if (worthReporting(decision.attempts) && (decision.attempts >= 3 || !(error instanceof TransientError))) {
          tracker.reportError(err, decision.attempts);
        }
        await sleep(decision.delayMs, ctx.scheduler, signal);
        continue;
      }
      if (signal.aborted) {
        // Ownership ended or a drain began while the page was on its way: leave it to the next reader.
        tracker.settle(0);
        break;
      }
      busy = page.changes.length > 0;
      // A page larger than its credit (a transaction is never split) that the budget cannot hold now: read
      // it again from the same position once it fits.
      if (!tracker.settle(page.changes.length)) continue;
      tracker.telemetry?.read(ctx.scheduler.now() - startedAt, page);
      ctx.health?.read(owned.leaseToken);
      const rate = meter.add(page.changes.length, ctx.scheduler.now());
      if (rate !== undefined) owned.reportLoad?.(rate);
      failures.succeeded();
      const moved = page.position !== lastPosition;
      // Unmoved (an idle poll), `from` already names this position: the next read reuses it.
      if (moved) from = { position: page.position };
      lastPosition = page.position;
      if (!pinned) {
        pinned = true;
        if (page.changes.length === 0) await tracker.checkpoint(page.position).catch((error: unknown) => tracker.reportError(error as Error));
      }
      if (page.changes.length > 0 || moved) emitBatch(tracker.batch(page));
      // An idle batch keeps the position, so checkpointing it moves nothing.
      const position = page.position;
      const idle = ctx.maxWaitTimeMs === undefined ? undefined : () => emitBatch(tracker.batch({ changes: [], position }));
      await polls.afterRead(page.changes.length, credit, signal, idle);
    }
    return { kind: 'stopped' };
  }
}

/**
 * Whether the source answers "gone" for `owned`'s partition now: a read from `'now'` (one that a gone
 * partition cannot answer, even from a source that still answers a gone partition's remaining changes from a
 * position; bounded like every read). Only that answer counts, as for the reader's own reads: a listing may
 * lag a split or merge either way (a live merged child missing from it), and a failed or timed-out read
 * counts as not gone (the halt stands; the next owner asks again).
 */
async function goneNow<T>(owned: OwnedLease, ctx: ReaderContext<T>): Promise<boolean> {
  if (owned.signal.aborted) return false;
  const deadline = new ReadDeadline(ctx.scheduler, ctx.unreadableTimeoutMs, owned.signal);
  try {
    await deadline.run((signal) => ctx.source.read({ partition: owned.partition, from: 'now', maxItemCount: 1, signal }), `partition ${owned.leaseToken}`);
    return false;
  } catch (error) {
    return error instanceof PartitionGoneError && !owned.signal.aborted;
  } finally {
    deadline.dispose();
  }
}

/**
 * The partition reader: reads one owned lease's partition from its checkpoint (or the configured start),
 * as an Observable of batches, under credit flow control; see {@link readLoop} for polling and retries.
 *
 * How it ends: ownership ending completes the feed (after a voluntary release's drain); a gone partition is
 * drained and handed to the coordinator (`partitionGone`, which creates the children); a partition that
 * stays unreadable past `unreadableTimeoutMs` has its lease given up (closes with `Error`, another host
 * takes it); a gone resource, rejected credentials or a lease of the other feed mode fail the feed and stop
 * the processor. Unsubscribing aborts the read in flight and returns the credit of every batch out.
 *
 * @internal
 */
export function readPartition<T>(owned: OwnedLease, ctx: ReaderContext<T>): PartitionFeed<T> {
  const state: { closeReason: CloseReason | undefined } = { closeReason: undefined };
  // The feed's signal (a handler's `context.signal`): the ownership's, and aborted when what is still out is handed
  // over to the leases replacing this one (LeaseTracker.handOver), as the batches' own signal is. A link (no
  // `AbortSignal.any` per lease), whose signal is made only if asked for.
  const feedAbort = new LinkedAbort([owned.signal]);
  return new ReaderFeed<T>(owned, state, feedAbort, (subscriber) => {
    const log = logger('partition', { owner: ctx.owner, lease: owned.leaseToken });
    if (owned.signal.aborted) {
      state.closeReason = owned.closeReason ?? 'Shutdown';
      subscriber.complete();
      return;
    }
    const tracker = new LeaseTracker(owned, ctx, log, feedAbort);
    const reading = new AbortController();
    /** Aborted when the subscriber leaves. */
    const detached = new LinkedAbort();
    const stopReading = () => reading.abort();
    owned.signal.addEventListener('abort', stopReading, { once: true });
    tracker.onHalt = (error) => {
      // Stop here: checkpoint what was acknowledged before the halting batch, then give the lease back. A
      // partition that is gone (split or merged; a source may still answer what it held, so the halted reader
      // never reads to its end) is handed to its children instead, from that checkpoint, as a read answering
      // "gone" would have it: only the child holding the failing change halts, and the rest of its range goes
      // on. Given back, a gone parent would be retaken and halt again forever, holding up its whole range.
      stopReading();
      void tracker
        .flush()
        .then(() => goneNow(owned, ctx))
        .then(
          (gone) => {
            if (!gone) return owned.release(`halted by a failure policy: ${error.message}`, 'Halted');
            tracker.handOver('PartitionGone');
            return owned.partitionGone(tracker.ackedPosition);
          },
          () => owned.release(`halted by a failure policy: ${error.message}`, 'Halted'),
        )
        .catch((failure: unknown) => tracker.reportError(failure as Error));
    };
    tracker.onFatal = (error) => {
      // The pipeline fails right after: checkpoint what was acknowledged, and say why the lease was let go.
      stopReading();
      void tracker.flush().finally(() => owned.release(`the pipeline failed: ${error.message}`, 'Error'));
    };
    owned.onDrain(async () => {
      log('draining');
      stopReading();
      await tracker.drain(ctx.drainTimeoutMs);
    });

    const close = (reason: CloseReason) => {
      state.closeReason = reason;
      log('closed (%s)', reason);
      tracker.close(false);
      subscriber.complete();
    };
    const fail = (error: Error) => {
      state.closeReason = fatalCloseReason(error) ?? 'Error';
      log('stopping: %s', error.message);
      tracker.reportError(error);
      tracker.close(false);
      subscriber.error(error);
      ctx.fatal(error);
    };

    const run = async () => {
      const mismatch = modeMismatch(owned, ctx.source as Source<unknown>);
      if (mismatch) return fail(mismatch);
      // Each batch is emitted with its span active, so synchronous downstream work nests under it.
      const emit = tracker.telemetry
        ? (batch: ChangeBatch<T>) => tracker.activate(batch.origin!.sequence, () => subscriber.next(batch))
        : (batch: ChangeBatch<T>) => subscriber.next(batch);
      const end = await readLoop(owned, ctx, tracker, reading.signal, log, emit);
      if (tracker.unsubscribed) return;
      switch (end.kind) {
        case 'fatal':
          return fail(end.error);
        case 'gone': {
          log('partition gone; waiting for acknowledgements, then handing over to its children');
          await tracker.drain(ctx.drainTimeoutMs);
          // What did not reach the checkpoint is the children's to read again: nothing more of it may be written
          // or published from here (a relay's round sent once a child's owner published later changes would
          // put a document's changes out of order at the broker: the simulation's broker-key-order, seed 1722).
          tracker.handOver('PartitionGone');
          // The coordinator retries the replacement, or gives the lease back if it cannot; errors are its events.
          await owned.partitionGone(tracker.ackedPosition);
          return close(owned.closeReason ?? 'PartitionGone');
        }
        case 'unreadable':
          // A host never holds a lease it does not read: let another host (another client) try.
          log('giving the lease up: %s', end.why);
          owned.release(`partition ${owned.leaseToken} ${end.why}`);
          return close(owned.closeReason ?? 'Error');
        case 'stopped':
          // Ownership ended, or a drain began (then ownership ends once it is done).
          await aborted(new LinkedAbort([owned.signal, detached]).signal);
          if (!tracker.unsubscribed) close(owned.closeReason ?? 'Shutdown');
      }
    };

    run().catch((error: unknown) => {
      tracker.close(false);
      subscriber.error(error);
    });

    return () => {
      owned.signal.removeEventListener('abort', stopReading);
      stopReading();
      // Whether closed or unsubscribed: nothing of this ownership is read any more; batches still downstream
      // may be acknowledged (no-ops), and their credit is returned now.
      tracker.close(state.closeReason === undefined);
      detached.abort();
    };
  });
}

/**
 * The Observable of one reader with the lease's details: one class, so a host with a thousand leases holds a
 * thousand objects of one shape (not an object with its own properties and getters each).
 */
class ReaderFeed<T> extends Observable<ChangeBatch<T>> implements PartitionFeed<T> {
  readonly leaseToken: string;
  readonly epoch: number;
  readonly partition: Partition;
  readonly #abort: LinkedAbort;
  readonly #state: { readonly closeReason: CloseReason | undefined };

  constructor(owned: OwnedLease, state: { readonly closeReason: CloseReason | undefined }, abort: LinkedAbort, subscribe: (subscriber: Subscriber<ChangeBatch<T>>) => TeardownLogic) {
    super(subscribe);
    this.leaseToken = owned.leaseToken;
    this.epoch = owned.epoch;
    this.partition = owned.partition;
    this.#abort = abort;
    this.#state = state;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get closeReason(): CloseReason | undefined {
    return this.#state.closeReason;
  }
}
