import { asyncScheduler, defer, finalize, type OperatorFunction, type SchedulerLike } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { worthReporting } from '../errors/errorEvent.js';
import { type FailureOptions, giveUp, goesOn, jitterFor, resolveOnFailure, withLsnGroups } from '../failures/failurePolicy.js';
import type { FailureClass } from '../errors/classify.js';
import { InvalidOptionsError, RxfeedError } from '../errors/index.js';
import { type Backoff, backoffMs } from '../internal/backoff.js';
import { logger } from '../internal/log.js';
import { sleep } from '../internal/wait.js';
import type { AnyBatches, DocumentOf } from '../operators/types.js';
import { writeInPartitionOrder } from '../sinks/internal/writeInPartitionOrder.js';

/** What became of one message handed to a broker. @internal */
export type PublishResult =
  | { readonly ok: true; readonly duplicate: boolean }
  /** `notSent`: the publisher did not send it, because `stop` answered true (see {@link BrokerPublisher.publish}). */
  | { readonly ok: false; readonly error: unknown; readonly notSent?: true };

/** The result of a message a publisher did not send because `stop` answered true. @internal */
export function notSent(): PublishResult {
  return { ok: false, error: new Error('not sent: the ownership of its batch ended'), notSent: true };
}

/**
 * A broker connection as a relay sees it. `publish` sends the messages in order without waiting between
 * them (pipelined) and resolves, never rejects, with one result per message once each was confirmed or
 * failed. It asks `stop` before sending each message: once it answers true (the ownership of a batch in the
 * round ended while the publisher waited, for a connection or for flow control), that message and the rest
 * are not sent and fail with `notSent`; a message sent after its lease went to the next owner could reach
 * the broker after the next owner published its document's later changes. @internal
 */
export interface BrokerPublisher<M> {
  readonly description: string;
  publish(messages: readonly M[], stop?: () => boolean): Promise<PublishResult[]>;
  /** What a failure is: `transient` when waiting can cure it (connection lost, timeout, broker refusing for now). */
  classify(error: unknown): FailureClass;
  /** Closes what the publisher opened itself. */
  close(): Promise<void>;
}

/**
 * Counters of a relay, for tests, metrics and the curious. Pass one as `stats` to see them move.
 *
 * @example
 * ```ts
 * const stats = new RelayStats();
 * feed$.pipe(publishToJetStream(js, { subject: (c) => `orders.${c.id}`, stats }), checkpointEvery(100)).subscribe();
 * setInterval(() => console.log(stats), 10_000);
 * ```
 */
export class RelayStats {
  /** Messages the broker confirmed (duplicates it dropped included). */
  confirmed = 0;
  /** Messages the broker confirmed as duplicates of a message id it already held (JetStream de-duplication). */
  duplicates = 0;
  /**
   * Messages sent again after the broker had already confirmed them, because a message before them failed
   * (order is kept by resending from the first failure). Where the broker cannot de-duplicate (AMQP),
   * consumers receive these twice.
   */
  resent = 0;
  /** Publish attempts that failed with a transient error and were retried. */
  retries = 0;
}

/** How long a relay waits between attempts after transient failures. */
export interface RelayBackoff {
  /** First wait, in milliseconds. Default `100`. */
  readonly initialMs?: number;
  /** Upper bound of one wait (jitter of ±20 % included), in milliseconds. Default `30000`. */
  readonly maxMs?: number;
}

/** Options every relay operator takes. */
export interface RelayOptions<T> extends FailureOptions<T> {
  /** How many values (partitions) may publish at once. A positive integer or `Infinity`. Default `4`. */
  readonly concurrency?: number;
  /** Backoff between retries of transient failures (the partition's lease is kept meanwhile). */
  readonly backoff?: RelayBackoff;
  /** Counters to update. Default: none. */
  readonly stats?: RelayStats;
  /** Scheduler the waits run on (virtual time in tests). Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
}

/**
 * A broker refused a publish in a way no retry can fix (bad credentials, a missing stream or exchange, a
 * message too large). It ends the stream; nothing from the failed value on was checkpointed.
 *
 * @example
 * ```ts
 * feed$.pipe(publishToJetStream(js, { subject }), checkpointEvery(100)).subscribe({ error: (e) => e instanceof RelayError && console.error(e.broker, e.message) });
 * ```
 */
export class RelayError extends RxfeedError {
  constructor(
    /** The broker, as `description` names it (never with credentials). */
    readonly broker: string,
    cause: unknown,
  ) {
    super(`publishing to ${broker} failed and cannot be retried: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

/** A change and the batch it came from, as a relay turns it into a message. @internal */
export interface RelayItem<T, M> {
  readonly batch: ChangeBatch<T>;
  readonly change: Change<T>;
  readonly message: M;
}

/**
 * The relay operator the broker entry points share: each value (a batch or an array of batches) is
 * published in pipelined rounds of messages, in feed order (a round ends before a document's second change
 * in it, so that a refused message cannot let its document's next change arrive first), and re-emitted only after the broker
 * confirmed every message of it, so `checkpointEvery` after it never passes an unconfirmed change. Values of
 * one partition are published one after the other, at most `concurrency` at once.
 *
 * A transient failure is retried from the first unconfirmed message (later ones are sent again, so a key's
 * changes keep their order), with capped exponential backoff, for as long as the partition is owned; each
 * failure is reported as an `error` event (kind `infrastructure`, with its running `attempts`, thinned).
 * A batch whose ownership ends meanwhile is handed back unpublished. A permanent failure ends the stream with
 * a {@link RelayError}. `toMessage` is user code: a change it throws for is an item failure (`onFailure`,
 * default halt; skipped or dead-lettered, it takes the other changes of its LSN with it). @internal
 */
export function relay<B extends AnyBatches, M>(
  operator: string,
  connect: () => BrokerPublisher<M>,
  toMessage: (change: Change<DocumentOf<B>>, batch: ChangeBatch<DocumentOf<B>>) => M,
  options: RelayOptions<DocumentOf<B>>,
): OperatorFunction<B, B> {
  const { concurrency = 4, backoff = {}, stats, scheduler } = options;
  if (!(concurrency === Infinity || (Number.isInteger(concurrency) && concurrency > 0))) {
    throw new InvalidOptionsError('concurrency', `must be a positive integer or Infinity (got ${String(concurrency)})`);
  }
  const waits: Backoff = { initialMs: backoff.initialMs ?? 100, maxMs: backoff.maxMs ?? 30_000, jitter: 0.2 };
  if (!(waits.initialMs >= 0 && waits.maxMs >= waits.initialMs)) throw new InvalidOptionsError('backoff', 'needs 0 <= initialMs <= maxMs (milliseconds)');
  const policy = resolveOnFailure(options, scheduler);
  type T = DocumentOf<B>;

  return (source) =>
    defer(() => {
      const publisher = connect();
      const stopped = new AbortController();
      /** Hands batches back to their readers, unpublished; returns the rest. */
      const handBack = (batches: readonly ChangeBatch<T>[], dropped: (b: ChangeBatch<T>) => boolean) =>
        batches.filter((b) => {
          if (!dropped(b)) return true;
          if (b.origin) b.origin.tracker.drop(b.origin.sequence);
          return false;
        });
      const ended = (b: ChangeBatch<T>) => b.origin?.tracker.signal.aborted === true;

      const publishValue = async (value: B, all: readonly ChangeBatch<unknown>[]): Promise<B | undefined> => {
        let batches = handBack(all as readonly ChangeBatch<T>[], ended);
        const items: RelayItem<T, M>[] = [];
        for (const batch of [...batches]) {
          const failures: { change: Change<T>; error: unknown; attempts: number }[] = [];
          const built: RelayItem<T, M>[] = [];
          for (const change of batch.changes) {
            try {
              built.push({ batch, change, message: toMessage(change, batch) });
            } catch (error) {
              failures.push({ change, error, attempts: 1 });
            }
          }
          // Skipped or dead-lettered, a change takes the other changes of its LSN with it.
          const given = failures.length > 0 && goesOn(policy) ? withLsnGroups(batch.changes, failures) : failures;
          if (failures.length > 0 && !(await giveUp(policy, operator, batch, policy.deadLetter ? given : given.slice(0, 1), given[0]!))) {
            batches = batches.filter((b) => b !== batch); // halted: handed back to its reader already
            continue;
          }
          const left = new Set(given.map((f) => f.change));
          items.push(...(left.size === 0 ? built : built.filter((item) => !left.has(item.change))));
        }
        batches = handBack(batches, ended); // a halt ends the partition's ownership: its later batches too

        let pending = items.filter((item) => batches.includes(item.batch));
        let attempts = 0;
        while (pending.length > 0) {
          // One document at most once per round: a broker may refuse a message (a full stream, a nack) and
          // store the next; were that the same document's next change, it would arrive before the one resent.
          const round = distinctDocuments(pending);
          // Nothing is sent once a batch of the round lost its ownership (flow control can hold a round a while).
          const results = await publisher.publish(
            round.map((item) => item.message),
            () => round.some((item) => ended(item.batch)),
          );
          const failed = results.findIndex((r) => !r.ok);
          for (const [i, r] of results.entries()) {
            if (!r.ok) continue;
            if (failed >= 0 && i > failed) {
              if (stats) stats.resent++;
              continue; // confirmed, but sent again after the failure before it
            }
            if (stats) {
              stats.confirmed++;
              if (r.duplicate) stats.duplicates++;
            }
          }
          if (failed < 0) {
            pending = pending.slice(round.length);
            attempts = 0;
            continue;
          }
          pending = pending.slice(failed);
          if ((results[failed] as { notSent?: true }).notSent) {
            // Not a broker failure: the batches whose ownership ended go back to their readers (the next owner
            // publishes them again); the rest are sent in the next round.
            batches = handBack(batches, ended);
            pending = pending.filter((item) => batches.includes(item.batch));
            continue;
          }
          attempts++;
          const error = (results[failed] as { error: unknown }).error;
          const first = pending[0]!.batch;
          const log = logger('relay', { lease: first.partition });
          if (publisher.classify(error) !== 'transient') {
            log('%s: publishing to %s failed for good: %s', operator, publisher.description, (error as Error)?.message);
            throw new RelayError(publisher.description, error);
          }
          if (stats) stats.retries++;
          log('%s: publishing to %s failed (%d in a row), retrying: %s', operator, publisher.description, attempts, (error as Error)?.message);
          if (worthReporting(attempts)) {
            const report = new RxfeedError(`${operator}: publishing to ${publisher.description} failed (retrying, the checkpoint waits): ${(error as Error)?.message ?? String(error)}`, { cause: error });
            first.origin?.tracker.reportError(report, attempts);
          }
          await sleepUnless(backoffMs(waits, Math.min(attempts, 31), jitterFor(first)), scheduler ?? first.origin?.tracker.scheduler ?? asyncScheduler, stopped.signal, first.origin?.tracker.signal);
          if (stopped.signal.aborted) return undefined;
          // Ownership that ended meanwhile: the next owner publishes those batches again.
          batches = handBack(batches, ended);
          pending = pending.filter((item) => batches.includes(item.batch));
        }
        if (batches.length === all.length) return value;
        return (Array.isArray(value) ? batches : undefined) as B | undefined;
      };

      return source.pipe(
        writeInPartitionOrder<B>(publishValue, concurrency),
        finalize(() => {
          stopped.abort();
          void publisher.close().catch((error: unknown) => logger('relay')('%s: closing %s failed: %s', operator, publisher.description, (error as Error).message));
        }),
      );
    });
}

/**
 * The longest prefix of `pending` with no two changes of one document: what one pipelined round may send
 * without a refused message letting a later change of its document arrive first.
 */
function distinctDocuments<I extends { readonly change: Change<unknown> }>(pending: readonly I[]): readonly I[] {
  const seen = new Set<string>();
  for (const [i, item] of pending.entries()) {
    const key = documentKey(item.change);
    if (seen.has(key)) return pending.slice(0, i);
    seen.add(key);
  }
  return pending;
}

/** A document's identity along its lineage: its partition key and id. */
function documentKey(change: Change<unknown>): string {
  return `${change.partitionKey === undefined ? '' : JSON.stringify(change.partitionKey)}:${change.id}`;
}

/** Sleeps `ms`, or until either signal aborts. */
async function sleepUnless(ms: number, scheduler: SchedulerLike, stopped: AbortSignal, owned: AbortSignal | undefined): Promise<void> {
  if (!owned) return sleep(ms, scheduler, stopped);
  const either = new AbortController();
  const abort = () => either.abort();
  stopped.addEventListener('abort', abort);
  owned.addEventListener('abort', abort);
  if (stopped.aborted || owned.aborted) abort();
  try {
    await sleep(ms, scheduler, either.signal);
  } finally {
    stopped.removeEventListener('abort', abort);
    owned.removeEventListener('abort', abort);
  }
}

/** The default message body of a change (shared by the broker relays). @internal */
export function changeEnvelope(change: Change<unknown>, batch: ChangeBatch<unknown>): string {
  return JSON.stringify({
    id: change.id,
    operation: change.operation,
    lsn: change.lsn,
    timestampMs: change.timestampMs,
    ...(change.partitionKey !== undefined ? { partitionKey: change.partitionKey } : {}),
    partition: batch.partition,
    ...(change.document !== undefined ? { document: change.document } : {}),
  });
}

/**
 * The message body function of a relay's options: `payload` (checked to be a function), or by default
 * {@link changeEnvelope}. @internal
 */
export function payloadOf<T, P>(payload: ((change: Change<T>, batch: ChangeBatch<T>) => P) | undefined): (change: Change<T>, batch: ChangeBatch<T>) => P | string {
  if (payload !== undefined && typeof payload !== 'function') throw new InvalidOptionsError('payload', 'give a function from a change to its message body');
  return payload ?? changeEnvelope;
}

/**
 * The de-duplication id of a change, the same whichever partition of its lineage reads it (a parent, a
 * split child, a merged partition): the document's partition key and id, and its LSN, which a document
 * keeps along its lineage. A replay after a crash or a split publishes the same ids again. @internal
 */
export function messageId(change: Change<unknown>): string {
  return `${change.lsn}:${documentKey(change)}`;
}
