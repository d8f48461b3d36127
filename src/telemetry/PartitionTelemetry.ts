// Role: the spans and per-lease metrics of one ownership (FeedTelemetry.partition makes one per owned lease).
import type { Attributes, Context, Span } from '@opentelemetry/api';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import type { Page } from '../sources/Source.js';
import type { FeedTelemetry } from './FeedTelemetry.js';

/** One batch's span, and when it was emitted. */
interface OpenBatch {
  readonly span: Span;
  /**
   * The context the span was last made active in (`undefined` until then), and the context it was built
   * on: a batch's work is activated at least twice (its emission, then the operator running the user's
   * work, usually nested in the first), and builds its context once.
   */
  context: Context | undefined;
  parent: Context | undefined;
  /**
   * Whether the span is worth making active around the batch's work: it records, or an SDK sampled it out
   * (its context still propagates, so that what the work calls is not sampled as a trace of its own). A
   * no-op tracer's span (no SDK registered) has an invalid context: nothing to activate.
   */
  readonly active: boolean;
  readonly emittedAt: number;
  /** The LSN the batch was read up to, for the lag. */
  readonly lsn: number | undefined;
}

/**
 * The spans and per-lease metrics of one ownership: a span per batch from emission to acknowledgement (or to
 * the moment it left the pipeline otherwise), read durations and charges, and the lease's lag as of its last
 * read.
 *
 * @internal
 */
export class PartitionTelemetry {
  readonly leaseToken: string;
  /** The partition's own metric attributes (`messaging.destination.partition.id` with the processor's). */
  readonly attributes: Attributes;
  /** Changes delivered to the pipeline, and request units of its reads, in all (what the counters report). */
  consumed = 0;
  readCharge = 0;
  readonly #feed: FeedTelemetry;
  /** The batch span's attributes (with the lease and the client id, which the duration histograms leave out); made with the first batch. */
  #processAttributes: Attributes | undefined;
  #readChargeAttributes: Attributes | undefined;
  /** Open spans by batch sequence, oldest first (sequences only grow); made with the first batch (an idle lease may never have one). */
  #open: Map<number, OpenBatch> | undefined;
  #latestLsn: number | undefined;
  #ackedLsn: number | undefined;

  constructor(feed: FeedTelemetry, leaseToken: string, attributes: Attributes, totals?: { consumed: number; readCharge: number }) {
    this.#feed = feed;
    this.leaseToken = leaseToken;
    this.attributes = attributes;
    this.consumed = totals?.consumed ?? 0;
    this.readCharge = totals?.readCharge ?? 0;
  }

  /** The attributes of its read charge counter (made when first asked for, then the same object). */
  get readChargeAttributes(): Attributes {
    return (this.#readChargeAttributes ??= { ...this.attributes, 'rxfeed.operation': 'read_feed' });
  }

  /** Changes after the last acknowledged one as of the last read; `undefined` until a read said. */
  get lag(): number | undefined {
    if (this.#latestLsn === undefined) return undefined;
    return Math.max(0, this.#latestLsn - (this.#ackedLsn ?? 0));
  }

  /** A read finished (`page`) or failed (`error`) after `durationMs`. */
  read(durationMs: number, page: Page<unknown> | undefined, error?: Error): void {
    const base = this.#feed.readMetricAttributes;
    const attributes = error ? { ...base, 'error.type': error.name } : base;
    this.#feed.instruments.operationDuration.record(durationMs / 1000, attributes);
    if (!page) return;
    if (page.requestCharge !== undefined) this.readCharge += page.requestCharge;
    if (page.latestLsn !== undefined) this.#latestLsn = page.latestLsn;
    const last = page.changes[page.changes.length - 1]?.lsn;
    if (last !== undefined && this.#latestLsn !== undefined && last > this.#latestLsn) this.#latestLsn = last;
  }


  /** Batch `sequence` was emitted: its span starts. */
  emitted(sequence: number, batch: ChangeBatch<unknown>): void {
    const at = this.#feed.now();
    const processAttributes = (this.#processAttributes ??= { ...this.attributes, 'messaging.operation.type': 'process', 'messaging.operation.name': 'process' });
    const span = this.#feed.startBatchSpan(batch, processAttributes, at);
    // A no-op span's context is the invalid one itself: no need to check its ids.
    const spanContext = span.spanContext();
    const api = this.#feed.api;
    const active = span.isRecording() || (spanContext !== api.INVALID_SPAN_CONTEXT && api.trace.isSpanContextValid(spanContext));
    (this.#open ??= new Map()).set(sequence, { span, context: undefined, parent: undefined, active, emittedAt: at, lsn: batch.readLsn });
    this.consumed += batch.size;
  }

  /** Runs `fn` with the span of batch `sequence` active (as is, if the span has ended). */
  activate<R>(sequence: number, fn: () => R): R {
    const open = this.#open?.get(sequence);
    // No context to switch to for a no-op tracer's span (no SDK): nothing would nest under it or propagate.
    if (!open || !open.active) return fn();
    const { context, trace } = this.#feed.api;
    const current = context.active();
    // Nested in its own activation (the operator running the user's work, inside the batch's emission).
    if (current === open.context) return fn();
    if (current !== open.parent || open.context === undefined) {
      open.parent = current;
      open.context = trace.setSpan(current, open.span);
    }
    return context.with(open.context, fn);
  }

  /** Batch `sequence` reached the checkpoint (with every batch before it): their spans end. */
  acknowledged(sequence: number): void {
    if (this.#open === undefined) return;
    for (const [s, open] of this.#open) {
      if (s > sequence) break;
      if (s === sequence && open.lsn !== undefined) this.#ackedLsn = Math.max(this.#ackedLsn ?? 0, open.lsn);
      this.#end(s, open, s === sequence ? undefined : 'skipped');
    }
  }

  /** Batch `sequence` left the pipeline without an acknowledgement (`error`: why, if it failed). */
  dropped(sequence: number, error?: Error): void {
    const open = this.#open?.get(sequence);
    if (open) this.#end(sequence, open, error?.name ?? 'dropped', error);
  }

  /** The ownership ended (`reason`): spans still open end unacknowledged. */
  closed(reason: string): void {
    if (this.#open) for (const [s, open] of this.#open) this.#end(s, open, reason);
    this.#feed.forget(this);
  }

  #end(sequence: number, open: OpenBatch, errorType: string | undefined, error?: Error): void {
    this.#open!.delete(sequence);
    const at = this.#feed.now();
    const { span } = open;
    let attributes = this.#feed.processMetricAttributes;
    if (errorType !== undefined) {
      attributes = { ...attributes, 'error.type': errorType };
      span.setAttribute('error.type', errorType);
      span.setStatus({ code: this.#feed.api.SpanStatusCode.ERROR, ...(error ? { message: error.message } : {}) });
      if (error) span.recordException(error, at);
    }
    span.end(at);
    this.#feed.instruments.processDuration.record(Math.max(0, at - open.emittedAt) / 1000, attributes);
  }
}
