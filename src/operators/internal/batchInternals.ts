import type { OperatorFunction } from 'rxjs';
import type { Change } from '../../core/Change.js';
import { type BatchOrBatches, ChangeBatch } from '../../core/ChangeBatch.js';
import { attempt, dropped, type Failure, type FailureOptions, type FailurePolicy, giveUp, goesOn, isFenced } from '../../failures/failurePolicy.js';
import { checkConcurrency, DROPPED, mapPerPartition } from './perPartitionInternals.js';
import type { ConcurrencyOptions } from '../types.js';

/** Default number of partitions with work in flight at once. */
export const DEFAULT_CONCURRENCY = 4;

/**
 * Options of the operators that run a synchronous function per change (`mapChanges`, `mapDocuments`,
 * `filterChanges`): `onFailure`, default `'halt'`; see {@link OnFailure}.
 */
export type ChangeFailureOptions<T = unknown> = FailureOptions<T>;

/** Reads and validates `concurrency`: a positive integer or Infinity. @internal */
export function concurrencyOption(options: ConcurrencyOptions | undefined): number {
  return checkConcurrency(options?.concurrency ?? DEFAULT_CONCURRENCY);
}

/** What a per-change step gives for a change it leaves out of the batch (a filter's "no"). @internal */
export const LEFT_OUT: unique symbol = Symbol('rxfeed.leftOut');

/** A synchronous function of one change: its replacement, or {@link LEFT_OUT}. @internal */
export type ChangeStep<T, R> = (change: Change<T>, index: number) => Change<R> | typeof LEFT_OUT;

/**
 * Applies `step` to every change of each batch (or array of batches), keeping the shape. The common path
 * is synchronous and allocation-light (a batch that loses and changes nothing is passed on as is). A change
 * `step` throws for is retried alone under `policy` (with its backoff; the throw was attempt 1), then
 * skipped, dead-lettered, halts its partition or fails the stream, as the policy says; a fencing error
 * drops the batch (ownership ended). Batches of one partition stay in order. @internal
 */
export function perChange<T, R>(operator: string, policy: FailurePolicy<T>, step: ChangeStep<T, R>): OperatorFunction<BatchOrBatches<T>, BatchOrBatches<R>> {
  const project = (batch: ChangeBatch<T>) => applyStep(operator, policy, batch, step);
  return mapPerPartition(project, Infinity);
}

function applyStep<T, R>(
  operator: string,
  policy: FailurePolicy<T>,
  batch: ChangeBatch<T>,
  step: ChangeStep<T, R>,
): ChangeBatch<R> | Promise<ChangeBatch<R> | typeof DROPPED> {
  const source = batch.changes;
  const out: (Change<R> | typeof LEFT_OUT)[] = new Array(source.length);
  let failed: Map<number, unknown> | undefined;
  let same = true;
  let leftOut = 0;
  for (let i = 0; i < source.length; i++) {
    try {
      const result = step(source[i] as Change<T>, i);
      out[i] = result;
      if (result !== (source[i] as unknown)) {
        same = false;
        if (result === LEFT_OUT) leftOut++;
      }
    } catch (error) {
      (failed ??= new Map()).set(i, error);
      out[i] = LEFT_OUT;
    }
  }
  if (!failed) {
    if (same) return batch as unknown as ChangeBatch<R>;
    return batch.withChanges(leftOut === 0 ? (out as Change<R>[]) : kept(out));
  }
  return settle(operator, policy, batch, step, out, failed);
}

/** Retries the changes `step` threw for, then applies the policy to those it still fails on. */
async function settle<T, R>(
  operator: string,
  policy: FailurePolicy<T>,
  batch: ChangeBatch<T>,
  step: ChangeStep<T, R>,
  out: (Change<R> | typeof LEFT_OUT)[],
  failed: ReadonlyMap<number, unknown>,
): Promise<ChangeBatch<R> | typeof DROPPED> {
  const failures: Failure<T>[] = [];
  for (const [i, first] of failed) {
    const change = batch.changes[i] as Change<T>;
    if (isFenced(operator, batch, first)) return DROPPED;
    // Attempt 1 is the throw already seen: the policy decides whether (and after which wait) to try again.
    const outcome = await attempt(policy, batch, (n) => (n === 1 ? Promise.reject(first) : step(change, i)));
    if (outcome === undefined) return (dropped(batch), DROPPED);
    if (outcome.ok) {
      out[i] = outcome.value;
      continue;
    }
    if (isFenced(operator, batch, outcome.error)) return DROPPED;
    failures.push({ change, error: outcome.error, attempts: outcome.attempts });
    if (!goesOn(policy)) break; // halting or throwing: what follows does not matter
  }
  if (failures.length === 0) return batch.withChanges(kept(out));
  return (await giveUp(policy, operator, batch, failures, failures[0]!)) ? batch.withChanges(kept(out)) : DROPPED;
}

function kept<R>(out: readonly (Change<R> | typeof LEFT_OUT)[]): Change<R>[] {
  return out.filter((c): c is Change<R> => c !== LEFT_OUT);
}

/** Applies `fn` to a batch, or to each batch of an array, keeping the shape. @internal */
export function perBatch<T, R>(value: BatchOrBatches<T>, fn: (batch: ChangeBatch<T>) => ChangeBatch<R>): ChangeBatch<R> | ChangeBatch<R>[] {
  return value instanceof ChangeBatch ? fn(value) : value.map(fn);
}
