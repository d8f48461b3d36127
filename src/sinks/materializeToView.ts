import { defer, type OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { HandlerError, InvalidOptionsError } from '../errors/index.js';
import { logger } from '../internal/log.js';
import type { AnyBatches, DocumentOf } from '../operators/types.js';
import { type FailureOptions, giveUp, resolveOnFailure } from '../deadletter/failurePolicy.js';
import type { ViewChange, ViewCommit, ViewMode, ViewStore, ViewWrite } from './ViewStore.js';
import { ViewFencedError } from '../errors/ViewFencedError.js';
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
  /** How many writes (partitions) may be in flight at once. A positive integer or `Infinity`. Default `4`. */
  readonly concurrency?: number;
  /** Guard policy; see {@link ViewMode} for when to use which. Default `'guarded'`. */
  readonly mode?: ViewMode;
  /**
   * When `project`, `key` or `isDeleted` throws for a change: `'report'` (default) leaves the change out
   * (its row keeps its previous version) and reports a `HandlerError` to the events stream; `'throw'`
   * fails the stream with it.
   */
  readonly onError?: 'report' | 'throw';
}

const MODES: readonly ViewMode[] = ['guarded', 'exactlyOnce'];

/** Checks the options shared by the sink operators; throws with a message saying what to fix. */
export function checkSinkOptions(options: {
  concurrency?: number;
  mode?: ViewMode;
  onError?: string;
}): { concurrency: number; mode: ViewMode; onError: 'report' | 'throw' } {
  const { concurrency = 4, mode = 'guarded', onError = 'report' } = options;
  if (!(concurrency === Infinity || (Number.isInteger(concurrency) && concurrency > 0))) {
    throw new InvalidOptionsError('concurrency', `must be a positive integer or Infinity (got ${String(concurrency)})`);
  }
  if (!MODES.includes(mode)) throw new InvalidOptionsError('mode', `must be 'guarded' or 'exactlyOnce' (got ${String(mode)})`);
  if (onError !== 'report' && onError !== 'throw') {
    throw new InvalidOptionsError('onError', `must be 'report' or 'throw' (got ${String(onError)})`);
  }
  return { concurrency, mode, onError };
}

/**
 * Turns batches into one view write: a row (or a removal) per change, and each partition's last position
 * and highest epoch. Changes user code fails on are reported (or thrown) and left out.
 *
 * @internal
 */
export function toViewWrite<T, R>(
  batches: readonly ChangeBatch<T>[],
  mode: ViewMode,
  onError: 'report' | 'throw',
  project: (change: Change<T>) => R | null | undefined,
  key: (change: Change<T>) => string,
  isDeleted: ((change: Change<T>) => boolean) | undefined,
  operator: string,
  /** When given, a change user code fails on is handed here (and left out) instead of reported or thrown. */
  failed?: (batch: ChangeBatch<T>, change: Change<T>, cause: unknown) => void,
): ViewWrite<R> {
  const changes: ViewChange<R>[] = [];
  const commits = new Map<string, ViewCommit>();
  for (const batch of batches) {
    for (const change of batch.changes) {
      try {
        const k = key(change);
        if (typeof k !== 'string' || k === '') throw new TypeError(`key must be a non-empty string (got ${String(k)})`);
        const removed = change.operation === 'delete' || change.timeToLiveExpired === true || isDeleted?.(change) === true;
        const row = removed ? undefined : (project(change) ?? undefined); // null removes too: a SQL row cannot hold it
        changes.push({ key: k, row, lsn: change.lsn, timestampMs: change.timestampMs, partition: batch.partition });
      } catch (cause) {
        if (failed) {
          failed(batch, change, cause);
          continue;
        }
        const error = new HandlerError(batch.partition, change as Change<unknown>, cause);
        if (onError === 'throw') throw error;
        logger('view', { lease: batch.partition })('%s: %s (reported, change left out)', operator, error.message);
        batch.origin?.tracker.reportError(error);
      }
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
 * With `onFailure` (see {@link OnFailure}), a change that `project`, `key` or `isDeleted` throws for is
 * dead-lettered before the write (and left out of it), or halts its partition (its batches are left out of
 * the write, so an exactly-once view never records a position past the change). These are pure functions,
 * so they are not retried: the letter says `attempts: 1`. A failing view write is not an item failure.
 *
 * A write rejected with `ViewFencedError` (another host owns the partition now) is reported as an `error`
 * event, like a fenced checkpoint: that partition's batches are dropped (never emitted, so never
 * checkpointed; the new owner reads them again; their read credit is returned and this host's ownership of
 * the lease ends) and the rest of the value is written and emitted without them. Batches whose ownership
 * ended before their write started are dropped the same way, unwritten. Any other failed write errors the
 * stream (add `retry` around the pipeline to restart it).
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
  const { concurrency, mode, onError } = checkSinkOptions(options);
  const policy = resolveOnFailure(options.onFailure);
  const key = options.key ?? ((change: Change<DocumentOf<B>>) => change.id);
  return (source) =>
    defer(() => {
      /** Highest epoch this subscription has written per partition: an empty guarded write above it still writes. */
      const written = new Map<string, number>();
      return source.pipe(
        writeInPartitionOrder<B>(async (value, all) => {
          // Batches of an ownership that ended are not written: the next owner reads them again.
          let batches = dropBatches(all as readonly ChangeBatch<DocumentOf<B>>[], (b) => b.origin?.tracker.signal.aborted === true);
          /** Changes given up on (dead-lettered): left out of every later round. */
          const settled = new Set<Change<DocumentOf<B>>>();
          // Each round drops the partitions of one fencing rejection or failure policy, so this ends.
          for (;;) {
            if (batches.length === 0) return undefined;
            const failures = new Map<ChangeBatch<DocumentOf<B>>, { change: Change<DocumentOf<B>>; error: unknown; attempts: number }[]>();
            const collect = policy
              ? (batch: ChangeBatch<DocumentOf<B>>, change: Change<DocumentOf<B>>, error: unknown) => {
                  if (settled.has(change)) return;
                  const list = failures.get(batch) ?? [];
                  list.push({ change, error, attempts: 1 });
                  failures.set(batch, list);
                }
              : undefined;
            const write = toViewWrite(batches, mode, onError, options.project, key, options.isDeleted, 'materializeToView', collect);
            if (policy && failures.size > 0) {
              // Dead letters are written before the view, so the checkpoint after it passes them only then.
              const gone = new Set<ChangeBatch<DocumentOf<B>>>();
              for (const [batch, list] of failures) {
                const wrote = await giveUp(policy, 'materializeToView', batch, policy.deadLetter ? list : list.slice(0, 1), list[0]!);
                if (wrote) for (const f of list) settled.add(f.change);
                else gone.add(batch); // halted or dropped: handed back to its reader already
              }
              // A halt ends the partition's ownership: its later batches in this value are not written either.
              batches = dropBatches(
                batches.filter((b) => !gone.has(b)),
                (b) => b.origin?.tracker.signal.aborted === true,
              );
              continue;
            }
            // Guarded views have nothing to do for empty writes, unless the epoch rises (fencing);
            // exactly-once views still move their positions.
            const raises = write.partitions.some((p) => p.epoch > (written.get(p.partition) ?? -Infinity));
            if (write.changes.length === 0 && mode === 'guarded' && !raises) break;
            try {
              await view.write(write);
              for (const p of write.partitions) written.set(p.partition, Math.max(p.epoch, written.get(p.partition) ?? p.epoch));
              break;
            } catch (error) {
              const lease = write.partitions.map((p) => p.partition).join(',');
              logger('view', { lease })('materializeToView: write to %s failed: %s', view.description, (error as Error).message);
              if (!(error instanceof ViewFencedError)) throw error;
              // Another host owns the partition now: its batches must not reach the checkpoint (the new owner
              // reads them again); the other partitions of the value are written without them.
              batches.find((b) => b.partition === error.leaseToken)?.origin?.tracker.reportError(error);
              batches = dropBatches(batches, (b) => b.partition === error.leaseToken, error);
            }
          }
          if (batches.length === all.length) return value;
          return (Array.isArray(value) ? batches : undefined) as B | undefined;
        }, concurrency),
      );
    });
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
