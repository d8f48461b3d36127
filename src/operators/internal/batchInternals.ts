import type { Change } from '../../core/Change.js';
import { ChangeBatch, type BatchOrBatches } from '../../core/ChangeBatch.js';
import { HandlerError, InvalidOptionsError } from '../../errors/index.js';
import { logger } from '../../internal/log.js';
import { checkConcurrency } from './perPartitionInternals.js';
import type { ConcurrencyOptions, ItemErrorOptions, OnItemError } from '../types.js';

/** Default number of partitions with work in flight at once. */
export const DEFAULT_CONCURRENCY = 4;

/** Reads and validates `onError`; throws at construction with a message that says what to fix. */
export function onErrorOption(options: ItemErrorOptions | undefined): OnItemError {
  const mode = options?.onError ?? 'report';
  if (mode !== 'report' && mode !== 'throw') {
    throw new InvalidOptionsError('onError', `must be 'report' or 'throw' (got ${String(mode)})`);
  }
  return mode;
}

/** Reads and validates `concurrency`: a positive integer or Infinity. */
export function concurrencyOption(options: ConcurrencyOptions | undefined): number {
  return checkConcurrency(options?.concurrency ?? DEFAULT_CONCURRENCY);
}

/**
 * Handles user code failing on `change` (or on the whole batch when `change` is undefined): in `'report'`
 * mode the failure goes to the batch's reader (and from there to the events stream) and the caller carries
 * on without the change; in `'throw'` mode the `HandlerError` is thrown for the stream to fail with.
 */
export function itemFailed(
  operator: string,
  batch: ChangeBatch<unknown>,
  change: Change<unknown> | undefined,
  cause: unknown,
  mode: OnItemError,
): void {
  // Never wrap twice: a HandlerError thrown from a nested rxfeed operator already names its change.
  const error = cause instanceof HandlerError ? cause : new HandlerError(batch.partition, change, cause);
  const log = logger('operators', { lease: batch.partition });
  if (mode === 'throw') {
    log('%s: %s (onError: throw, failing the stream)', operator, error.message);
    throw error;
  }
  const tracker = batch.origin?.tracker;
  log('%s: %s (reported%s)', operator, error.message, tracker ? '' : '; batch has no reader, so only logged');
  tracker?.reportError(error);
}

/** Maps the changes of one batch, leaving out (and reporting) those `fn` throws for. */
export function mapBatch<T, R>(
  operator: string,
  batch: ChangeBatch<T>,
  fn: (change: Change<T>, index: number) => Change<R>,
  onError: OnItemError,
): ChangeBatch<R> {
  const source = batch.changes;
  const mapped: Change<R>[] = new Array(source.length);
  let kept = 0;
  for (let i = 0; i < source.length; i++) {
    const change = source[i] as Change<T>;
    try {
      mapped[kept] = fn(change, i);
      kept++;
    } catch (error) {
      itemFailed(operator, batch, change, error, onError);
    }
  }
  if (kept < source.length) mapped.length = kept;
  return batch.withChanges(mapped);
}

/** Keeps the changes of one batch that pass `predicate`; one it throws for is left out (and reported). */
export function filterBatch<T>(
  batch: ChangeBatch<T>,
  predicate: (change: Change<T>, index: number) => boolean,
  onError: OnItemError,
): ChangeBatch<T> {
  const source = batch.changes;
  const kept: Change<T>[] = [];
  for (let i = 0; i < source.length; i++) {
    const change = source[i] as Change<T>;
    let keep: boolean;
    try {
      keep = predicate(change, i);
    } catch (error) {
      itemFailed('filterChanges', batch, change, error, onError);
      keep = false;
    }
    if (keep) kept.push(change);
  }
  // Nothing left out: the batch itself is the answer (no allocation on the common path).
  return kept.length === source.length ? batch : batch.withChanges(kept);
}

/** Applies `fn` to a batch, or to each batch of an array, keeping the shape. */
export function perBatch<T, R>(
  value: BatchOrBatches<T>,
  fn: (batch: ChangeBatch<T>) => ChangeBatch<R>,
): ChangeBatch<R> | ChangeBatch<R>[] {
  return value instanceof ChangeBatch ? fn(value) : value.map(fn);
}
