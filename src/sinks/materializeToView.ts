import { defer, finalize, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { worthReporting } from '../errors/errorEvent.js';
import { attempt, type Failure, type FailurePolicy, type FailureOptions, clockOf, giveUp, goesOn, isFenced, jitterFor, resolveOnFailure, withLsnGroups } from '../failures/failurePolicy.js';
import { policyBackoffMs, resolveRetryPolicy } from '../failures/RetryPolicy.js';
import { classifyFailure, fencingError } from '../errors/classify.js';
import { InvalidOptionsError, SinkError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import { sleep } from '../internal/wait.js';
import type { AnyBatches, DocumentOf } from '../operators/types.js';
import type { ViewChange, ViewCommit, ViewMode, ViewStore, ViewWrite, ViewWriteResult } from './ViewStore.js';
import { allAborted, type DetachedOutcome, DetachedWrites } from './internal/detachedWrites.js';
import { writeInPartitionOrder } from './internal/writeInPartitionOrder.js';

/** Options of {@link materializeToView}. */
export interface MaterializeToViewOptions<T, R> extends FailureOptions<T> {
  /**
   * The row for a change (any JSON value). Return `undefined` (or `null`) when the document does not
   * belong in the view (any more): its key is then removed like a delete. Not called for deletes.
   */
  readonly project: (change: Change<T>) => R | null | undefined;
  /** The row key. Default: the document id (`change.id`). */
  readonly key?: (change: Change<T>) => string;
  /**
   * Soft delete: a change for which this returns true removes the row (like a delete). Deletes and
   * time-to-live expiries always remove the row. Default: none.
   */
  readonly isDeleted?: (change: Change<T>) => boolean;
  /**
   * How many writes (partitions) may be in flight at once. A positive integer or `Infinity`. Default `4`. Writes
   * whose leases all ended in flight no longer count, up to as many again (see {@link materializeToView}).
   */
  readonly concurrency?: number;
  /** Guard policy; see {@link ViewMode} for when to use which. Default `'guarded'`. */
  readonly mode?: ViewMode;
}

const MODES: readonly ViewMode[] = ['guarded', 'exactlyOnce'];

/**
 * How a sink waits out a store that is down: exponential from 100 ms, doubling, capped at 10 s, ±20 %
 * jitter, without a limit on attempts (the lease is kept meanwhile). @internal
 */
export const SINK_RETRY = resolveRetryPolicy({ initialBackoffMs: 100, maxBackoffMs: 10_000, backoffFactor: 2, jitter: 0.2 });

/** Checks the options shared by the sink operators; throws with a message saying what to fix. @internal */
export function checkSinkOptions(options: { concurrency?: number; mode?: ViewMode }): { concurrency: number; mode: ViewMode } {
  const { concurrency = 4, mode = 'guarded' } = options;
  if (!(concurrency === Infinity || (Number.isInteger(concurrency) && concurrency > 0))) {
    throw new InvalidOptionsError('concurrency', `must be a positive integer or Infinity (got ${String(concurrency)})`);
  }
  if (!MODES.includes(mode)) throw new InvalidOptionsError('mode', `must be 'guarded' or 'exactlyOnce' (got ${String(mode)})`);
  return { concurrency, mode };
}

/** The row change for `change` (user code: `key`, `isDeleted`, `project`); throws what they throw. @internal */
export function viewChangeOf<T, R>(
  change: Change<T>,
  partition: string,
  project: (change: Change<T>) => R | null | undefined,
  key: (change: Change<T>) => string,
  isDeleted: ((change: Change<T>) => boolean) | undefined,
): ViewChange<R> {
  const k = key(change);
  if (typeof k !== 'string' || k === '') throw new TypeError(`key must be a non-empty string (got ${String(k)})`);
  const removed = change.operation === 'delete' || change.timeToLiveExpired === true || isDeleted?.(change) === true;
  const row = removed ? undefined : (project(change) ?? undefined); // null removes too: a SQL row cannot hold it
  return { key: k, row, lsn: change.lsn, timestampMs: change.timestampMs, partition };
}

/**
 * Turns batches into one view write: the row change of each change `rows` holds (changes it lacks, given up
 * on, are left out), and each partition's last position and highest epoch. @internal
 */
export function toViewWrite<T, R>(batches: readonly ChangeBatch<T>[], mode: ViewMode, rows: ReadonlyMap<Change<T>, ViewChange<R>>): ViewWrite<R> {
  const changes: ViewChange<R>[] = [];
  const commits = new Map<string, ViewCommit>();
  for (const batch of batches) {
    for (const change of batch.changes) {
      const row = rows.get(change);
      if (row) changes.push(row);
    }
    const previous = commits.get(batch.partition);
    // The last LSN read, not the last left after filtering: a replayed batch a filter emptied is still a replay.
    const lsn = batch.readLsn;
    const range = batch.range ?? previous?.range;
    commits.set(batch.partition, {
      partition: batch.partition,
      position: batch.position,
      epoch: Math.max(batch.epoch, previous?.epoch ?? batch.epoch),
      lsn: previous?.lsn === undefined ? lsn : lsn === undefined ? previous.lsn : Math.max(lsn, previous.lsn),
      ...(range ? { range } : {}),
    });
  }
  return { mode, changes, partitions: [...commits.values()] };
}

/**
 * Writes each batch (or array of batches, as `bufferTime` gives) into a view in one transaction, then
 * re-emits it: put `checkpointEvery` after it and a checkpoint means "this is in the view".
 *
 * Each change becomes a row (`project`) under a key (`key`, default the document id); deletes, TTL
 * expiries, soft deletes (`isDeleted`) and changes projected to `undefined` remove the row. Batches of one
 * partition are written one after the other, in order; up to `concurrency` partitions write at once.
 *
 * A change that `project`, `key` or `isDeleted` throws for is an item failure, handled by `onFailure` (see
 * {@link OnFailure}) like in every operator: retried alone under `retry` (with its backoff), then by default
 * (`'halt'`) its partition stops before it (its batches are left out of the write, so an exactly-once view
 * never records a position past the change); `'skip'` leaves it out (its row keeps its previous version)
 * and reports it; `{ deadLetter }` dead-letters it before the write; `'throw'` fails the stream. Skipped or
 * dead-lettered, it takes the other changes of its LSN with it (a transactional batch's changes, or a merged
 * partition's equal LSNs, are never written in part).
 *
 * A failing view write is never an item failure. One rejected with `ViewFencedError` (another host owns the
 * partition now) is reported as an `error` event of kind `fencing`: that partition's batches are dropped
 * (never emitted, so never checkpointed; the new owner reads them again; their read credit is returned and
 * this host's ownership of the lease ends) and the rest of the value is written and emitted without them.
 * Batches whose ownership ended before or while their write waited are dropped the same way, unwritten. A
 * write still in flight when every lease it carries ends is not waited for: its batches are dropped at once and
 * its slot goes to live partitions; the store gets the write's `signal` (aborted then) to cancel it if it can,
 * else it finishes in the background, refused by the fence once the new owner wrote (reported then as above).
 * At most `concurrency` such writes run at once; past that, one keeps its slot until it settles. A
 * write that fails in a way waiting can fix (connection refused, reset or dropped, a timeout, a
 * serialization failure or deadlock, an admin shutdown, too many connections; see `classifyFailure`) is
 * retried inside the sink with capped exponential backoff (100 ms doubling to 10 s, ±20 % jitter, no limit)
 * while the leases are kept, and reported as `error` events of kind `infrastructure` with the running
 * `attempts` (at 1, 3, 10, 30, …). A write that cannot succeed by waiting (rejected credentials, a missing
 * table, bad SQL) ends the stream with a {@link SinkError}.
 *
 * Every write raises the view's epoch for its partitions, so a deposed owner is fenced as soon as the new
 * one wrote anything, replays included. A guarded write left without changes is skipped, unless it carries
 * an epoch this subscription has not written for the partition yet (then it is written, to raise it).
 *
 * @example
 * ```ts
 * import { bufferTime, filter } from 'rxjs';
 * import { changeFeed, checkpointEvery, materializeToView } from 'rxfeed';
 * import { PGliteViewStore } from 'rxfeed/postgres';
 * const view = new PGliteViewStore<{ customer: string; total: number }>({ table: 'order_summary' });
 * changeFeed<Order>(options).pipe(
 *   bufferTime(250, null, 1000),
 *   filter((batches) => batches.length > 0),
 *   materializeToView(view, { project: (c) => ({ customer: c.document!.customer, total: c.document!.total }), isDeleted: (c) => c.document?.status === 'deleted' }),
 *   checkpointEvery({ count: 1000, ms: 5000 }),
 * ).subscribe();
 * ```
 */
export function materializeToView<B extends AnyBatches, R>(
  view: ViewStore<R>,
  options: MaterializeToViewOptions<DocumentOf<B>, R>,
): OperatorFunction<B, B> {
  if (!view || typeof view.write !== 'function') throw new InvalidOptionsError('view', 'give a ViewStore (MemoryViewStore, PostgresViewStore, PGliteViewStore)');
  if (typeof options?.project !== 'function') throw new InvalidOptionsError('project', 'give a function from a change to its row');
  if (options.key !== undefined && typeof options.key !== 'function') throw new InvalidOptionsError('key', 'give a function from a change to its row key');
  if (options.isDeleted !== undefined && typeof options.isDeleted !== 'function') throw new InvalidOptionsError('isDeleted', 'give a predicate on a change');
  const { concurrency, mode } = checkSinkOptions(options);
  const policy = resolveOnFailure(options);
  const key = options.key ?? ((change: Change<DocumentOf<B>>) => change.id);
  type T = DocumentOf<B>;
  const rowOf = (change: Change<T>, batch: ChangeBatch<T>) => viewChangeOf(change, batch.partition, options.project, key, options.isDeleted);
  return (source) =>
    defer(() => {
      /** Highest epoch this subscription has written per partition: an empty guarded write above it still writes. */
      const written = new Map<string, number>();
      /** Aborted when the subscriber leaves: a write waiting out an outage stops waiting. */
      const left = new AbortController();
      /** Writes whose leases all ended in flight: not waited for, at most `concurrency` of them at once. */
      const detached = new DetachedWrites(concurrency);
      return source.pipe(
        writeInPartitionOrder<B>(async (value, all) => {
          // Batches of an ownership that ended are not written: the next owner reads them again.
          let batches = dropBatches(all as readonly ChangeBatch<T>[], ended);
          const rows = await rowsOf(policy, batches, rowOf);
          // Halted (or fenced) batches left the pipeline already, and with them their partitions' later ones.
          batches = batches.filter((b) => !rows.gone.has(b));
          batches = dropBatches(batches, ended);
          // Each round ends in a write, or drops the batches of a partition (fenced, or its ownership ended).
          let jitter: (() => number) | undefined;
          for (let failures = 0; ; ) {
            if (batches.length === 0) return undefined;
            const write = toViewWrite(batches, mode, rows.rows);
            // Guarded views have nothing to do for empty writes, unless the epoch rises (fencing);
            // exactly-once views still move their positions.
            const raises = write.partitions.some((p) => p.epoch > (written.get(p.partition) ?? -Infinity));
            if (write.changes.length === 0 && mode === 'guarded' && !raises) break;
            // Aborted once every lease of the write ended: nobody waits for it then, and its slot is freed. A batch
            // without a reader (built by hand) has no ownership to end: its write is always waited for.
            const writing = batches;
            const deposed = allAborted(writing.every((b) => b.origin) ? writing.map((b) => b.origin!.tracker.signal) : []);
            try {
              let outcome: { readonly value: ViewWriteResult } | undefined;
              try {
                outcome = await detached.wait(view.write(write, { signal: deposed.signal }), deposed.signal, (late) => lateWrite(view, write, writing, late, detached.count));
              } finally {
                deposed.dispose();
              }
              if (outcome === undefined) {
                logger('view', { lease: write.partitions.map((p) => p.partition).join(',') })(
                  'materializeToView: every lease of a write to %s ended while it was in flight: its batches are dropped, the write goes on without its slot (%d detached)',
                  view.description,
                  detached.count,
                );
                batches = dropBatches(batches, ended);
                continue;
              }
              for (const p of write.partitions) written.set(p.partition, Math.max(p.epoch, written.get(p.partition) ?? p.epoch));
              break;
            } catch (error) {
              const lease = write.partitions.map((p) => p.partition).join(',');
              const log = logger('view', { lease });
              const fence = fencingError(error);
              if (fence) {
                // Another host owns the partition now: its batches must not reach the checkpoint (the new owner
                // reads them again); the other partitions of the value are written without them.
                log('materializeToView: write to %s fenced: %s', view.description, fence.message);
                batches.find((b) => b.partition === fence.leaseToken)?.origin?.tracker.reportError(fence);
                batches = dropBatches(batches, (b) => b.partition === fence.leaseToken, fence);
                continue;
              }
              if (deposed.signal.aborted) {
                // Every lease ended while the write was in flight (a store that cancels it on the signal rejects
                // so): whatever else the error, nobody waits for these batches any more.
                batches = dropBatches(batches, ended);
                continue;
              }
              if (classifyFailure(error) === 'permanent') {
                log('materializeToView: write to %s failed for good: %s', view.description, (error as Error).message);
                const fatal = new SinkError(view.description, error);
                for (const tracker of new Set(batches.map((b) => b.origin?.tracker))) {
                  tracker?.reportError(fatal);
                  tracker?.fatal?.(fatal);
                }
                throw fatal;
              }
              failures++;
              const err = error instanceof Error ? error : new Error(String(error));
              log('materializeToView: write to %s failed (%d in a row), retrying: %s', view.description, failures, err.message);
              if (worthReporting(failures)) {
                const reported = new Error(`write to ${view.description} failed (${failures} in a row); retrying, leases kept: ${err.message}`, { cause: error });
                for (const tracker of new Set(batches.map((b) => b.origin?.tracker))) tracker?.reportError(reported, failures);
              }
              // Waits, unless a partition's ownership ends meanwhile: its batches are then dropped at once.
              const signals = batches.flatMap((b) => (b.origin ? [b.origin.tracker.signal] : []));
              await sleep(policyBackoffMs(SINK_RETRY, Math.min(failures, 30), (jitter ??= jitterFor(batches[0]!))), clockOf(policy, batches[0]), AbortSignal.any([left.signal, ...signals]));
              if (left.signal.aborted) return undefined; // nothing is emitted any more; the next run reads them again
              batches = dropBatches(batches, ended);
            }
          }
          if (batches.length === all.length) return value;
          return (Array.isArray(value) ? batches : undefined) as B | undefined;
        }, concurrency),
        finalize(() => left.abort()),
      );
    });
}

/**
 * Logs how a write nobody waited for any more ended (see {@link DetachedWrites}); one the view refused is
 * reported as a fencing `error` event of its lease, as a fenced write waited for is (its batches were dropped
 * already).
 */
function lateWrite<T>(view: ViewStore<unknown>, write: ViewWrite<unknown>, batches: readonly ChangeBatch<T>[], outcome: DetachedOutcome, left: number): void {
  const log = logger('view', { lease: write.partitions.map((p) => p.partition).join(',') });
  if (outcome.ok) {
    log('materializeToView: a write to %s of leases that ended landed late (%d still detached)', view.description, left);
    return;
  }
  const fence = fencingError(outcome.error);
  if (fence) {
    log('materializeToView: a write to %s of leases that ended was fenced: %s (%d still detached)', view.description, fence.message, left);
    batches.find((b) => b.partition === fence.leaseToken)?.origin?.tracker.reportError(fence);
    return;
  }
  log('materializeToView: a write to %s of leases that ended failed: %s (%d still detached)', view.description, (outcome.error as Error)?.message, left);
}

/** True for a batch whose ownership ended (or whose partition halted). */
function ended(batch: ChangeBatch<unknown>): boolean {
  return batch.origin?.tracker.signal.aborted === true;
}

/**
 * The row change of every change of `batches`, user code retried and given up on as `policy` says: `rows`
 * holds the changes to write, `gone` the batches that left the pipeline (their partition halted, or
 * fenced). Throws under `onFailure: 'throw'`.
 */
async function rowsOf<T, R>(
  policy: FailurePolicy<T>,
  batches: readonly ChangeBatch<T>[],
  rowOf: (change: Change<T>, batch: ChangeBatch<T>) => ViewChange<R>,
): Promise<{ rows: Map<Change<T>, ViewChange<R>>; gone: Set<ChangeBatch<T>> }> {
  const rows = new Map<Change<T>, ViewChange<R>>();
  const gone = new Set<ChangeBatch<T>>();
  const failed = new Map<ChangeBatch<T>, Map<Change<T>, unknown>>();
  for (const batch of batches) {
    for (const change of batch.changes) {
      try {
        rows.set(change, rowOf(change, batch));
      } catch (error) {
        const list = failed.get(batch) ?? new Map<Change<T>, unknown>();
        failed.set(batch, list.set(change, error));
      }
    }
  }
  for (const [batch, list] of failed) {
    if (ended(batch)) continue; // a halt of an earlier batch of its partition: dropped below
    const failures: Failure<T>[] = [];
    let left = false;
    for (const [change, first] of list) {
      if (isFenced('materializeToView', batch, first)) {
        gone.add(batch); // handed back to its reader already
        left = true;
        break;
      }
      // Attempt 1 is the throw already seen: the policy decides whether (and after which wait) to try again.
      const outcome = await attempt(policy, batch, (n) => (n === 1 ? Promise.reject(first) : rowOf(change, batch)));
      if (outcome === undefined) {
        left = true; // ownership ended while waiting: dropped with the other ended batches
        break;
      }
      if (outcome.ok) {
        rows.set(change, outcome.value);
        continue;
      }
      failures.push({ change, error: outcome.error, attempts: outcome.attempts });
      if (!goesOn(policy)) break;
    }
    if (left || failures.length === 0) continue;
    // Skipped or dead-lettered, a change takes the other changes of its LSN with it (halting stops before them).
    const given = goesOn(policy) ? withLsnGroups(batch.changes, failures) : failures;
    for (const failure of given) rows.delete(failure.change);
    // Dead letters are written before the view, so the checkpoint after it passes them only then.
    if (!(await giveUp(policy, 'materializeToView', batch, given, given[0]!))) gone.add(batch);
  }
  return { rows, gone };
}
/**
 * Leaves out the batches `dropped` picks, handing each back to its reader (`tracker.drop`: its credit
 * returns; with a fencing `error`, the ownership ends). Returns the rest.
 */
function dropBatches<T>(batches: readonly ChangeBatch<T>[], dropped: (batch: ChangeBatch<T>) => boolean, error?: Error): readonly ChangeBatch<T>[] {
  const kept: ChangeBatch<T>[] = [];
  for (const batch of batches) {
    if (!dropped(batch)) kept.push(batch);
    else if (batch.origin) batch.origin.tracker.drop(batch.origin.sequence, error);
  }
  return kept.length === batches.length ? batches : kept;
}
