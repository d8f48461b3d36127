import { asyncScheduler, type OperatorFunction, type SchedulerAction, type SchedulerLike } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { InvalidOptionsError } from '../errors/index.js';
import { positiveMs } from '../options/validate.js';
import { logger } from '../internal/log.js';
import { type BrokerPublisher, messageId, notSent, payloadOf, type PublishResult, relay, type RelayOptions } from '../relay/relay.js';
import type { AnyBatches, DocumentOf } from '../operators/types.js';
import { importOptional } from '../internal/importOptional.js';
import { LazyConnection } from '../internal/lazyConnection.js';
import type { FailureClass } from '../errors/classify.js';

/** The publish options rxfeed sets on every message. */
export interface AmqpPublishOptions {
  /** Always `true`: the broker writes the message to disk. */
  readonly persistent: boolean;
  /** The change's id (document partition key, id and LSN): the same for every resend, for consumers to de-duplicate. */
  readonly messageId: string;
  /** `application/json` for the default payload. */
  readonly contentType?: string;
  /** When the change was written to the source, in seconds since the epoch. */
  readonly timestamp: number;
  /** `x-rxfeed-lsn` (the change's LSN) and `x-rxfeed-partition` (the lease token that read it). */
  readonly headers: Record<string, unknown>;
}

/** The part of an amqplib confirm channel the relay uses. */
export interface AmqpConfirmChannelLike {
  /** Sends one message; `callback` runs on the broker's confirm (an error for a nack); `false` means wait for `drain`. */
  publish(exchange: string, routingKey: string, content: Buffer, options: AmqpPublishOptions, callback: (error: unknown) => void): boolean;
  /** `drain`: the channel takes writes again; `close`: the channel closed. */
  once(event: 'drain' | 'close', listener: () => void): unknown;
  /** The channel failed (it closes after). */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** The channel closed. */
  on(event: 'close', listener: () => void): unknown;
  /** Closes the channel. */
  close(): Promise<void>;
}

/** The part of an amqplib connection (`ChannelModel`) the relay uses. */
export interface AmqpConnectionLike {
  /** Opens a channel in confirm mode. */
  createConfirmChannel(): Promise<AmqpConfirmChannelLike>;
  /** The connection failed (it closes after). */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** The connection closed. */
  on(event: 'close', listener: () => void): unknown;
  /** Closes the connection. */
  close(): Promise<void>;
}

/**
 * Where to publish: an AMQP URL (the relay connects with amqplib, and reconnects after a drop), or a function
 * that opens a connection (called again after a drop; the relay closes what it returns).
 */
export type AmqpTarget =
  | string
  | {
      /** Opens a connection, e.g. `() => amqplib.connect(url)`; called again after a drop. */
      readonly connect: () => Promise<AmqpConnectionLike>;
    };

/** Options of {@link publishToAmqp}. */
export interface PublishToAmqpOptions<T> extends RelayOptions<T> {
  /** The exchange to publish to (declared by you; `''` is the default exchange). */
  readonly exchange: string;
  /** The routing key of a change's message, e.g. a function returning `order.` followed by the change's operation. */
  readonly routingKey: (change: Change<T>) => string;
  /** The message body. Default: JSON of `{ id, operation, lsn, timestampMs, partitionKey, partition, document }`. */
  readonly payload?: (change: Change<T>, batch: ChangeBatch<T>) => Buffer | string;
  /**
   * How long the broker may confirm nothing while messages wait for confirms, in milliseconds, before they are
   * sent again (on a new channel). Default `30000`.
   */
  readonly confirmTimeoutMs?: number;
}

interface AmqpMessage {
  readonly routingKey: string;
  readonly content: Buffer;
  readonly options: AmqpPublishOptions;
}

const PERMANENT_CODES = new Set([403, 404, 406, 530, 540]);
const TRANSIENT_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/**
 * What an AMQP publish failure is, in rxfeed's failure vocabulary: `transient` when a retry can cure it (a lost
 * connection, a nack, no confirm in time, a broker restart), else `permanent` (access refused, a missing
 * exchange, a precondition failed): a relay ends with a `RelayError`. @internal
 */
export function classifyAmqpError(error: unknown): FailureClass {
  const { name, message = '', code } = (error ?? {}) as { name?: string; message?: string; code?: unknown };
  if (typeof code === 'number' && PERMANENT_CODES.has(code)) return 'permanent';
  if (/ACCESS_REFUSED|NOT_FOUND|PRECONDITION_FAILED|NOT_ALLOWED|ACCESS-REFUSED|NOT-FOUND/.test(message)) return 'permanent';
  if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return 'transient';
  // IllegalOperationError: the channel or connection closed under a publish. 320: CONNECTION_FORCED (a restart).
  if (name === 'TimeoutError' || name === 'IllegalOperationError' || code === 320) return 'transient';
  return /nack|closed|closing|socket|unexpected close|connection_forced|heartbeat|timed? ?out|ECONNRE/i.test(message) ? 'transient' : 'permanent';
}

class AmqpPublisher implements BrokerPublisher<AmqpMessage> {
  readonly description: string;
  readonly #exchange: string;
  readonly #timeoutMs: number;
  readonly #scheduler: SchedulerLike;
  readonly #connection: LazyConnection<AmqpConnectionLike>;
  /** The confirm channel, opened (with the connection when there is none) again after a drop. */
  readonly #channel = new LazyConnection(() => this.#openChannel());
  /** Why the current channel (or connection) closed: the broker's reason, reported for each unconfirmed message. */
  #closedBy: Error | undefined;
  readonly #pending = new Set<(error: unknown) => void>();
  #closed = false;

  constructor(target: AmqpTarget, exchange: string, timeoutMs: number, scheduler: SchedulerLike) {
    this.#exchange = exchange;
    this.#scheduler = scheduler;
    this.#timeoutMs = timeoutMs;
    let open: () => Promise<AmqpConnectionLike>;
    if (typeof target === 'string') {
      const url = new URL(target);
      this.description = `AMQP exchange '${exchange}' at ${url.hostname}:${url.port || 5672}`;
      open = async () => {
        const amqp = await importOptional('amqplib', () => import('amqplib'), 'publishToAmqp');
        return (await amqp.connect(target)) as unknown as AmqpConnectionLike;
      };
    } else {
      this.description = `AMQP exchange '${exchange}'`;
      open = target.connect;
    }
    this.#connection = new LazyConnection(() =>
      open().then((connection) => {
        const forget = (error?: Error) => {
          if (error) this.#closedBy = error;
          this.#connection.forget();
          this.#channel.forget();
        };
        connection.on('error', forget);
        connection.on('close', () => forget());
        return connection;
      }),
    );
  }

  /** Opens a confirm channel, on the connection (opened when there is none); a closed channel fails what it left unconfirmed. */
  async #openChannel(): Promise<AmqpConfirmChannelLike> {
    const connection = await this.#connection.get();
    const channel = await connection.createConfirmChannel();
    this.#closedBy = undefined;
    channel.on('error', (error) => {
      this.#closedBy = error;
    });
    channel.on('close', () => {
      this.#channel.forget();
      const reason = this.#closedBy ?? new Error('AMQP channel closed');
      for (const fail of [...this.#pending]) fail(reason);
    });
    return channel;
  }

  async publish(messages: readonly AmqpMessage[], stop?: () => boolean): Promise<PublishResult[]> {
    let channel: AmqpConfirmChannelLike;
    try {
      channel = await this.#channel.get();
    } catch (error) {
      return messages.map(() => ({ ok: false, error }));
    }
    if (stop?.()) return messages.map(() => notSent());
    const results: PublishResult[] = new Array<PublishResult>(messages.length);
    let outstanding = messages.length;
    let confirmed = 0;
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const settle = (i: number, result: PublishResult) => {
      if (results[i] !== undefined) return;
      results[i] = result;
      if (result.ok) confirmed++;
      if (--outstanding === 0) finish();
    };
    const failRest = (error: unknown) => {
      for (let i = 0; i < messages.length; i++) settle(i, { ok: false, error });
    };
    this.#pending.add(failRest);
    // One watch per round, not a timer per message: it fails what is unconfirmed once no confirm came for a while.
    const timeoutMs = this.#timeoutMs;
    let seen = 0;
    const watch = this.#scheduler.schedule(function (this: SchedulerAction<unknown>) {
      if (confirmed === seen) {
        const error = new Error(`no confirm from the broker for ${timeoutMs} ms`);
        error.name = 'TimeoutError';
        return failRest(error);
      }
      seen = confirmed;
      this.schedule(undefined, timeoutMs);
    }, timeoutMs);
    for (const [i, m] of messages.entries()) {
      if (results[i] !== undefined) continue; // the round failed already (the channel closed, no confirms)
      if (i > 0 && stop?.()) {
        // Ownership ended while flow control held the round: what was sent lands, the rest is not sent.
        for (let j = i; j < messages.length; j++) settle(j, notSent());
        break;
      }
      let ready = true;
      try {
        ready = channel.publish(this.#exchange, m.routingKey, m.content, m.options, (error) =>
          // A channel the broker closed calls back with a bare "channel closed": report the broker's reason.
          settle(i, error ? { ok: false, error: this.#closedBy ?? (error instanceof Error ? error : new Error('message nacked by the broker')) } : { ok: true, duplicate: false }),
        );
      } catch (error) {
        failRest(error); // the channel closed under us (IllegalOperationError)
        break;
      }
      // The socket's buffer is full: wait for it to drain (or the channel to close) before sending more.
      if (!ready && i < messages.length - 1) {
        await new Promise<void>((resolve) => {
          channel.once('drain', resolve);
          channel.once('close', resolve);
        });
      }
    }
    if (messages.length > 0) await done;
    watch.unsubscribe();
    this.#pending.delete(failRest);
    const failed = results.find((r) => !r.ok);
    if (failed && /timed? ?out|no confirm/i.test(String((failed.error as Error)?.message))) {
      // A channel that stopped confirming is dropped; the next attempt opens a new one.
      logger('relay')('%s: dropping a channel that stopped confirming', this.description);
      this.#channel.forget();
      void channel.close().catch(() => undefined);
    }
    return results;
  }

  classify(error: unknown): FailureClass {
    return this.#closed ? 'permanent' : classifyAmqpError(error);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connection = this.#connection.take();
    this.#channel.forget();
    await (await connection?.catch(() => undefined))?.close();
  }
}

/**
 * Relays each change to a RabbitMQ (AMQP 0-9-1) exchange as a persistent message, with publisher confirms: a
 * batch reaches the checkpoint only after the broker confirmed every message of it. Each message carries a
 * `messageId` made of the document's partition key, id and LSN (the same whichever partition of the lineage
 * reads the change) and the headers `x-rxfeed-lsn` and `x-rxfeed-partition`: AMQP does not de-duplicate, so
 * a replay after a crash delivers the changes published after the last checkpoint again, and consumers
 * de-duplicate by `messageId` (or keep the highest LSN per key).
 *
 * Order: a partition's batches are published one after the other, in pipelined rounds in feed order (a
 * round holds at most one change of a document, so a message refused while the next one is stored cannot
 * put a document's changes out of order);
 * after a failure the round resumes at the first unconfirmed message (later ones are sent again, counted in
 * `stats.resent`), so one document's changes reach the exchange in LSN order. Nothing more of a round is
 * sent once its lease is let go (a drain that timed out while the broker blocked publishers); what was sent
 * before lands when the broker reads again, possibly after the next owner's messages: a `drainTimeoutMs`
 * longer than the broker holds publishers keeps those in order too.
 *
 * Failures: a dropped connection (reconnected), a nack (a queue full with `reject-publish`), no confirm within
 * `confirmTimeoutMs`, and the broker restarting are retried with capped backoff while the partition is
 * owned, reported as `error` events; flow control (the broker blocking publishers) is waited out. A missing
 * exchange, refused credentials or access end the stream with a `RelayError`.
 *
 * @example
 * ```ts
 * import { changeFeed, checkpointEvery } from 'rxfeed';
 * import { publishToAmqp } from 'rxfeed/amqp';
 * changeFeed<Order>(options).pipe(
 *   publishToAmqp('amqp://guest:guest@127.0.0.1:5672', { exchange: 'orders', routingKey: (c) => `order.${c.document?.status}` }),
 *   checkpointEvery(500),
 * ).subscribe();
 * ```
 */
export function publishToAmqp<B extends AnyBatches>(target: AmqpTarget, options: PublishToAmqpOptions<DocumentOf<B>>): OperatorFunction<B, B> {
  if (!(typeof target === 'string' || typeof (target as { connect?: unknown } | undefined)?.connect === 'function')) {
    throw new InvalidOptionsError('target', 'give an AMQP URL (amqp://user:pass@host:5672) or { connect: () => amqplib.connect(url) }');
  }
  if (typeof target === 'string' && !/^amqps?:\/\//.test(target)) throw new InvalidOptionsError('target', 'an AMQP URL starts with amqp:// or amqps://');
  if (typeof options?.exchange !== 'string') throw new InvalidOptionsError('exchange', "give the exchange's name ('' for the default exchange)");
  if (typeof options.routingKey !== 'function') throw new InvalidOptionsError('routingKey', 'give a function from a change to its routing key');
  const payload = payloadOf(options.payload);
  const timeoutMs = options.confirmTimeoutMs ?? 30_000;
  positiveMs('confirmTimeoutMs', timeoutMs);
  return relay<B, AmqpMessage>(
    'publishToAmqp',
    () => new AmqpPublisher(target, options.exchange, timeoutMs, options.scheduler ?? asyncScheduler),
    (change, batch) => {
      const routingKey = options.routingKey(change);
      if (typeof routingKey !== 'string') throw new TypeError(`routingKey must be a string (got ${String(routingKey)})`);
      const body = payload(change, batch);
      return {
        routingKey,
        content: typeof body === 'string' ? Buffer.from(body) : body,
        options: {
          persistent: true,
          messageId: messageId(change),
          ...(options.payload ? {} : { contentType: 'application/json' }),
          timestamp: Math.floor(change.timestampMs / 1000),
          headers: { 'x-rxfeed-lsn': change.lsn, 'x-rxfeed-partition': batch.partition },
        },
      };
    },
    options,
  );
}
