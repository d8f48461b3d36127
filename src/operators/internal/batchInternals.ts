import type { OperatorFunction } from 'rxjs';
import type { Change } from '../../core/Change.js';
import { type BatchOrBatches, ChangeBatch } from '../../core/ChangeBatch.js';
import { attempt, dropped, type Failure, type FailureOptions, type FailurePolicy, giveUp, goesOn, isFenced, withLsnGroups } from '../../failures/failurePolicy.js';
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
 * skipped, dead-lettered, halts its partition or fails the stream, as the policy says, with the other
 * changes of its LSN (a poison change takes its LSN group with it); a fencing error drops the batch
 * (ownership ended). Batches of one partition stay in order. With `filter` set, `step` is a predicate run by
 * a tighter loop (the changes it keeps, unchanged). @internal
 */
export function perChange<T, R>(operator: string, policy: FailurePolicy<T>, step: ChangeStep<T, R>, filter?: (change: Change<T>, index: number) => boolean): OperatorFunction<BatchOrBatches<T>, BatchOrBatches<R>> {
  const project = filter
    ? (batch: ChangeBatch<T>) => filterStep(operator, policy, batch, filter, step)
    : (batch: ChangeBatch<T>) => mapStep(operator, policy, batch, step);
  return mapPerPartition(project, Infinity, false, true);
}

/** The map loop: one call per change and one array per batch, unless `step` throws (then {@link completeStep}). */
function mapStep<T, R>(operator: string, policy: FailurePolicy<T>, batch: ChangeBatch<T>, step: ChangeStep<T, R>): ChangeBatch<R> | Promise<ChangeBatch<R> | typeof DROPPED> {
  const source = batch.changes;
  const n = source.length;
  const out: (Change<R> | typeof LEFT_OUT)[] = new Array(n);
  let same = true;
  let leftOut = 0;
  let i = 0;
  try {
    for (; i < n; i++) {
      const change = source[i] as Change<T>;
      const result = step(change, i);
      out[i] = result;
      if (result !== (change as unknown)) {
        same = false;
        if (result === LEFT_OUT) leftOut++;
      }
    }
  } catch (error) {
    return completeStep(operator, policy, batch, step, out, i, error);
  }
  if (same) return batch as unknown as ChangeBatch<R>;
  return batch.withChanges(leftOut === 0 ? (out as Change<R>[]) : kept(out));
}

/** The filter loop: keeps what `predicate` passes; the batch itself when it keeps everything. */
function filterStep<T, R>(
  operator: string,
  policy: FailurePolicy<T>,
  batch: ChangeBatch<T>,
  predicate: (change: Change<T>, index: number) => boolean,
  step: ChangeStep<T, R>,
): ChangeBatch<R> | Promise<ChangeBatch<R> | typeof DROPPED> {
  const source = batch.changes;
  const n = source.length;
  const keep: Change<T>[] = [];
  // Where the first change left out was (n: none yet): enough to rebuild what the predicate said if it throws.
  let firstOut = n;
  let i = 0;
  try {
    for (; i < n; i++) {
      const change = source[i] as Change<T>;
      if (predicate(change, i)) keep.push(change);
      else if (firstOut === n) firstOut = i;
    }
  } catch (error) {
    // Back to the general form: every change before `i` kept or left out, as the predicate said. Up to
    // `firstOut` every change was kept; after it, kept ones are matched in order (each kept change is the
    // next of `keep`, as the loop pushed them; a change left out is not, unless the same object comes again
    // later, in which case the earlier place takes it: either way the kept changes and their order match).
    const out: (Change<R> | typeof LEFT_OUT)[] = new Array(n);
    for (let j = 0, k = 0; j < i; j++) out[j] = (j < firstOut || keep[k] === source[j]) && k < keep.length ? (keep[k++] as unknown as Change<R>) : LEFT_OUT;
    return completeStep(operator, policy, batch, step, out, i, error);
  }
  if (keep.length === n) return batch as unknown as ChangeBatch<R>;
  return batch.withChanges(keep as unknown as Change<R>[]);
}

/**
 * Finishes a batch after `step` threw `error` for change `at` (`out` holds the results before it): runs
 * the rest, noting every failure, and settles them under the policy.
 */
function completeStep<T, R>(
  operator: string,
  policy: FailurePolicy<T>,
  batch: ChangeBatch<T>,
  step: ChangeStep<T, R>,
  out: (Change<R> | typeof LEFT_OUT)[],
  at: number,
  error: unknown,
): Promise<ChangeBatch<R> | typeof DROPPED> {
  const source = batch.changes;
  const failed = new Map<number, unknown>([[at, error]]);
  out[at] = LEFT_OUT;
  for (let i = at + 1; i < source.length; i++) {
    try {
      out[i] = step(source[i] as Change<T>, i);
    } catch (e) {
      failed.set(i, e);
      out[i] = LEFT_OUT;
    }
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
  // Skipped or dead-lettered, a change takes the other changes of its LSN with it (halting stops before them).
  const given = goesOn(policy) ? withLsnGroups(batch.changes, failures) : failures;
  if (given.length > failures.length) {
    const lsns = new Set(given.map((f) => f.change.lsn));
    for (const [i, change] of batch.changes.entries()) if (lsns.has(change.lsn)) out[i] = LEFT_OUT;
  }
  return (await giveUp(policy, operator, batch, given, given[0]!)) ? batch.withChanges(kept(out)) : DROPPED;
}

function kept<R>(out: readonly (Change<R> | typeof LEFT_OUT)[]): Change<R>[] {
  return out.filter((c): c is Change<R> => c !== LEFT_OUT);
}

/** Applies `fn` to a batch, or to each batch of an array, keeping the shape. @internal */
export function perBatch<T, R>(value: BatchOrBatches<T>, fn: (batch: ChangeBatch<T>) => ChangeBatch<R>): ChangeBatch<R> | ChangeBatch<R>[] {
  return value instanceof ChangeBatch ? fn(value) : value.map(fn);
}
