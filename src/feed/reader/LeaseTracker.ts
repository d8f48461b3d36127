import type { SchedulerLike } from 'rxjs';
import { ChangeBatch } from '../../core/ChangeBatch.js';
import { errorEvent } from '../../errors/errorEvent.js';
import type { CloseReason, FeedEvent } from '../../core/events.js';
import { readFailureKind } from '../../errors/classify.js';
import type { Position } from '../../core/Partition.js';
import type { PartitionTracker } from '../../core/PartitionTracker.js';
import { LeaseLostError } from '../../errors/index.js';
import type { Logger } from '../../internal/log.js';
import type { OwnedLease } from '../../leases/LeaseCoordinator.js';
import type { Page } from '../../sources/Source.js';
import type { CreditAccount, CreditPool } from '../CreditPool.js';
import { LinkedAbort } from '../../internal/linkedAbort.js';
import { sleep } from '../../internal/wait.js';
import { AckLedger } from './AckLedger.js';
import { CheckpointWriter } from './CheckpointWriter.js';
import { StallMonitor } from './StallMonitor.js';
import type { FeedTelemetry } from '../../telemetry/FeedTelemetry.js';
import type { PartitionTelemetry } from '../../telemetry/PartitionTelemetry.js';

/** What waiting for the writes of a tracker that never wrote is. */
const SETTLED: Promise<void> = Promise.resolve();

/** @internal What a {@link LeaseTracker} needs from its processor. */
export interface TrackerContext {
  readonly owner: string;
  readonly maxItemCount: number;
  readonly stallTimeoutMs: number;
  readonly scheduler: SchedulerLike;
  readonly pool: CreditPool;
  readonly emit: (event: FeedEvent) => void;
  /** In-flight checkpoint writes, so `stop()` can await them. */
  readonly writes: Set<Promise<unknown>>;
  /** OpenTelemetry spans and metrics, when on. */
  readonly telemetry?: FeedTelemetry | undefined;
}

/**
 * One ownership's side of the pipeline: wraps pages as batches, takes acknowledgements and drops back from
 * the pipeline ({@link PartitionTracker}), and ties together the read credit, the ack ledger, the
 * checkpoint writer and the stall monitor.
 *
 * @internal
 */
export class LeaseTracker implements PartitionTracker {
  readonly leaseToken: string;
  /** Set when the subscriber went away: nothing will acknowledge the batches it held. */
  unsubscribed = false;
  /** Called once when user code halts the partition ({@link LeaseTracker.halt}); set by the reader. */
  onHalt: ((error: Error) => void) | undefined;
  /** Called once when the pipeline is about to fail for good ({@link LeaseTracker.fatal}); set by the reader. */
  onFatal: ((error: Error) => void) | undefined;

  readonly #owned: OwnedLease;
  readonly #ctx: TrackerContext;
  readonly #log: Logger;
  readonly #account: CreditAccount;
  readonly #ledger: AckLedger;
  /** Made at the first checkpoint (an idle lease that never moves writes none). */
  #writer: CheckpointWriter | undefined;
  /** Made at the first batch (an idle lease that never moves reads none); stopped with the tracker. */
  #stall: StallMonitor | undefined;
  #stallStopped = false;
  /** Credit taken for the read in flight (reads run concurrently across partitions, so reserve first). */
  #reserved = 0;
  #waitingForCredit = false;
  /** Set when user code halts the partition (or the pipeline fails for good): `signal` aborts then. */
  #halting = false;
  /**
   * Aborted when the batches still out are handed over to the next owners ({@link LeaseTracker.handOver}), or when the
   * ownership ends: the reader feed's signal (its link over the ownership's).
   */
  readonly #handover: LinkedAbort;
  /** `signal`: the handover's (so the ownership's too), or a halt's. */
  readonly #link: LinkedAbort;
  /** Sequence of the batch that halted the partition: nothing from it on is acknowledged. */
  #haltedAt = Infinity;
  /** When a batch of this ownership last left the pipeline (acknowledged or dropped; scheduler time). */
  #lastProgressAt = Number.NEGATIVE_INFINITY;
  /** This ownership's spans and metrics, when telemetry is on. */
  readonly telemetry: PartitionTelemetry | undefined;

  /**
   * `feed`: the reader feed's signal (a handler's `context.signal`), a link over the ownership's that
   * {@link LeaseTracker.handOver} aborts; default: one of the tracker's own.
   */
  constructor(owned: OwnedLease, ctx: TrackerContext, log: Logger, feed: LinkedAbort = new LinkedAbort([owned.signal])) {
    this.leaseToken = owned.leaseToken;
    this.#handover = feed;
    this.#link = new LinkedAbort([feed]);
    this.#owned = owned;
    this.#ctx = ctx;
    this.#log = log;
    this.telemetry = ctx.telemetry?.partition(owned.leaseToken);
    this.#account = ctx.pool.open();
    this.#ledger = new AckLedger(this.#account, owned.lease.continuation);
  }

  #stallMonitor(): StallMonitor {
    if (this.#stall) return this.#stall;
    const ctx = this.#ctx;
    const stall = new StallMonitor(ctx.scheduler, ctx.stallTimeoutMs, {
      pending: () => this.#ledger.pending,
      oldestReadAt: () => this.#ledger.oldestReadAt,
      lastProgressAt: () => this.#lastProgressAt,
      describe: (since) => this.#describeStall(since),
      report: (message) => {
        this.#log(message);
        ctx.emit({ type: 'stall', owner: ctx.owner, lease: this.leaseToken, message });
      },
    });
    if (this.#stallStopped) stall.stop();
    return (this.#stall = stall);
  }

  #checkpointWriter(): CheckpointWriter {
    const ctx = this.#ctx;
    return (this.#writer ??= new CheckpointWriter(this.#owned, ctx.writes, ctx.emit, ctx.owner, this.#log, () => this.#ledger.ackedChanges));
  }

  /**
   * Aborted when this ownership ends (lost, released, handed over, shutdown), its batches are handed over
   * ({@link LeaseTracker.handOver}), or user code halts the partition ({@link LeaseTracker.halt}, {@link LeaseTracker.fatal}).
   */
  get signal(): AbortSignal {
    return this.#link.signal;
  }

  /** Changes read and not yet acknowledged. */
  get held(): number {
    return this.#account.held;
  }

  /** Position of the last acknowledged batch (or the lease's checkpoint). */
  get ackedPosition(): Position | null {
    return this.#ledger.ackedPosition;
  }

  // ---- credit ------------------------------------------------------------------------------------------

  /**
   * Reserves credit for a read if enough is available now and returns how many changes to read, else 0.
   * Every reservation ends with {@link LeaseTracker.settle}.
   */
  tryCredit(): number {
    const credit = this.#account.tryTake(this.#ctx.maxItemCount);
    this.#reserved = credit;
    return credit;
  }

  /**
   * Waits until this partition may read, then reserves credit as {@link LeaseTracker.tryCredit} (0 when
   * aborted). Waiting partitions are served in turn as credit comes back (see {@link CreditPool}).
   */
  async awaitCredit(signal: AbortSignal): Promise<number> {
    const now = this.tryCredit();
    if (now > 0 || signal.aborted) return now;
    this.#log('read budget used up (%d held); waiting for acknowledgements', this.#account.held);
    this.#waitingForCredit = true;
    try {
      const credit = await this.#account.acquire(this.#ctx.maxItemCount, signal);
      this.#reserved = credit;
      return credit;
    } finally {
      this.#waitingForCredit = false;
    }
  }

  /**
   * Ends the reservation: `count` changes were read (held until acknowledged), the rest is returned.
   * A page larger than the reservation (a source never splits a transaction) is kept when the free credit
   * covers the excess, or when it is larger than the whole budget (it could never fit); otherwise it is not
   * kept: returns `false`, the credit is returned, and the next reservation waits until the whole page fits
   * (read it again then), so the budget is never exceeded.
   */
  settle(count: number): boolean {
    const reserved = this.#reserved;
    this.#reserved = 0;
    if (count <= reserved) {
      this.#account.release(reserved - count);
      return true;
    }
    const pool = this.#ctx.pool;
    if (count - reserved <= pool.free || count > pool.total) {
      this.#account.take(count - reserved);
      return true;
    }
    this.#account.need(count); // first: the credit returned now is kept for this page, not handed to others
    this.#account.release(reserved);
    this.#log('a page of %d changes came back for %d credit; reading it again once it fits the budget', count, reserved);
    return false;
  }

  // ---- batches -----------------------------------------------------------------------------------------

  /** Wraps a page as the next batch of this ownership (its credit was settled already). */
  batch<T>(page: Page<T>): ChangeBatch<T> {
    const count = page.changes.length;
    const sequence = this.#ledger.record(count, this.#ctx.scheduler.now());
    this.#stallMonitor().read();
    // Every property of the init, in the order `withChanges` gives them: one shape of init for the constructor.
    const batch = new ChangeBatch<T>({
      partition: this.leaseToken,
      changes: page.changes,
      position: page.position,
      epoch: this.#owned.epoch,
      readLsn: undefined,
      // The lease's own range (a merge's per-parent lease reads only part of its partition).
      range: this.#owned.lease.feedRange ?? this.#owned.partition.range,
      origin: { tracker: this, sequence, readCount: count },
      requestCharge: page.requestCharge,
    });
    this.telemetry?.emitted(sequence, batch);
    return batch;
  }

  /** The processor's clock (the waits of operators retrying this ownership's batches run on it). */
  get scheduler(): SchedulerLike {
    return this.#ctx.scheduler;
  }

  /** Runs `fn` with the span of batch `sequence` active (telemetry on), else just runs it. */
  activate<R>(sequence: number, fn: () => R): R {
    return this.telemetry ? this.telemetry.activate(sequence, fn) : fn();
  }

  acknowledge(sequence: number, position: Position): void {
    if (sequence >= this.#haltedAt) {
      this.#ledger.drop(sequence);
      return;
    }
    const done = this.#ledger.acknowledge(sequence, position);
    if (!done) return; // a replay, or a batch overtaken by a later one
    this.telemetry?.acknowledged(sequence);
    this.#progressed();
    if (done.skipped) this.#reportSkipped(done.skipped, sequence);
  }

  drop(sequence: number, error?: Error): void {
    this.#ledger.drop(sequence);
    this.telemetry?.dropped(sequence, error);
    this.#progressed();
    if (error instanceof LeaseLostError) this.#owned.lose(`a write for batch ${sequence} was fenced: ${error.message}`);
  }

  /** The pipeline ends with `error` (a sink refusing for good): stop reading and give the lease back with `Error`. */
  fatal(error: Error): void {
    if (this.#halting) return;
    this.#log('the pipeline failed for good: %s', error.message);
    this.#halting = true;
    this.#link.abort(error);
    this.onFatal?.(error);
  }

  halt(sequence: number, error: Error): void {
    this.#ledger.drop(sequence);
    this.telemetry?.dropped(sequence, error);
    if (this.#haltedAt !== Infinity) return;
    this.#haltedAt = sequence;
    this.#log('halted at batch %d: %s', sequence, error.message);
    this.#halting = true;
    this.#link.abort(error);
    this.onHalt?.(error);
  }

  /** A batch left the pipeline (acknowledged or dropped): this partition is moving. */
  #progressed(): void {
    const now = this.#ctx.scheduler.now();
    this.#lastProgressAt = now;
    this.#ctx.pool.lastAckAt = now;
    // No monitor yet: no batch was read, so none is pending (progress would arm nothing).
    this.#stall?.progress();
  }

  /** True once user code halted the partition. */
  get halted(): boolean {
    return this.#haltedAt !== Infinity;
  }

  checkpoint(position: Position): Promise<void> {
    return this.#checkpointWriter().write(position);
  }

  /** Reports `error` as an `error` event of this lease; `attempts`: how many times in a row it happened. */
  reportError(error: Error, attempts?: number): void {
    this.#log('error: %s', error.message);
    this.#ctx.emit(errorEvent(this.#ctx.owner, error, { lease: this.leaseToken, ...(attempts !== undefined ? { attempts } : {}) }));
  }

  /** Reports changes written to the dead-letter sink (a `deadLettered` event). */
  reportDeadLettered(lsns: readonly number[], sink: string, operator: string): void {
    this.#ctx.emit({ type: 'deadLettered', owner: this.#ctx.owner, lease: this.leaseToken, lsns, sink, operator });
  }

  /** Reports one failed read that will be retried (a `readRetry` event, for metrics). */
  reportRetry(error: Error, attempts: number, delayMs: number): void {
    this.#ctx.emit({ type: 'readRetry', owner: this.#ctx.owner, lease: this.leaseToken, failure: readFailureKind(error), error: error.name, attempts, delayMs });
  }

  // ---- ending ------------------------------------------------------------------------------------------

  /**
   * Waits until every batch read was acknowledged or dropped (or the subscriber left), at most `timeoutMs`,
   * then writes the last acknowledged position. Resolves true when nothing was left outstanding. A partition
   * in a reported stall is not waited for: its batches stopped reaching the checkpoint long ago, and waiting
   * would only eat into the time left to release the lease (a Kubernetes grace period); it says so at once.
   */
  async drain(timeoutMs: number): Promise<boolean> {
    const stalled = this.#stall?.reported === true && !this.unsubscribed && this.#ledger.pending > 0;
    const settled = stalled ? false : await this.#quiet(timeoutMs);
    if (!settled) {
      const outstanding = `partition ${this.leaseToken}: ${this.#ledger.pending} batches (${this.held} changes) did not reach checkpointEvery`;
      const message =
        (stalled
          ? `${outstanding} for ${Math.round((this.#ctx.scheduler.now() - (this.#ledger.oldestReadAt ?? 0)) / 1000)} s (stalled); not waiting for them`
          : `${outstanding} within drainTimeoutMs (${timeoutMs} ms)`) +
        '; going on without them (the next owner reads them again). If the pipeline drops batches (a plain ' +
        'filter), use filterChanges instead.';
      this.#log(message);
      this.#ctx.emit({ type: 'stall', owner: this.#ctx.owner, lease: this.leaseToken, message });
    }
    await this.flush();
    return settled;
  }

  /**
   * The batches still out are handed over to the leases that replace this one (a gone partition's children,
   * created from the stored checkpoint, read them again): `signal` and the reader feed's signal (a handler's
   * `context.signal`) abort now, before those leases exist, with
   * the `AbortError` the ownership's own end gives (`reason` is its close reason), so sinks and relays write
   * nothing more of them. The ownership itself goes on while its replacement is written.
   */
  handOver(reason: CloseReason): void {
    // The feed's signal is aborted once the ownership ended or the batches were handed over.
    if (this.#handover.aborted || this.#owned.signal.aborted) return;
    this.#log('handing the batches still out over (%s)', reason);
    this.#handover.abort(new DOMException(`ownership of lease ${this.leaseToken} ended: ${reason}`, 'AbortError'));
  }

  /** Writes the last acknowledged position if it is not written yet, and waits for every write. */
  async flush(): Promise<void> {
    const acked = this.#ledger.ackedPosition;
    // Before the first checkpoint, the lease's own is the one written.
    if (acked !== null && acked !== (this.#writer ? this.#writer.written : this.#owned.lease.continuation)) {
      await this.checkpoint(acked).catch((error: unknown) => this.reportError(error as Error));
    }
    await (this.#writer?.settled() ?? SETTLED);
  }

  /**
   * The ownership is over, or the subscriber left: returns the credit of every batch still out (their
   * acknowledgements, if any come, will be no-ops) and stops watching for stalls.
   */
  close(subscriberLeft: boolean): void {
    if (subscriberLeft) this.unsubscribed = true;
    this.telemetry?.closed(subscriberLeft ? 'unsubscribed' : 'ownership_ended');
    this.#ledger.releaseAll();
    this.#stallStopped = true;
    this.#stall?.stop();
    this.#account.close();
  }

  #quiet(timeoutMs: number): Promise<boolean> {
    const idle = () => this.unsubscribed || this.#ledger.pending === 0;
    if (idle()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timeout = new AbortController();
      const off = this.#ledger.onChange(() => {
        if (!idle()) return;
        off();
        timeout.abort();
        resolve(true);
      });
      void sleep(timeoutMs, this.#ctx.scheduler, timeout.signal).then(() => {
        if (timeout.signal.aborted) return;
        off();
        resolve(idle());
      });
    });
  }

  #reportSkipped([first, last]: readonly [number, number], sequence: number): void {
    const range = first === last ? `batch ${first}` : `batches ${first}..${last}`;
    const message =
      `partition ${this.leaseToken}: ${range} never reached checkpointEvery (batch ${sequence} did): an operator ` +
      'dropped or reordered them. Filter inside batches (filterChanges, batch.filter) instead of dropping ' +
      'batches, and keep each partition in order (concatMap, not mergeMap). Their credit has been returned.';
    this.#log(message);
    this.#ctx.emit({ type: 'stall', owner: this.#ctx.owner, lease: this.leaseToken, message });
  }

  #describeStall(since: number): string {
    const seconds = Math.round((this.#ctx.scheduler.now() - since) / 1000);
    const { pool } = this.#ctx;
    const budget = this.#waitingForCredit
      ? ` Reading it is paused: its share of the read budget is used up (maxInFlightChanges=${pool.total}, ${pool.inFlight} in flight, ${this.held} held here).`
      : '';
    // Other partitions moving while this one does not: its batches are lost or held somewhere on the way.
    const others = pool.lastAckAt > since ? ' Other partitions of this host keep reaching the checkpoint meanwhile.' : '';
    return (
      `partition ${this.leaseToken}: ${this.#ledger.pending} batches (${this.held} changes) read ${seconds} s ago or more ` +
      `have not reached checkpointEvery, and none of its batches did since.${others}${budget} End the pipeline with ` +
      'checkpointEvery(), never drop batches (use filterChanges instead of filter), keep a slow sink within ' +
      'stallTimeoutMs, and make maxInFlightChanges larger than the largest buffer (bufferCount/bufferTime).'
    );
  }
}
