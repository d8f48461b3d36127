import type { SchedulerLike } from 'rxjs';
import type { Position } from './Partition.js';

/**
 * The link from a batch back to the partition reader that produced it. Implemented by the feed engine
 * (`src/feed`); operators carry it along (ChangeBatch does that) and report item failures through it.
 * `checkpointEvery` uses it to acknowledge batches (returning read credit) and to persist positions; a sink
 * that drops a batch hands it back with `drop`, and does not write batches once `signal` is aborted.
 *
 * @internal
 */
export interface PartitionTracker {
  /** The lease token of the partition. */
  readonly leaseToken: string;
  /** The clock of the processor that read the batch: waits for its batches (retries, backoff) run on it. */
  readonly scheduler?: SchedulerLike;
  /**
   * The batch with this sequence number (and every earlier one of the partition) reached the checkpoint:
   * its work is done and its credit can be returned.
   */
  acknowledge(sequence: number, position: Position): void;
  /** Persist `position` through the lease (fenced). Resolves when written. */
  checkpoint(position: Position): Promise<void>;
  /**
   * Reports a failure of user code on this partition (an item failure such as a `HandlerError`) to the
   * processor's events stream. The feed keeps running.
   */
  reportError(error: Error, attempts?: number): void;
  /**
   * The batch with this sequence number left the pipeline without reaching the checkpoint (e.g. a sink
   * dropped it because its view write was fenced): its credit is returned, its position is never
   * checkpointed. With a fencing error (`LeaseLostError`, `ViewFencedError`) this host's ownership of the
   * lease ends too: a newer owner has written.
   */
  drop(sequence: number, error?: Error): void;
  /**
   * User code gave up on the batch with this sequence number under a halting failure policy: the batch is
   * dropped (its credit returned), nothing from it on is ever acknowledged, `signal` aborts, what was
   * acknowledged before it is checkpointed, and the lease is given back with close reason `Halted`.
   * Optional: where missing (a batch built by hand), a halting failure errors the stream instead.
   */
  halt?(sequence: number, error: Error): void;
  /** Runs `fn` with the telemetry context (the OpenTelemetry span) of batch `sequence` active. */
  activate?<R>(sequence: number, fn: () => R): R;
  /**
   * The pipeline is about to end with `error`, a failure no wait can fix (a sink refusing for good, a
   * `SinkError`): the reader should checkpoint what was acknowledged and give the lease back at once with
   * close reason `Error`, not `Shutdown`. Optional: where missing, the lease is released when the run stops.
   */
  fatal?(error: Error): void;
  /** Changes of this partition were written to the dead-letter sink `sink` by `operator` (a `deadLettered` event). */
  reportDeadLettered?(lsns: readonly number[], sink: string, operator: string): void;
  /**
   * Aborted when this host's ownership of the lease ended (lost, released, gone, past its local deadline).
   * Sinks must not write batches of an ended ownership: drop them instead (the next owner reads them again).
   */
  readonly signal: AbortSignal;
}

/**
 * Where a batch came from: its reader, its sequence number within the partition (1, 2, …) and how many
 * changes it held when it was read (the read credit it holds until acknowledged).
 *
 * @internal
 */
export interface BatchOrigin {
  readonly tracker: PartitionTracker;
  readonly sequence: number;
  readonly readCount: number;
}
