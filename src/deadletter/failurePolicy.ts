import { asyncScheduler, fromEvent, lastValueFrom, type SchedulerLike, take, takeUntil } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { worthReporting } from '../core/errorEvent.js';
import { HandlerError, InvalidOptionsError, LeaseLostError } from '../errors/index.js';
import { sleep } from '../internal/wait.js';
import { logger } from '../internal/log.js';
import { deadLetterId, errorData, type DeadLetter } from './DeadLetter.js';
import type { DeadLetterSink } from './DeadLetterSink.js';
import { backoffMs, resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './RetryPolicy.js';
import { type RetryOutcome, retryWithPolicy } from './retryWithPolicy.js';

/**
 * What happens to a change (or a batch) that user code fails on: retried by `retry`, then either written
 * to a dead-letter sink (the partition moves on) or halting its partition (nothing is ever skipped).
 *
 * - `{ retry?, deadLetter }`: after the last attempt the change goes to `deadLetter` with the error,
 *   partition, LSN, document, attempt count and epoch; the checkpoint passes it only once that write
 *   succeeded. A sink that is down holds the partition (retried with the same backoff, reported as `error`
 *   events) until it recovers: nothing is lost.
 * - `{ retry?, halt: true }` or `'halt'` (default retries): after the last attempt the partition stops
 *   before the change: what was done before it is checkpointed, its lease is given back with close reason
 *   `Halted` (another host, or this one after a lease expiration, tries again from there), and the other
 *   partitions go on.
 *
 * `scheduler` runs the backoff waits (default `asyncScheduler`; a virtual one in tests).
 *
 * @example
 * ```ts
 * import { eachChange, MemoryDeadLetterStore } from 'rxfeed';
 * const deadLetter = new MemoryDeadLetterStore<Order>();
 * feed$.pipe(eachChange(concatMap(callApi), { onFailure: { retry: { attempts: 5 }, deadLetter } }), checkpointEvery(100));
 * ```
 */
export type OnFailure<T = unknown> =
  | 'halt'
  | { readonly retry?: RetryPolicy; readonly deadLetter: DeadLetterSink<T>; readonly scheduler?: SchedulerLike }
  | { readonly retry?: RetryPolicy; readonly halt: true; readonly scheduler?: SchedulerLike };

/** Options of the operators that take a failure policy. */
export interface FailureOptions<T = unknown> {
  /** Retry, then dead-letter or halt; see {@link OnFailure}. Default: none (the operator's `onError` applies). */
  readonly onFailure?: OnFailure<T>;
}

/** A validated {@link OnFailure}. @internal */
export interface FailurePolicy<T> {
  readonly retry: ResolvedRetryPolicy;
  readonly deadLetter: DeadLetterSink<T> | undefined;
  readonly scheduler: SchedulerLike;
  readonly random: () => number;
}

/** One change user code gave up on. @internal */
export interface Failure<T> {
  readonly change: Change<T>;
  readonly error: unknown;
  readonly attempts: number;
}

/** Validates `onFailure`; `undefined` when none was given. Throws an `InvalidOptionsError` saying what to fix. @internal */
export function resolveOnFailure<T>(option: OnFailure<T> | undefined): FailurePolicy<T> | undefined {
  if (option === undefined) return undefined;
  if (option === 'halt') return { retry: resolveRetryPolicy(undefined, 'onFailure.retry'), deadLetter: undefined, scheduler: asyncScheduler, random: Math.random };
  if (typeof option !== 'object' || option === null) {
    throw new InvalidOptionsError('onFailure', "expected 'halt', { retry?, deadLetter } or { retry?, halt: true }");
  }
  const { deadLetter, halt } = option as { deadLetter?: DeadLetterSink<T>; halt?: unknown };
  if (deadLetter !== undefined && halt !== undefined) {
    throw new InvalidOptionsError('onFailure', 'give either deadLetter or halt: true, not both');
  }
  if (deadLetter === undefined && halt !== true) {
    throw new InvalidOptionsError('onFailure', 'give a deadLetter sink (e.g. new MemoryDeadLetterStore()) or halt: true');
  }
  if (deadLetter !== undefined && (typeof deadLetter !== 'object' || typeof deadLetter.write !== 'function')) {
    throw new InvalidOptionsError('onFailure.deadLetter', 'expected a DeadLetterSink (an object with write(letters, writer))');
  }
  const scheduler = option.scheduler ?? asyncScheduler;
  if (typeof scheduler.schedule !== 'function') throw new InvalidOptionsError('onFailure.scheduler', 'expected an RxJS SchedulerLike');
  return { retry: resolveRetryPolicy(option.retry, 'onFailure.retry'), deadLetter, scheduler, random: Math.random };
}

/**
 * Runs `work` under the policy's retries. Resolves with the outcome, or `undefined` when the batch's
 * ownership ended meanwhile (the batch must then be dropped: the next owner reads it again). @internal
 */
export async function attempt<T, R>(
  policy: FailurePolicy<T>,
  batch: ChangeBatch<T>,
  work: (attempt: number) => Promise<R> | R,
  retry: ResolvedRetryPolicy = policy.retry,
): Promise<RetryOutcome<R> | undefined> {
  const signal = batch.origin?.tracker.signal;
  if (signal?.aborted) return undefined;
  let outcome = retryWithPolicy(work, retry, { scheduler: policy.scheduler, random: policy.random });
  if (signal) outcome = outcome.pipe(takeUntil(fromEvent(signal, 'abort').pipe(take(1))));
  const result = await lastValueFrom(outcome, { defaultValue: undefined });
  return signal?.aborted ? undefined : result;
}

/**
 * Runs `run` on `batch` under the policy: the whole batch once; if that fails, each change again alone
 * (as a batch of one, in order, under the retry policy, the batch run counting as the first attempt), so
 * only the changes that fail on their own are given up on ({@link giveUp}). Resolves with the batch to pass
 * on (without the changes given up on), or `undefined` when the batch left the pipeline. @internal
 */
export async function runIsolating<T, R>(
  policy: FailurePolicy<T>,
  operator: string,
  batch: ChangeBatch<T>,
  run: (batch: ChangeBatch<T>) => Promise<ChangeBatch<R>>,
): Promise<ChangeBatch<R> | undefined> {
  const whole = await attempt(policy, batch, () => run(batch), { ...policy.retry, attempts: batch.size > 1 ? 1 : policy.retry.attempts });
  if (whole === undefined) return void dropped(batch);
  if (whole.ok) return whole.value;
  if (batch.size <= 1) {
    const failures = batch.changes.map((change) => ({ change, error: whole.error, attempts: whole.attempts }));
    return (await giveUp(policy, operator, batch, failures, whole)) ? batch.withChanges<R>([]) : undefined;
  }
  const alone = { ...policy.retry, attempts: Math.max(1, policy.retry.attempts - 1) };
  const kept: Change<R>[] = [];
  const failures: Failure<T>[] = [];
  for (const change of batch.changes) {
    const outcome = await attempt(policy, batch, () => run(batch.withChanges([change])), alone);
    if (outcome === undefined) return void dropped(batch);
    if (outcome.ok) {
      kept.push(...outcome.value.changes);
      continue;
    }
    failures.push({ change, error: outcome.error, attempts: outcome.attempts + 1 });
    if (policy.deadLetter === undefined) break; // halting: nothing after the change runs
  }
  if (failures.length === 0) return batch.withChanges(kept);
  return (await giveUp(policy, operator, batch, failures, whole)) ? batch.withChanges(kept) : undefined;
}

/**
 * User code gave up on `failures` (changes of `batch`, in order; `cause` is the failure of the whole batch,
 * used when it had no changes): dead-letters them, or halts the partition. Resolves true when the batch may
 * go on without them (their letters are written), false when it left the pipeline (halted, fenced, or its
 * ownership ended while the sink was down): it has been handed back to its reader, never to be
 * checkpointed. @internal
 */
export async function giveUp<T>(
  policy: FailurePolicy<T>,
  operator: string,
  batch: ChangeBatch<T>,
  failures: readonly Failure<T>[],
  cause: { readonly error: unknown; readonly attempts: number },
): Promise<boolean> {
  const tracker = batch.origin?.tracker;
  const log = logger('operators', { lease: batch.partition });
  const asError = (error: unknown, change: Change<T> | undefined) =>
    error instanceof HandlerError ? error : new HandlerError(batch.partition, change as Change<unknown> | undefined, error);
  const errors = failures.map((f) => asError(f.error, f.change));
  for (const [i, error] of errors.entries()) tracker?.reportError(error, failures[i]!.attempts);
  const first = errors[0] ?? asError(cause.error, undefined);
  if (failures.length === 0) tracker?.reportError(first, cause.attempts);
  if (policy.deadLetter === undefined) {
    log('%s: giving up after %d attempts, halting the partition: %s', operator, failures[0]?.attempts ?? cause.attempts, first.message);
    // A batch built by hand has no reader to halt: fail the stream, the only way not to skip the change.
    if (!tracker?.halt || !batch.origin) throw first;
    tracker.halt(batch.origin.sequence, first);
    return false;
  }
  const sink = policy.deadLetter;
  if (failures.length === 0) return true; // a batch with no changes failed: nothing to dead-letter
  const now = policy.scheduler.now();
  const letters = failures.map((f, i): DeadLetter<T> => ({
    id: deadLetterId(batch.partition, f.change.lsn, f.change.id),
    leaseToken: batch.partition,
    lsn: f.change.lsn,
    documentId: f.change.id,
    operation: f.change.operation,
    document: f.change.document,
    ...(f.change.partitionKey !== undefined ? { partitionKey: f.change.partitionKey } : {}),
    error: errorData(errors[i]!.cause ?? errors[i]),
    attempts: f.attempts,
    epoch: batch.epoch,
    deadLetteredAtMs: now,
  }));
  const writer = { leaseToken: batch.partition, range: batch.range, epoch: batch.epoch };
  for (let tries = 1; ; tries++) {
    if (tracker?.signal.aborted) return dropped(batch);
    try {
      await sink.write(letters, writer);
      log('%s: %d changes dead-lettered to %s', operator, letters.length, sink.description);
      return true;
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      if (error instanceof LeaseLostError) {
        // Another host owns the partition now (the sink saw a higher epoch): leave the batch to it.
        tracker?.reportError(err);
        return dropped(batch, err);
      }
      log('%s: dead-letter write to %s failed (%d in a row): %s; holding the partition', operator, sink.description, tries, err.message);
      if (worthReporting(tries)) {
        tracker?.reportError(new Error(`dead-letter write to ${sink.description} failed; holding the partition's checkpoint: ${err.message}`, { cause: error }), tries);
      }
      if (!tracker) throw err;
      await sleep(backoffMs(policy.retry, Math.min(tries, 30), policy.random), policy.scheduler, tracker.signal);
    }
  }
}

/** Hands `batch` back to its reader (credit returned, never checkpointed); false, for {@link giveUp}. @internal */
export function dropped(batch: ChangeBatch<unknown>, error?: Error): false {
  if (batch.origin) batch.origin.tracker.drop(batch.origin.sequence, error);
  return false;
}
