import type { ObservableInput } from 'rxjs';
import type { BatchOrBatches, ChangeBatch } from '../../../core/ChangeBatch.js';

/**
 * Work to run for one batch. Resolve (or complete) when the batch's work is done; `signal` aborts when the
 * subscriber unsubscribes, so promise-based work can stop early (Observables are simply unsubscribed).
 */
export type BatchWork<T> = (batch: ChangeBatch<T>, signal: AbortSignal) => ObservableInput<unknown> | void;

/**
 * What a projection yields for a batch that left the pipeline (handed back to its reader with
 * `tracker.drop` or `tracker.halt`): it is not emitted, alone or in its array.
 */
export const DROPPED: unique symbol = Symbol('rxfeed.dropped');

/**
 * Work that turns one batch into another (its last emitted value is the result), or {@link DROPPED}; work
 * done synchronously may return the result itself.
 */
export type BatchProjection<T, R> = (
  batch: ChangeBatch<T>,
  signal: AbortSignal,
) => ObservableInput<ChangeBatch<R> | typeof DROPPED> | ChangeBatch<R> | typeof DROPPED;

/** What a projection gave when it went asynchronous: the work still to wait for. */
export type PendingProjection<R> = ObservableInput<ChangeBatch<R> | typeof DROPPED>;

/** The result of one batch's work: its replacement, or {@link DROPPED}. */
export type BatchResult<R> = ChangeBatch<R> | typeof DROPPED;

/** One value received (a batch, or an array of batches), pending until it is emitted whole. */
export interface Unit<T, R> {
  readonly value: BatchOrBatches<T>;
  readonly batches: readonly ChangeBatch<T>[];
  /** The result of each batch's work, in the places of `batches`; `undefined` while it runs or waits. */
  readonly results: (BatchResult<R> | undefined)[];
  /** How many of its batches still have work waiting or in flight. */
  remaining: number;
  /** Some of its batches left the pipeline. */
  dropped: boolean;
}

/** The work for one batch of a unit: the batch at `index`. */
export interface Job<T, R> {
  readonly unit: Unit<T, R>;
  readonly index: number;
}
