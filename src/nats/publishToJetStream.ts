import type { OperatorFunction } from 'rxjs';
import type { Change } from '../core/Change.js';
import type { ChangeBatch } from '../core/ChangeBatch.js';
import { InvalidOptionsError } from '../errors/index.js';
import { positiveMs } from '../options/validate.js';
import { importOptional } from '../internal/importOptional.js';
import { LazyConnection } from '../internal/lazyConnection.js';
import type { AnyBatches, DocumentOf } from '../operators/types.js';
import { type BrokerPublisher, messageId, notSent, payloadOf, type PublishResult, relay, type RelayOptions } from '../relay/relay.js';
import type { FailureClass } from '../errors/classify.js';

/** What a JetStream publish resolves to (the fields rxfeed reads of `PubAck`). */
export interface JetStreamAckLike {
  /** The stream that stored the message. */
  readonly stream: string;
  /** Its sequence number in the stream. */
  readonly seq: number;
  /** True when the stream already held a message with this id (within its `duplicate_window`): not stored again. */
  readonly duplicate: boolean;
}

/** The part of a JetStream client (`jetstream(nc)` of `@nats-io/jetstream`) the relay uses. */
export interface JetStreamClientLike {
  /** Publishes one message; resolves with the stream's acknowledgement (`msgID` de-duplicates within the stream's window). */
  publish(subject: string, payload?: Uint8Array | string, options?: { msgID?: string; timeout?: number }): Promise<JetStreamAckLike>;
}

/** Where to publish: a JetStream client you opened (and close), or servers for the relay to connect to. */
export type JetStreamTarget = JetStreamClientLike | { readonly servers: string | readonly string[] };

/** Options of {@link publishToJetStream}. */
export interface PublishToJetStreamOptions<T> extends RelayOptions<T> {
  /** The subject of a change's message, e.g. a function returning `orders.` followed by the customer of the change's document. A stream must capture it. */
  readonly subject: (change: Change<T>) => string;
  /**
   * The message body. Default: JSON of `{ id, operation, lsn, timestampMs, partitionKey, partition, document }`
   * (`partition` is the lease token; the LSN lets consumers keep the newest version of a key).
   */
  readonly payload?: (change: Change<T>, batch: ChangeBatch<T>) => Uint8Array | string;
  /** How long to wait for JetStream's acknowledgement of one message, in milliseconds. Default `5000`. */
  readonly ackTimeoutMs?: number;
}

interface NatsMessage {
  readonly subject: string;
  readonly payload: Uint8Array | string;
  readonly msgID: string;
}

/** Errors waiting can cure: no acknowledgement in time (a dropped connection, a slow server), a full stream. */
const TRANSIENT_NAMES = new Set(['TimeoutError', 'RequestError', 'ConnectionError', 'DrainingConnectionError', 'errors.ConnectionError']);
const FULL_STREAM = /maximum (messages|bytes|messages per subject) exceeded|insufficient resources|resource limits exceeded|no suitable peers|stream offline/i;

/**
 * What a JetStream publish failure is, in rxfeed's failure vocabulary: `transient` when a retry can cure it (no
 * acknowledgement in time, a dropped connection, a full stream), else `permanent` (a missing stream, a refused
 * subject, a message too large): a relay ends with a `RelayError`. @internal
 */
export function classifyNatsError(error: unknown): FailureClass {
  const { name, message, code } = (error ?? {}) as { name?: string; message?: string; code?: unknown };
  if (name !== undefined && TRANSIENT_NAMES.has(name)) return 'transient';
  if (typeof message === 'string' && (FULL_STREAM.test(message) || /timeout|timed out|disconnect/i.test(message))) return 'transient';
  return code === 'TIMEOUT' || code === 'ECONNRESET' || code === 'ECONNREFUSED' ? 'transient' : 'permanent';
}

class JetStreamPublisher implements BrokerPublisher<NatsMessage> {
  readonly description: string;
  readonly #timeout: number;
  /** The JetStream client (and how to close it): the one the user passed, or one the relay connects. */
  readonly #client: LazyConnection<{ js: JetStreamClientLike; close: () => Promise<void> }>;

  constructor(target: JetStreamTarget, timeout: number) {
    this.#timeout = timeout;
    if ('publish' in target) {
      this.description = 'JetStream';
      this.#client = new LazyConnection(async () => ({ js: target, close: async () => undefined }));
      return;
    }
    const servers = typeof target.servers === 'string' ? [target.servers] : [...target.servers];
    this.description = `JetStream at ${servers.map((s) => s.replace(/\/\/[^@/]*@/, '//')).join(',')}`;
    // A failed first connection is tried again at the next publish.
    this.#client = new LazyConnection(async () => {
      const [{ connect }, { jetstream }] = await Promise.all([
        importOptional('@nats-io/transport-node', () => import('@nats-io/transport-node'), 'publishToJetStream({ servers })'),
        importOptional('@nats-io/jetstream', () => import('@nats-io/jetstream'), 'publishToJetStream'),
      ]);
      // Once connected, the client reconnects by itself (publishes meanwhile time out and are retried).
      const nc = await connect({ servers, maxReconnectAttempts: -1 });
      return { js: jetstream(nc) as unknown as JetStreamClientLike, close: () => nc.drain().catch(() => nc.close()) };
    });
  }

  async publish(messages: readonly NatsMessage[], stop?: () => boolean): Promise<PublishResult[]> {
    let js: JetStreamClientLike;
    try {
      ({ js } = await this.#client.get());
    } catch (error) {
      return messages.map(() => ({ ok: false, error }));
    }
    if (stop?.()) return messages.map(() => notSent());
    // All sent at once, in order, over one connection; each resolves on its own acknowledgement.
    return Promise.all(
      messages.map((m) =>
        js.publish(m.subject, m.payload, { msgID: m.msgID, timeout: this.#timeout }).then(
          (ack): PublishResult => ({ ok: true, duplicate: ack.duplicate }),
          (error: unknown): PublishResult => ({ ok: false, error }),
        ),
      ),
    );
  }

  classify(error: unknown): FailureClass {
    return classifyNatsError(error);
  }

  async close(): Promise<void> {
    await (await this.#client.take()?.catch(() => undefined))?.close();
  }
}

/**
 * Relays each change to a NATS JetStream subject, and lets a batch reach the checkpoint only after JetStream
 * acknowledged every message of it (stored, or recognised as a duplicate). Each message carries a
 * de-duplication id (`Nats-Msg-Id`) made of the document's partition key, id and LSN, the same whichever
 * partition of the lineage reads the change: a replay after a crash or a split within the stream's
 * `duplicate_window` is acknowledged as a duplicate, not stored twice.
 *
 * Order: a partition's batches are published one after the other, in pipelined rounds in feed order (a
 * round holds at most one change of a document, so a message refused while the next one is stored cannot
 * put a document's changes out of order);
 * after a failure the round resumes at the first unacknowledged message (later ones are sent again and
 * de-duplicated), so one document's changes are stored in LSN order, also across a split (a child's replay
 * of its parent's changes carries the parent's ids). Nothing more is sent once a batch's ownership ended (a
 * handover, a gone partition handed to its children); what was sent before and is still held by the server
 * (flow control, a slow route) lands when it reads again, possibly after the next owner's messages: a
 * `drainTimeoutMs` longer than the server holds publishers keeps those in order too (consumers can also keep
 * the newest version of a key by the envelope's `lsn`).
 *
 * Failures: no acknowledgement in time (a dropped connection, a slow server) and a full stream (limits with
 * discard `new`) are retried with capped backoff while the partition is owned, reported as `error` events;
 * anything else (no stream captures the subject, permissions, a message over the size limit) ends the
 * stream with a `RelayError`. A value is never emitted before all of it was acknowledged.
 *
 * @example
 * ```ts
 * import { connect } from '@nats-io/transport-node';
 * import { jetstream } from '@nats-io/jetstream';
 * import { changeFeed, checkpointEvery } from 'rxfeed';
 * import { publishToJetStream } from 'rxfeed/nats';
 * const js = jetstream(await connect({ servers: '127.0.0.1:4222' }));
 * changeFeed<Order>(options).pipe(publishToJetStream(js, { subject: (c) => `orders.${c.id}` }), checkpointEvery(500)).subscribe();
 * ```
 */
export function publishToJetStream<B extends AnyBatches>(target: JetStreamTarget, options: PublishToJetStreamOptions<DocumentOf<B>>): OperatorFunction<B, B> {
  const isClient = typeof (target as JetStreamClientLike | undefined)?.publish === 'function';
  if (!isClient && !(typeof (target as { servers?: unknown } | undefined)?.servers === 'string' || Array.isArray((target as { servers?: unknown } | undefined)?.servers))) {
    throw new InvalidOptionsError('target', 'give a JetStream client (jetstream(nc) of @nats-io/jetstream) or { servers: "nats://host:4222" }');
  }
  if (typeof options?.subject !== 'function') throw new InvalidOptionsError('subject', 'give a function from a change to its subject');
  const payload = payloadOf(options.payload);
  const timeout = options.ackTimeoutMs ?? 5000;
  positiveMs('ackTimeoutMs', timeout);
  return relay<B, NatsMessage>(
    'publishToJetStream',
    () => new JetStreamPublisher(target, timeout),
    (change, batch) => {
      const subject = options.subject(change);
      if (typeof subject !== 'string' || subject === '') throw new TypeError(`subject must be a non-empty string (got ${String(subject)})`);
      return { subject, payload: payload(change, batch), msgID: messageId(change) };
    },
    options,
  );
}
