import { AsyncSink } from 'ix/asynciterable';
import { ignoreElements, lastValueFrom, Subject, type Observable, type Subscription } from 'rxjs';
import { asBatches, type BatchOrBatches, type ChangeBatch } from '../core/ChangeBatch.js';
import type { FeedEvent } from '../core/events.js';
import { RxfeedError } from '../errors/index.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../feed/createChangeFeed.js';
import { type ChangeFeedOptions, DEFAULTS } from '../feed/options.js';
import { logger } from '../internal/log.js';
import { checkpointEvery, type CheckpointEveryOptions } from '../operators/checkpointEvery.js';

/** When {@link ChangeFeedIterable.checkpoint} persists positions. */
export interface CheckpointPolicy {
  /** Persist a partition's position after this many of its changes were checkpointed. */
  readonly count?: number;
  /** Persist checkpointed positions at most this long after `checkpoint()`, in ms. */
  readonly ms?: number;
}

/** Options of {@link changeFeedIterable}: those of `createChangeFeed` plus the pull-specific ones. */
export interface ChangeFeedIterableOptions<T> extends ChangeFeedOptions<T> {
  /**
   * When checkpointed positions are written to the leases: every `count` changes (per partition) or `ms`
   * milliseconds, whichever comes first, and always when the loop ends. A number is a count.
   * Default `{ count: 1000, ms: 5000 }`.
   */
  readonly checkpoint?: number | CheckpointPolicy;
  /** Ends the loop when aborted, as `break` would: a waiting `next()` resolves as done at once. */
  readonly signal?: AbortSignal;
}

/**
 * A change feed to read with `for await`: batches of every partition this host owns, each to be passed to
 * {@link ChangeFeedIterable.checkpoint} once its work is done. Iterate it once.
 */
export interface ChangeFeedIterable<T> extends AsyncIterable<ChangeBatch<T>> {
  /**
   * Marks a batch (or an array of batches) as done: it, and every earlier batch of its partition. Returns
   * its read credit at once; the position is written per the `checkpoint` policy and when the loop ends.
   * Rejects once the loop has ended (the position would be lost: it is read again next time instead).
   */
  checkpoint(batch: BatchOrBatches<T>): Promise<void>;
  /** Lease, checkpoint, error and stall events of the processor. */
  readonly events$: Observable<FeedEvent>;
  /** This host's name (the lease owner). */
  readonly owner: string;
  /**
   * Stops from outside the loop (a signal handler): no new reads; batches already read are still delivered
   * until checkpointed (bounded by `drainTimeoutMs`), then the loop ends. Inside the loop, `break` instead.
   * Resolves when the processor has stopped and the final checkpoints are written.
   */
  stop(): Promise<void>;
}

/**
 * The change feed as an `AsyncIterable` of batches, for code that prefers pulling to piping.
 *
 * In short: `for await (const batch of feed) { await work(batch); await feed.checkpoint(batch); }` — the
 * same leases, credit and checkpoints as {@link changeFeed}, with the checkpoint as an explicit call.
 *
 * The loop is bounded by the processor's credit (`maxInFlightChanges`): reading pauses while that many
 * changes are read but not checkpointed, so a batch you never checkpoint eventually holds its partition
 * back (a `stall` event says so). Leaving the loop (`break`, `return`, a thrown error, or `signal`) writes
 * the checkpointed positions, stops the processor and releases the leases before the loop statement
 * completes; batches read but not checkpointed are read again by the next owner (at-least-once).
 *
 * @example
 * ```ts
 * import { changeFeedIterable } from 'rxfeed';
 * const feed = changeFeedIterable<Order>({ source, leases, instanceName: 'host-1', checkpoint: { ms: 5000 } });
 * for await (const batch of feed) { await save(batch.changes); await feed.checkpoint(batch); }
 * ```
 *
 * @see {@link changeFeed} for the RxJS form.
 * @see {@link checkpointEvery}, which `checkpoint()` feeds.
 *
 * @param options `createChangeFeed` options, plus `checkpoint` (default `{ count: 1000, ms: 5000 }`) and
 *   `signal`. Invalid options throw `InvalidOptionsError` here.
 * @returns A single-use async iterable with `checkpoint()`, `events$`, `owner` and `stop()`.
 */
export function changeFeedIterable<T>(options: ChangeFeedIterableOptions<T>): ChangeFeedIterable<T> {
  const { checkpoint = DEFAULTS.checkpoint, signal, ...feedOptions } = options;
  const policy: CheckpointEveryOptions =
    typeof checkpoint === 'number'
      ? { count: checkpoint, scheduler: feedOptions.scheduler }
      : { ...checkpoint, scheduler: feedOptions.scheduler };
  // Validates the policy now (InvalidOptionsError), not at the first checkpoint.
  checkpointEvery(policy);
  return iterateProcessor(createChangeFeed<T>(feedOptions), policy, signal);
}

/**
 * The pull form over any processor (the seam tests use to drive it with a stub).
 *
 * @internal
 */
export function iterateProcessor<T>(
  processor: Pick<ChangeFeedProcessor<T>, 'changes$' | 'events$' | 'owner' | 'stop'>,
  policy: CheckpointEveryOptions,
  signal?: AbortSignal,
): ChangeFeedIterable<T> {
  const log = logger('iterable', { owner: processor.owner });
  const acks = new Subject<ChangeBatch<T>>();
  const sink = new AsyncSink<ChangeBatch<T>>();
  let subscription: Subscription | undefined;
  let iterated = false;
  let ended = false; // no more batches for the loop (left, aborted, or the feed completed/failed)
  let closing: Promise<void> | undefined;

  // checkpointEvery completes only after its final writes; the pull loop waits for that before finishing.
  const checkpointed = lastValueFrom(acks.pipe(checkpointEvery<ChangeBatch<T>>(policy), ignoreElements()), {
    defaultValue: undefined,
  });

  /** Wakes a waiting `next()` and makes every later one report done. */
  const endSink = () => {
    if (ended) return;
    ended = true;
    sink.end();
  };

  /** Leaves the feed: stop reading, write what was checkpointed, stop the processor. Idempotent. */
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      endSink();
      signal?.removeEventListener('abort', onAbort);
      // Unsubscribe first: batches read but never handed out must not hold the processor's drain.
      subscription?.unsubscribe();
      acks.complete();
      await checkpointed;
      await processor.stop();
      log('closed');
    })());

  const onAbort = () => {
    log('aborted');
    endSink();
  };

  const iterator: AsyncIterator<ChangeBatch<T>> = {
    async next() {
      if (!ended) {
        try {
          const result = await sink.next();
          if (!result.done && !ended) return result;
        } catch (error) {
          await close();
          throw error;
        }
      }
      await close();
      return { done: true, value: undefined };
    },
    async return() {
      await close();
      return { done: true, value: undefined };
    },
  };

  return {
    owner: processor.owner,
    events$: processor.events$,
    checkpoint(value) {
      if (closing) {
        return Promise.reject(new RxfeedError('checkpoint() after the loop ended: the batch will be read again'));
      }
      for (const batch of asBatches(value)) acks.next(batch);
      return Promise.resolve();
    },
    stop: async () => {
      // Graceful: the processor drains (waits for checkpoints of what was read) and completes the feed.
      await processor.stop();
      await close();
    },
    [Symbol.asyncIterator]() {
      if (iterated) throw new RxfeedError('a change feed iterable can be iterated only once');
      iterated = true;
      if (signal?.aborted) {
        onAbort();
      } else {
        signal?.addEventListener('abort', onAbort, { once: true });
        subscription = processor.changes$.subscribe({
          next: (batch) => {
            if (!ended) sink.write(batch);
          },
          error: (error: unknown) => {
            log('feed failed: %s', error instanceof Error ? error.message : String(error));
            if (!ended) sink.error(error);
          },
          complete: () => {
            // Batches still queued are delivered first: AsyncSink hands them out before reporting done.
            if (!ended) sink.end();
          },
        });
      }
      return iterator;
    },
  };
}
