import { Observable, type SchedulerLike, type Subscription } from 'rxjs';
import { ChangeBatch } from '../core/ChangeBatch.js';
import type { CloseReason, FeedEvent } from '../core/events.js';
import type { Partition, Position, StartFrom } from '../core/Partition.js';
import type { PartitionTracker } from '../core/PartitionTracker.js';
import {
  CredentialsError,
  InvalidOptionsError,
  HandlerError,
  LeaseLostError,
  PartitionGoneError,
  ResourceGoneError,
  TransientError,
} from '../errors/index.js';
import { logger, type Logger } from '../internal/log.js';
import type { OwnedLease } from '../leases/LeaseCoordinator.js';
import type { Page, Source } from '../sources/Source.js';
import type { CreditAccount, CreditPool } from './CreditPool.js';
import { aborted, sleep } from './wait.js';

/**
 * The batches of one owned lease: an Observable of {@link ChangeBatch} that completes when ownership ends.
 * Subscribe to it once.
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
  /** Why the feed closed; `undefined` while it runs. */
  readonly closeReason: CloseReason | undefined;
};

/** @internal What a partition reader needs from its processor. */
export interface ReaderContext<T> {
  readonly source: Source<T>;
  readonly owner: string;
  readonly startFrom: StartFrom;
  /** True when the user chose `startFrom` (so ignoring it for a checkpointed lease deserves a warning). */
  readonly startFromGiven?: boolean;
  readonly maxItemCount: number;
  readonly pollIntervalMs: number;
  readonly stallTimeoutMs: number;
  readonly drainTimeoutMs: number;
  readonly scheduler: SchedulerLike;
  readonly pool: CreditPool;
  /** Publishes a feed event. */
  readonly emit: (event: FeedEvent) => void;
  /** In-flight checkpoint writes, so `stop()` can await them. */
  readonly writes: Set<Promise<unknown>>;
  /** A failure that must stop the whole processor (resource gone, credentials). */
  readonly fatal: (error: Error) => void;
}

/** First retry delay without a retry-after, in ms; doubles per failure up to {@link MAX_BACKOFF_MS}. */
const BASE_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 10_000;

/** @internal Delay before retry number `failures` (1-based) of a read that failed without retry-after. */
export function backoffMs(failures: number): number {
  return Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** Math.min(failures - 1, 20));
}

interface Outstanding {
  readonly sequence: number;
  readonly count: number;
}

/**
 * The reader's side of one partition: hands out sequence numbers and credit, takes acknowledgements from
 * `checkpointEvery`, and serialises checkpoint writes through the lease.
 *
 * @internal
 */
export class LeaseTracker implements PartitionTracker {
  readonly leaseToken: string;
  /** Set when the subscriber went away: nothing will acknowledge the batches it held. */
  unsubscribed = false;

  readonly #owned: OwnedLease;
  readonly #ctx: ReaderContext<unknown>;
  readonly #account: CreditAccount;
  readonly #log: Logger;
  readonly #outstanding: Outstanding[] = [];
  #head = 0;
  #sequence = 0;
  /** Credit taken for the read in flight (reads run concurrently across partitions, so reserve first). */
  #reserved = 0;
  #ackedSequence = 0;
  #ackedPosition: Position | null;
  #ackedChanges = 0;
  #checkpointedChanges = 0;
  #written: Position | null;
  #requested: Position | null = null;
  #chain: Promise<void> = Promise.resolve();
  readonly #ackListeners = new Set<() => void>();
  #creditWait: { since: number; reported: boolean; task: Subscription | undefined } | undefined;

  /** Aborted when ownership ended, or when a sink saw a newer owner's write (see {@link LeaseTracker.drop}). */
  readonly signal: AbortSignal;
  readonly #fenced = new AbortController();
  readonly #dropped = new Set<number>();

  constructor(owned: OwnedLease, ctx: ReaderContext<unknown>, log: Logger) {
    this.leaseToken = owned.leaseToken;
    this.signal = AbortSignal.any([owned.signal, this.#fenced.signal]);
    this.#owned = owned;
    this.#ctx = ctx;
    this.#log = log;
    this.#account = ctx.pool.open();
    this.#ackedPosition = owned.lease.continuation;
    this.#written = owned.lease.continuation;
  }

  /** Changes read and not yet acknowledged. */
  get held(): number {
    return this.#account.held;
  }

  /** Position of the last acknowledged batch (or the lease's checkpoint). */
  get ackedPosition(): Position | null {
    return this.#ackedPosition;
  }

  /**
   * Ends the reservation made by {@link LeaseTracker.awaitCredit}: `count` changes were read (they stay
   * held until acknowledged), the rest of the reservation is returned.
   */
  settle(count: number): void {
    const reserved = this.#reserved;
    this.#reserved = 0;
    if (count > reserved) this.#account.take(count - reserved);
    else this.#account.release(reserved - count);
  }

  /** Wraps a page as the next batch of this partition (its credit was settled already). */
  batch<T>(page: Page<T>): ChangeBatch<T> {
    const sequence = ++this.#sequence;
    const count = page.changes.length;
    this.#outstanding.push({ sequence, count });
    return new ChangeBatch<T>({
      partition: this.leaseToken,
      changes: page.changes,
      position: page.position,
      epoch: this.#owned.epoch,
      // The lease's own range (a merge's per-parent lease reads only part of its partition).
      range: this.#owned.lease.feedRange ?? this.#owned.partition.range,
      origin: { tracker: this, sequence, readCount: count },
    });
  }

  acknowledge(sequence: number, position: Position): void {
    if (sequence <= this.#ackedSequence) return; // a replay or a batch overtaken by a later one
    let gap = false;
    for (let s = this.#ackedSequence + 1; s < sequence && !gap; s++) gap = !this.#dropped.has(s);
    if (gap) this.#reportGap(sequence);
    let freed = 0;
    const queue = this.#outstanding;
    while (this.#head < queue.length && queue[this.#head]!.sequence <= sequence) {
      const entry = queue[this.#head++]!;
      if (!this.#dropped.delete(entry.sequence)) freed += entry.count;
    }
    if (this.#head > 1024 && this.#head * 2 > queue.length) {
      queue.splice(0, this.#head);
      this.#head = 0;
    }
    this.#ackedSequence = sequence;
    this.#ackedPosition = position;
    this.#ackedChanges += freed;
    this.#ctx.pool.lastAckAt = this.#ctx.scheduler.now();
    this.#account.release(freed);
    if (this.#ackListeners.size > 0) for (const listener of [...this.#ackListeners]) listener();
  }

  /*
   * Minimal stand-in until the reader rework: returns the dropped batch's credit without moving the
   * acknowledged position; a fencing error aborts `signal`, which stops reading (the coordinator ends the
   * ownership at its next renewal, which the newer owner's lease fences).
   */
  drop(sequence: number, error?: Error): void {
    if (error instanceof LeaseLostError) {
      this.#log('dropped batch %d: %s; reading stops', sequence, error.message);
      this.#fenced.abort(error);
    }
    if (sequence <= this.#ackedSequence || this.#dropped.has(sequence)) return;
    const entry = this.#outstanding.find((o, i) => i >= this.#head && o.sequence === sequence);
    if (!entry) return;
    this.#dropped.add(sequence);
    this.#account.release(entry.count);
    if (this.#ackListeners.size > 0) for (const listener of [...this.#ackListeners]) listener();
  }

  checkpoint(position: Position): Promise<void> {
    this.#requested = position;
    // Writes for one lease never overlap: each waits for the previous one, and writes the newest position
    // requested by then (coalescing), skipping it when already written.
    const write = this.#chain.then(() => this.#write());
    this.#chain = write.catch(() => undefined);
    this.#ctx.writes.add(write);
    const forget = () => this.#ctx.writes.delete(write);
    write.then(forget, forget);
    return write;
  }

  reportError(error: Error): void {
    this.#log('error: %s', error.message);
    this.#ctx.emit({
      type: 'error',
      owner: this.#ctx.owner,
      lease: this.leaseToken,
      error,
      ...(error instanceof HandlerError && error.change ? { change: error.change } : {}),
    });
  }

  /**
   * Reserves credit for a read if enough is available now and returns how many changes to read, else 0.
   * Every reservation ends with {@link LeaseTracker.settle}.
   */
  tryCredit(): number {
    const available = this.#account.available;
    if (available < this.#ctx.pool.minRead) return 0;
    if (this.#creditWait) this.#endCreditWait();
    const credit = Math.min(available, this.#ctx.maxItemCount);
    this.#account.take(credit);
    this.#reserved = credit;
    return credit;
  }

  /**
   * Waits until this partition may read, then reserves and returns how many changes it may read (0 when
   * aborted). Every reservation ends with {@link LeaseTracker.settle}.
   */
  async awaitCredit(signal: AbortSignal): Promise<number> {
    for (;;) {
      if (signal.aborted) return 0;
      const credit = this.tryCredit();
      if (credit > 0) return credit;
      this.#account.setWaiting(true);
      if (!this.#creditWait) {
        this.#log('read budget used up (%d held); waiting for acknowledgements', this.#account.held);
        this.#creditWait = { since: this.#ctx.scheduler.now(), reported: false, task: undefined };
        this.#armStallCheck();
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          off();
          signal.removeEventListener('abort', done);
          resolve();
        };
        const off = this.#account.onChange(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  /** Resolves when every batch read has been acknowledged, the subscriber left, or after `timeoutMs`. */
  async waitForAcks(timeoutMs: number): Promise<void> {
    if (this.#account.held === 0 && this.#settled()) return;
    const timeout = new AbortController();
    await new Promise<void>((resolve) => {
      const check = () => {
        if (this.unsubscribed || this.#settled()) {
          this.#ackListeners.delete(check);
          timeout.abort();
          resolve();
        }
      };
      this.#ackListeners.add(check);
      // Nothing may be outstanding already (only a read's credit reservation, released when it aborts).
      check();
      if (timeout.signal.aborted) return;
      void sleep(timeoutMs, this.#ctx.scheduler, timeout.signal).then(() => {
        if (!timeout.signal.aborted) this.#log('drain: %d changes still unacknowledged after %d ms', this.held, timeoutMs);
        this.#ackListeners.delete(check);
        resolve();
      });
    });
  }

  /** True when every batch read was acknowledged or dropped. */
  #settled(): boolean {
    for (let i = this.#head; i < this.#outstanding.length; i++) if (!this.#dropped.has(this.#outstanding[i]!.sequence)) return false;
    return true;
  }

  /** Wakes drain waits after the subscriber left. */
  detach(): void {
    this.unsubscribed = true;
    for (const listener of [...this.#ackListeners]) listener();
    this.#endCreditWait();
    this.#account.close();
  }

  /** Writes the last acknowledged position if it is not written yet, and waits for every write. */
  async flush(): Promise<void> {
    if (this.#ackedPosition !== null && this.#ackedPosition !== this.#written) {
      await this.checkpoint(this.#ackedPosition).catch((error: unknown) => this.reportError(error as Error));
    }
    await this.#chain;
  }

  /** Returns the credit of batches nobody will acknowledge any more (the pipeline is gone). */
  releaseAll(): void {
    this.#account.release(this.#account.held);
  }

  async #write(): Promise<void> {
    const position = this.#requested;
    if (position === null || position === this.#written) return;
    const changes = this.#ackedChanges;
    await this.#owned.checkpoint(position);
    this.#written = position;
    this.#log('checkpoint %s', position);
    this.#ctx.emit({
      type: 'checkpoint',
      owner: this.#ctx.owner,
      lease: this.leaseToken,
      position,
      changes: changes - this.#checkpointedChanges,
    });
    this.#checkpointedChanges = changes;
  }

  #reportGap(sequence: number): void {
    const first = this.#ackedSequence + 1;
    const range = first === sequence - 1 ? `batch ${first}` : `batches ${first}..${sequence - 1}`;
    const message =
      `partition ${this.leaseToken}: ${range} never reached checkpointEvery (batch ${sequence} did): an operator ` +
      'dropped or reordered them. Filter inside batches (filterChanges, batch.filter) instead of dropping ' +
      'batches, and keep each partition in order (concatMap, not mergeMap). Their credit has been returned.';
    this.#log(message);
    this.#ctx.emit({ type: 'stall', owner: this.#ctx.owner, lease: this.leaseToken, message });
  }

  /**
   * While waiting for credit, reports a stall once nothing at all (no partition) has reached the checkpoint
   * for `stallTimeoutMs`; acknowledgements anywhere postpone it, since they show the pipeline moving.
   */
  #armStallCheck(): void {
    const wait = this.#creditWait;
    if (!wait) return;
    wait.task?.unsubscribe();
    const { scheduler, stallTimeoutMs, pool } = this.#ctx;
    const quietSince = Math.max(wait.since, pool.lastAckAt);
    const dueIn = Math.max(0, quietSince + stallTimeoutMs - scheduler.now());
    wait.task = scheduler.schedule(() => {
      wait.task = undefined;
      if (this.#creditWait !== wait || wait.reported) return;
      if (scheduler.now() - Math.max(wait.since, pool.lastAckAt) < stallTimeoutMs) return this.#armStallCheck();
      wait.reported = true;
      const seconds = Math.round(stallTimeoutMs / 1000);
      const message =
        `partition ${this.leaseToken}: reading paused for ${seconds} s: ${pool.inFlight} changes read have ` +
        `not reached checkpointEvery and the read budget is used up (maxInFlightChanges=${pool.total}, ` +
        `${this.#account.held} held by this partition). End the pipeline with checkpointEvery(), never drop ` +
        'batches, and make maxInFlightChanges larger than the largest buffer (bufferCount/bufferTime).';
      this.#log(message);
      this.#ctx.emit({ type: 'stall', owner: this.#ctx.owner, lease: this.leaseToken, message });
    }, dueIn);
  }

  #endCreditWait(): void {
    this.#account.setWaiting(false);
    this.#creditWait?.task?.unsubscribe();
    this.#creditWait = undefined;
  }
}

function closeReasonOf(error: unknown): CloseReason {
  return error instanceof CredentialsError ? 'Unauthorized' : 'ResourceGone';
}

/**
 * The partition reader: reads one owned lease's partition from its checkpoint (or the configured start),
 * as an Observable of batches, under credit flow control.
 *
 * Adaptive polling: a full page is followed by another read at once; a partial or empty page by a wait of
 * `pollIntervalMs`. An empty batch is emitted only when the position moved (e.g. the first `'now'` read),
 * so it can be checkpointed. Transient errors are retried after their retry-after or with capped exponential
 * backoff; unknown errors too, with an `error` event. Ownership ending completes the feed; a gone partition
 * is handed to the coordinator (`partitionGone`); a gone resource or rejected credentials fail it.
 * Unsubscribing aborts the read in flight.
 *
 * @internal
 */
export function readPartition<T>(owned: OwnedLease, ctx: ReaderContext<T>): PartitionFeed<T> {
  let closeReason: CloseReason | undefined;
  const feed = new Observable<ChangeBatch<T>>((subscriber) => {
    const log = logger('partition', { owner: ctx.owner, lease: owned.leaseToken });
    const tracker = new LeaseTracker(owned, ctx as ReaderContext<unknown>, log);
    const reading = new AbortController();
    /** Aborted when the subscriber leaves. */
    const detached = new AbortController();
    const stopReading = () => reading.abort();
    tracker.signal.addEventListener('abort', stopReading, { once: true });
    owned.onDrain(async () => {
      log('draining');
      stopReading();
      if (!tracker.unsubscribed) await tracker.waitForAcks(ctx.drainTimeoutMs);
      await tracker.flush();
    });

    const close = (reason: CloseReason) => {
      closeReason = reason;
      log('closed (%s)', reason);
      subscriber.complete();
    };

    const run = async () => {
      const signal = reading.signal;
      const stored = owned.lease.continuation;
      let from: StartFrom = stored !== null ? { position: stored } : ctx.startFrom;
      let lastPosition: Position | null = stored;
      let pinned = stored !== null || ctx.startFrom !== 'now';
      let failures = 0;
      log('reading %s from %s', owned.partition.id, stored ?? String(ctx.startFrom));
      if (stored !== null && ctx.startFromGiven) {
        log('startFrom %s is ignored: the lease already has a checkpoint (use a new leasePrefix, or delete the leases, to start over)', String(ctx.startFrom));
      }
      const leaseMode = owned.lease.mode;
      if (leaseMode !== undefined && leaseMode !== ctx.source.mode) {
        // Positions of one mode mean nothing to the other; .NET refuses the switch too.
        const error = new InvalidOptionsError(
          'mode',
          `lease ${owned.leaseToken} was created for ${leaseMode} but the source reads ${ctx.source.mode}; ` +
            'use a new leasePrefix for the other mode (or delete these leases)',
        );
        closeReason = 'Error';
        tracker.reportError(error);
        subscriber.error(error);
        ctx.fatal(error);
        return;
      }
      while (!signal.aborted) {
        // Most reads find credit at once; only wait (a promise and a tick) when there is none.
        const credit = tracker.tryCredit() || (await tracker.awaitCredit(signal));
        if (signal.aborted) {
          tracker.settle(0);
          break;
        }
        let page: Page<T>;
        try {
          page = await ctx.source.read({ partition: owned.partition, from, maxItemCount: credit, signal });
        } catch (error) {
          tracker.settle(0);
          if (signal.aborted) break;
          if (error instanceof PartitionGoneError) {
            log('partition gone; waiting for acknowledgements, then handing over to its children');
            await tracker.waitForAcks(ctx.drainTimeoutMs);
            await tracker.flush();
            try {
              await owned.partitionGone(tracker.ackedPosition);
            } catch (goneError) {
              tracker.reportError(goneError as Error);
            }
            return close('PartitionGone');
          }
          if (error instanceof ResourceGoneError || error instanceof CredentialsError) {
            closeReason = closeReasonOf(error);
            log('stopping: %s', error.message);
            tracker.reportError(error);
            subscriber.error(error);
            ctx.fatal(error);
            return;
          }
          failures++;
          const transient = error instanceof TransientError;
          const delay = transient && error.retryAfterMs !== undefined ? error.retryAfterMs : backoffMs(failures);
          log('read failed (%s); retry %d in %d ms', (error as Error)?.message ?? String(error), failures, delay);
          if (!transient) tracker.reportError(error instanceof Error ? error : new Error(String(error)));
          await sleep(delay, ctx.scheduler, signal);
          continue;
        }
        if (signal.aborted) {
          // Ownership ended or a drain began while the page was on its way: leave it to the next reader.
          tracker.settle(0);
          break;
        }
        tracker.settle(page.changes.length);
        failures = 0;
        const moved = page.position !== lastPosition;
        from = { position: page.position };
        lastPosition = page.position;
        if (!pinned) {
          // Pin "now" at once: a host taking the lease over before the first checkpoint would otherwise
          // start from its own, later "now" and skip what was written in between.
          pinned = true;
          if (page.changes.length === 0) {
            await tracker.checkpoint(page.position).catch((error: unknown) => tracker.reportError(error as Error));
          }
        }
        if (page.changes.length > 0 || moved) subscriber.next(tracker.batch(page));
        if (page.changes.length < credit) await sleep(ctx.pollIntervalMs, ctx.scheduler, signal);
      }
      if (tracker.unsubscribed) return;
      // Reading stopped because ownership ended or a drain began; complete once ownership has ended.
      await aborted(AbortSignal.any([owned.signal, detached.signal]));
      if (!tracker.unsubscribed) close(owned.closeReason ?? 'Shutdown');
    };

    run().catch((error: unknown) => subscriber.error(error));

    return () => {
      tracker.signal.removeEventListener('abort', stopReading);
      stopReading();
      // Unsubscribed by the pipeline (no close reason): nothing downstream will acknowledge what it held.
      // Closed by ownership ending: batches still downstream may yet be acknowledged and keep their credit.
      if (closeReason === undefined) tracker.releaseAll();
      tracker.detach();
      detached.abort();
    };
  });
  return Object.defineProperties(feed, {
    leaseToken: { value: owned.leaseToken, enumerable: true },
    epoch: { value: owned.epoch, enumerable: true },
    partition: { value: owned.partition, enumerable: true },
    closeReason: { get: () => closeReason, enumerable: true },
  }) as PartitionFeed<T>;
}
