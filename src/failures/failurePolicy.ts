import { asyncScheduler, fromEvent, lastValueFrom, type SchedulerLike, take, takeUntil } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { worthReporting } from '../errors/errorEvent.js';
import { fencingError } from '../errors/classify.js';
import { HandlerError, InvalidOptionsError } from '../errors/index.js';
import { hashString, seededRandom } from '../internal/random.js';
import { sleep } from '../internal/wait.js';
import { logger } from '../internal/log.js';
import { deadLetterId, errorData, type DeadLetter } from '../deadletter/DeadLetter.js';
import type { DeadLetterSink } from '../deadletter/DeadLetterSink.js';
import { policyBackoffMs, resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './RetryPolicy.js';
import { type RetryOutcome, retryWithPolicy } from './retryWithPolicy.js';

/**
 * What happens to a change (or a batch) that user code fails on. Every form first retries it by `retry`
 * (the default {@link RetryPolicy} for the string forms: 3 attempts, backoff from 100 ms), then:
 *
 * - `'halt'` or `{ retry?, halt: true }` (the DEFAULT): the partition stops before the change: what was
 *   done before it is checkpointed, nothing past it ever is, its lease is given back with close reason
 *   `Halted` (another host, or this one after a lease expiration, tries again from there), the failure is an
 *   `error` event (and a process warning when nobody listens to `events$`), and the other partitions go on;
 * - `'skip'` or `{ retry?, skip: true }`: the change is reported (an `error` event of kind `item` with its
 *   attempts) and left out; the checkpoint moves past it. Choose it only where losing the change is fine;
 * - `{ retry?, deadLetter }`: the change goes to `deadLetter` with the error, partition, LSN, document,
 *   attempt count and epoch; the checkpoint passes it only once that write succeeded. A sink that is down
 *   holds the partition (retried with the same backoff, reported as `error` events) until it recovers;
 * - `'throw'`: the stream errors with a `HandlerError` (nothing after the change is checkpointed; the run
 *   ends and its leases are released).
 *
 * Failures are isolated by LSN group, not by single change: the changes that share an LSN (a Cosmos DB
 * transactional batch gives its changes one LSN; a merged partition read whole holds changes of both
 * parents with equal LSNs) are retried together and given up on together, like a transaction. A poison
 * change takes its LSN group with it: under `'skip'` every change of its LSN is left out, under
 * `{ deadLetter }` every one is dead-lettered (each letter with the error that gave the group up), under
 * `'halt'` the partition stops before the first of them.
 *
 * A fencing error (`LeaseLostError`, `ViewFencedError`, `DeadLetterFencedError`: another host owns the
 * partition now) is never a failure of the change: the batch is dropped for the new owner, whatever the policy.
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
  | 'skip'
  | 'throw'
  | { readonly retry?: RetryPolicy; readonly deadLetter: DeadLetterSink<T>; readonly scheduler?: SchedulerLike }
  | { readonly retry?: RetryPolicy; readonly halt: true; readonly scheduler?: SchedulerLike }
  | { readonly retry?: RetryPolicy; readonly skip: true; readonly scheduler?: SchedulerLike };

/** Options of the operators, sinks and handlers that run user code. */
export interface FailureOptions<T = unknown> {
  /** What to do when user code keeps failing on a change; see {@link OnFailure}. Default `'halt'`. */
  readonly onFailure?: OnFailure<T>;
}

/** What a {@link FailurePolicy} does once the retries are used up. @internal */
export type FailureAction = 'halt' | 'skip' | 'throw' | 'deadLetter';

/** A validated {@link OnFailure}. @internal */
export interface FailurePolicy<T> {
  readonly action: FailureAction;
  readonly retry: ResolvedRetryPolicy;
  readonly deadLetter: DeadLetterSink<T> | undefined;
  /** The scheduler named for the waits, if any; else they run on the clock of the batch's processor. */
  readonly scheduler: SchedulerLike | undefined;
}

/**
 * The clock of `batch`'s retry waits: the one the policy names, else the scheduler of the processor that read
 * the batch (so a processor on virtual time retries on virtual time), else `asyncScheduler`. @internal
 */
export function clockOf(policy: FailurePolicy<unknown>, batch: ChangeBatch<unknown> | undefined): SchedulerLike {
  return policy.scheduler ?? batch?.origin?.tracker.scheduler ?? asyncScheduler;
}

/**
 * The random numbers that spread one batch's retry waits: seeded by its partition and place in it, so waits of
 * different partitions (and so of different hosts, which own different partitions) do not line up, and a run
 * on virtual time replays exactly. @internal
 */
export function jitterFor(batch: ChangeBatch<unknown>): () => number {
  return seededRandom(hashString(`${batch.partition}:${batch.origin?.sequence ?? String(batch.position)}`));
}

/** One change user code gave up on. @internal */
export interface Failure<T> {
  readonly change: Change<T>;
  readonly error: unknown;
  readonly attempts: number;
}

const SHAPES = "'halt' (the default), 'skip', 'throw', { retry?, deadLetter }, { retry?, halt: true } or { retry?, skip: true }";

/**
 * Validates the `onFailure` of `options` (default `'halt'`) and refuses the removed `onError`, saying what to
 * write instead. `scheduler`: for the waits when `onFailure` names none. Throws `InvalidOptionsError`. @internal
 */
export function resolveOnFailure<T>(
  options: { readonly onFailure?: OnFailure<T> } | undefined,
  scheduler?: SchedulerLike,
): FailurePolicy<T> {
  const removed = (options as { onError?: unknown } | undefined)?.onError;
  if (removed !== undefined) {
    throw new InvalidOptionsError(
      'onError',
      removed === 'throw'
        ? "was removed: write onFailure: 'throw' (the stream errors with the HandlerError, after the default retries)"
        : "was removed: write onFailure: 'skip' to report a failing change and move past it (after the default retries), " +
            "or leave both out: the default onFailure: 'halt' retries, then stops the partition before the change",
    );
  }
  const option = options?.onFailure ?? 'halt';
  const policy = (action: FailureAction, retry: RetryPolicy | undefined, deadLetter?: DeadLetterSink<T>, own?: SchedulerLike): FailurePolicy<T> => ({
    action,
    retry: resolveRetryPolicy(retry, 'onFailure.retry'),
    deadLetter,
    scheduler: own ?? scheduler,
  });
  if (option === 'halt' || option === 'skip' || option === 'throw') return policy(option, undefined);
  if (typeof option !== 'object' || option === null) throw new InvalidOptionsError('onFailure', `expected ${SHAPES} (got ${String(option)})`);
  const { deadLetter, halt, skip } = option as { deadLetter?: DeadLetterSink<T>; halt?: unknown; skip?: unknown };
  const chosen = [deadLetter !== undefined, halt !== undefined, skip !== undefined].filter(Boolean).length;
  if (chosen > 1) throw new InvalidOptionsError('onFailure', 'give one of deadLetter, halt: true or skip: true, not several');
  if (chosen === 0 || (halt !== undefined && halt !== true) || (skip !== undefined && skip !== true)) {
    throw new InvalidOptionsError('onFailure', `expected ${SHAPES}`);
  }
  if (deadLetter !== undefined && (typeof deadLetter !== 'object' || typeof deadLetter.write !== 'function')) {
    throw new InvalidOptionsError('onFailure.deadLetter', 'expected a DeadLetterSink (an object with write(letters, writer)), e.g. new MemoryDeadLetterStore()');
  }
  const own = option.scheduler;
  if (own !== undefined && typeof own.schedule !== 'function') throw new InvalidOptionsError('onFailure.scheduler', 'expected an RxJS SchedulerLike');
  return policy(deadLetter ? 'deadLetter' : halt ? 'halt' : 'skip', option.retry, deadLetter, own);
}

/**
 * Runs `work` under the policy's retries (a fencing error is never retried). Resolves with the outcome, or
 * `undefined` when the batch's ownership ended meanwhile (the batch must then be dropped: the next owner
 * reads it again). @internal
 */
export async function attempt<T, R>(
  policy: FailurePolicy<T>,
  batch: ChangeBatch<T>,
  work: (attempt: number) => Promise<R> | R,
  retry: ResolvedRetryPolicy = policy.retry,
): Promise<RetryOutcome<R> | undefined> {
  const signal = batch.origin?.tracker.signal;
  if (signal?.aborted) return undefined;
  const retryable = (error: unknown) => fencingError(error) === undefined && retry.retryable(error);
  let outcome = retryWithPolicy(work, { ...retry, retryable }, { scheduler: clockOf(policy, batch), random: jitterFor(batch) });
  if (signal) outcome = outcome.pipe(takeUntil(fromEvent(signal, 'abort').pipe(take(1))));
  const result = await lastValueFrom(outcome, { defaultValue: undefined });
  return signal?.aborted ? undefined : result;
}

/**
 * Recovers from `first`, the failure of `run` on the whole of `batch` (its first attempt): a fencing error
 * drops the batch at once (ownership ended; never an item failure); a batch of one LSN group (see
 * {@link lsnGroups}) is retried under the policy; a larger one is run again LSN group by LSN group (each
 * group alone, as a batch of its own, in order, under the retry policy, the batch run counting as the first
 * attempt), so only the groups that fail on their own are given up on ({@link giveUp}), every change of
 * such a group with it. Resolves with the batch to pass on (without the changes given up on), or
 * `undefined` when the batch left the pipeline. @internal
 */
export async function runIsolating<T, R>(
  policy: FailurePolicy<T>,
  operator: string,
  batch: ChangeBatch<T>,
  first: unknown,
  run: (batch: ChangeBatch<T>) => Promise<ChangeBatch<R>>,
): Promise<ChangeBatch<R> | undefined> {
  if (isFenced(operator, batch, first)) return undefined;
  const groups = lsnGroups(batch.changes);
  if (groups.length <= 1) {
    // Attempt 1 is the failure already seen: the policy decides whether (and after which wait) to try again.
    const outcome = await attempt(policy, batch, (n) => (n === 1 ? Promise.reject(first) : run(batch)));
    if (outcome === undefined) return void dropped(batch);
    if (outcome.ok) return outcome.value;
    if (isFenced(operator, batch, outcome.error)) return undefined;
    const failures = batch.changes.map((change) => ({ change, error: outcome.error, attempts: outcome.attempts }));
    return (await giveUp(policy, operator, batch, failures, outcome)) ? batch.withChanges<R>([]) : undefined;
  }
  const kept: Change<R>[] = [];
  const failures: Failure<T>[] = [];
  for (const group of groups) {
    const outcome = await retryAlone(policy, batch, first, () => run(batch.withChanges(group)));
    if (outcome === undefined) return void dropped(batch);
    if (outcome.ok) {
      kept.push(...outcome.value.changes);
      continue;
    }
    if (isFenced(operator, batch, outcome.error)) return undefined;
    for (const change of group) failures.push({ change, error: outcome.error, attempts: outcome.attempts });
    if (!goesOn(policy)) break; // halting or throwing: nothing after the group runs
  }
  if (failures.length === 0) return batch.withChanges(kept);
  return (await giveUp(policy, operator, batch, failures, { error: first, attempts: 1 })) ? batch.withChanges(kept) : undefined;
}

/**
 * `changes` (in LSN order) cut into runs of changes sharing an LSN: the unit of failure isolation. A Cosmos DB
 * transactional batch gives its changes one LSN, and a merged partition read whole holds changes of both
 * parents with equal LSNs; a view's `exactlyOnce` marks (and a checkpoint) count by LSN, so the changes of
 * one LSN are processed, retried, skipped and dead-lettered together, never one without the others.
 * @internal
 */
export function lsnGroups<T>(changes: readonly Change<T>[]): Change<T>[][] {
  const groups: Change<T>[][] = [];
  let group: Change<T>[] | undefined;
  for (const change of changes) {
    if (group && group[0]!.lsn === change.lsn) group.push(change);
    else groups.push((group = [change]));
  }
  return groups;
}

/**
 * `failures` (changes of `changes` given up on, in order) with the other changes of their LSN groups added,
 * in the order of `changes`: a change given up on takes its LSN group with it (see {@link lsnGroups}). An
 * added change carries the error and attempts of the first failure of its group. @internal
 */
export function withLsnGroups<T>(changes: readonly Change<T>[], failures: readonly Failure<T>[]): Failure<T>[] {
  const own = new Map<Change<T>, Failure<T>>();
  const byLsn = new Map<number, Failure<T>>();
  for (const failure of failures) {
    own.set(failure.change, failure);
    if (!byLsn.has(failure.change.lsn)) byLsn.set(failure.change.lsn, failure);
  }
  const all: Failure<T>[] = [];
  for (const change of changes) {
    const failure = own.get(change) ?? byLsn.get(change.lsn);
    if (failure) all.push(failure.change === change ? failure : { change, error: failure.error, attempts: failure.attempts });
  }
  return all;
}

/**
 * Runs `work` again for one LSN group whose batch run failed with `first`: the policy's remaining attempts
 * (at least one: the failure may have been another group's). Attempts count the batch run.
 */
async function retryAlone<T, R>(policy: FailurePolicy<T>, batch: ChangeBatch<T>, first: unknown, work: () => Promise<R> | R): Promise<RetryOutcome<R> | undefined> {
  const remaining = policy.retry.retryable(first) ? Math.max(1, policy.retry.attempts - 1) : 1;
  const outcome = await attempt(policy, batch, work, { ...policy.retry, attempts: remaining });
  return outcome && { ...outcome, attempts: outcome.attempts + 1 };
}

/** True when the policy lets a batch go on without the changes given up on (skip, dead-letter). @internal */
export function goesOn(policy: FailurePolicy<unknown>): boolean {
  return policy.action === 'skip' || policy.action === 'deadLetter';
}

/**
 * When `error` is (or wraps) a fencing error, hands `batch` back to its reader with it (this host's ownership
 * ends, the credit returns; the new owner reads the batch again) and returns true. @internal
 */
export function isFenced(operator: string, batch: ChangeBatch<unknown>, error: unknown): boolean {
  const fence = fencingError(error);
  if (!fence) return false;
  logger('operators', { lease: batch.partition })('%s: ownership ended (%s); batch dropped for the new owner', operator, fence.message);
  batch.origin?.tracker.reportError(fence);
  // A batch built by hand has no reader to hand it back to: fail the stream rather than pass it on.
  if (!batch.origin) throw fence;
  dropped(batch, fence);
  return true;
}

/**
 * User code gave up on `failures` (changes of `batch`, in order; `cause` is the failure of the whole batch,
 * used when it had no changes): reports them, then skips them, dead-letters them, halts the partition or
 * throws, as the policy says. Resolves true when the batch may go on without them, false when it left the
 * pipeline (halted, fenced, or its ownership ended while the dead-letter sink was down): it has been handed
 * back to its reader, never to be checkpointed. @internal
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
  const attempts = failures[0]?.attempts ?? cause.attempts;
  switch (policy.action) {
    case 'throw':
      log('%s: giving up after %d attempts, failing the stream (onFailure: throw): %s', operator, attempts, first.message);
      throw first;
    case 'skip':
      log('%s: giving up after %d attempts, skipping %d changes (onFailure: skip)%s: %s', operator, attempts, failures.length,
        tracker ? '' : '; the batch has no reader, so only logged', first.message);
      return true;
    case 'halt':
      log('%s: giving up after %d attempts, halting the partition: %s', operator, attempts, first.message);
      // A batch built by hand has no reader to halt: fail the stream, the only way not to skip the change.
      if (!tracker?.halt || !batch.origin) throw first;
      tracker.halt(batch.origin.sequence, first);
      return false;
    case 'deadLetter':
      return failures.length === 0 ? true : deadLetter(policy, operator, batch, failures, errors);
  }
}

/** Writes `failures` to the policy's dead-letter sink, holding the partition while it is down. */
async function deadLetter<T>(
  policy: FailurePolicy<T>,
  operator: string,
  batch: ChangeBatch<T>,
  failures: readonly Failure<T>[],
  errors: readonly HandlerError[],
): Promise<boolean> {
  const tracker = batch.origin?.tracker;
  const log = logger('operators', { lease: batch.partition });
  const sink = policy.deadLetter!;
  const now = clockOf(policy, batch).now();
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
      tracker?.reportDeadLettered?.(letters.map((l) => l.lsn), sink.description, operator);
      return true;
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      const fence = fencingError(error);
      if (fence) {
        // Another host owns the partition now (the sink saw a higher epoch): leave the batch to it.
        tracker?.reportError(fence);
        return dropped(batch, fence);
      }
      log('%s: dead-letter write to %s failed (%d in a row): %s; holding the partition', operator, sink.description, tries, err.message);
      if (worthReporting(tries)) {
        tracker?.reportError(new Error(`dead-letter write to ${sink.description} failed; holding the partition's checkpoint: ${err.message}`, { cause: error }), tries);
      }
      if (!tracker) throw err;
      await sleep(policyBackoffMs(policy.retry, Math.min(tries, 30), jitterFor(batch)), clockOf(policy, batch), tracker.signal);
    }
  }
}

/** Hands `batch` back to its reader (credit returned, never checkpointed); false, for {@link giveUp}. @internal */
export function dropped(batch: ChangeBatch<unknown>, error?: Error): false {
  if (batch.origin) batch.origin.tracker.drop(batch.origin.sequence, error);
  return false;
}
