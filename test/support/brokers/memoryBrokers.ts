import type { SchedulerLike } from 'rxjs';
import type { AmqpConfirmChannelLike, AmqpConnectionLike, AmqpPublishOptions } from '../../../src/amqp/publishToAmqp.js';
import type { JetStreamAckLike, JetStreamClientLike } from '../../../src/nats/publishToJetStream.js';

/** One message a model broker holds, in the order it arrived. */
export interface HeldMessage {
  /** Arrival order (JetStream: the stream sequence). */
  readonly seq: number;
  /** The de-duplication id it carried (`Nats-Msg-Id`, AMQP `messageId`). */
  readonly msgId: string;
  /** Subject (JetStream) or routing key (AMQP). */
  readonly subject: string;
  readonly body: string;
  /** Who published it (the name given to `client()` / `connect()`). */
  readonly from: string;
  /** Arrival time, on the model's clock. */
  readonly atMs: number;
}

/** Waits `ms` on `scheduler`. */
const after = (scheduler: SchedulerLike, ms: number) => new Promise<void>((resolve) => scheduler.schedule(() => resolve(), ms));

/**
 * An in-memory JetStream stream capturing every subject, with JetStream's publish semantics: a message
 * arrives when it is sent (in send order: one connection keeps order), is acknowledged `ackLatencyMs` later
 * with its stream sequence, and a message whose id the stream stored within `duplicateWindowMs` is not stored
 * again: it is acknowledged as a duplicate with the first one's sequence (the window counts from when the
 * first was stored; later, the id is forgotten and a replay is stored again, as JetStream does).
 *
 * @example
 * ```ts
 * const stream = new MemoryJetStream({ scheduler: clock });
 * feed$.pipe(publishToJetStream(stream.client('host-a'), { subject: (c) => `orders.${c.id}` }));
 * ```
 */
export class MemoryJetStream {
  /** Messages stored, in stream order. */
  readonly messages: HeldMessage[] = [];
  /** Publishes acknowledged as duplicates (not stored). */
  duplicatesDropped = 0;
  readonly #ids = new Map<string, { readonly seq: number; readonly atMs: number }>();
  readonly #scheduler: SchedulerLike;
  readonly #ackLatencyMs: number;
  readonly #windowMs: number;

  constructor(options: { scheduler: SchedulerLike; ackLatencyMs?: number; duplicateWindowMs?: number }) {
    this.#scheduler = options.scheduler;
    this.#ackLatencyMs = options.ackLatencyMs ?? 1;
    this.#windowMs = options.duplicateWindowMs ?? 120_000;
  }

  /** The stream's `duplicate_window`, in ms. */
  get duplicateWindowMs(): number {
    return this.#windowMs;
  }

  /** A client of one publisher (its name is recorded with each message it stores). */
  client(from: string): JetStreamClientLike {
    return {
      publish: async (subject, payload, options): Promise<JetStreamAckLike> => {
        const ack = this.#arrive(subject, payload, options?.msgID, from);
        await after(this.#scheduler, this.#ackLatencyMs);
        return ack;
      },
    };
  }

  #arrive(subject: string, payload: Uint8Array | string | undefined, msgId: string | undefined, from: string): JetStreamAckLike {
    const now = this.#scheduler.now();
    if (msgId !== undefined) {
      const known = this.#ids.get(msgId);
      if (known && now - known.atMs < this.#windowMs) {
        this.duplicatesDropped++;
        return { stream: 'memory', seq: known.seq, duplicate: true };
      }
    }
    const seq = this.messages.length + 1;
    const body = typeof payload === 'string' ? payload : payload === undefined ? '' : Buffer.from(payload).toString();
    this.messages.push({ seq, msgId: msgId ?? '', subject, body, from, atMs: now });
    if (msgId !== undefined) this.#ids.set(msgId, { seq, atMs: now });
    return { stream: 'memory', seq, duplicate: false };
  }
}

/**
 * An in-memory RabbitMQ broker with one queue bound to everything, with AMQP 0-9-1 publisher-confirm
 * semantics: a message is enqueued when it is sent (in send order per channel), persistent, and confirmed
 * `confirmLatencyMs` later; there is no de-duplication (consumers de-duplicate by `messageId`). Closing a
 * channel or connection fails the confirms still pending with "channel closed" (the messages stay queued: the
 * broker had them), and a closed channel's `publish` throws `IllegalOperationError`.
 *
 * @example
 * ```ts
 * const broker = new MemoryAmqp({ scheduler: clock });
 * feed$.pipe(publishToAmqp({ connect: () => broker.connect('host-a') }, { exchange: 'orders', routingKey }));
 * ```
 */
export class MemoryAmqp {
  /** Messages enqueued, in arrival order (duplicates included). */
  readonly messages: HeldMessage[] = [];
  readonly #scheduler: SchedulerLike;
  readonly #confirmLatencyMs: number;

  constructor(options: { scheduler: SchedulerLike; confirmLatencyMs?: number }) {
    this.#scheduler = options.scheduler;
    this.#confirmLatencyMs = options.confirmLatencyMs ?? 1;
  }

  /** Opens a connection for one publisher (its name is recorded with each message it enqueues). */
  async connect(from: string): Promise<AmqpConnectionLike> {
    const listeners = { error: [] as ((error: Error) => void)[], close: [] as (() => void)[] };
    const channels = new Set<() => void>();
    let open = true;
    const closeConnection = () => {
      if (!open) return;
      open = false;
      for (const close of [...channels]) close();
      for (const l of listeners.close) l();
    };
    return {
      on: (event: 'error' | 'close', listener: (error: Error) => void) => void (listeners[event] as unknown as ((error: Error) => void)[]).push(listener),
      close: async () => closeConnection(),
      createConfirmChannel: async () => {
        if (!open) throw Object.assign(new Error('Connection closed'), { name: 'IllegalOperationError' });
        const channelListeners = { error: [] as ((error: Error) => void)[], close: [] as (() => void)[], drain: [] as (() => void)[] };
        const unconfirmed = new Set<(error: unknown) => void>();
        let channelOpen = true;
        const closeChannel = () => {
          if (!channelOpen) return;
          channelOpen = false;
          channels.delete(closeChannel);
          const error = new Error('channel closed');
          for (const fail of [...unconfirmed]) fail(error);
          for (const l of channelListeners.close.splice(0)) l();
        };
        channels.add(closeChannel);
        const channel: AmqpConfirmChannelLike = {
          publish: (_exchange: string, routingKey: string, content: Buffer, options: AmqpPublishOptions, callback: (error: unknown) => void) => {
            if (!channelOpen) throw Object.assign(new Error('Channel closed'), { name: 'IllegalOperationError' });
            this.messages.push({ seq: this.messages.length + 1, msgId: options.messageId, subject: routingKey, body: content.toString(), from, atMs: this.#scheduler.now() });
            let done = false;
            const settle = (error: unknown) => {
              if (done) return;
              done = true;
              unconfirmed.delete(settle);
              callback(error);
            };
            unconfirmed.add(settle);
            this.#scheduler.schedule(() => settle(null), this.#confirmLatencyMs);
            return true;
          },
          once: (event: 'drain' | 'close', listener: () => void) => {
            const list = channelListeners[event];
            const once = () => {
              list.splice(list.indexOf(once), 1);
              listener();
            };
            list.push(once);
          },
          on: (event: 'error' | 'close', listener: (error: Error) => void) => void (channelListeners[event] as unknown as ((error: Error) => void)[]).push(listener),
          close: async () => closeChannel(),
        };
        return channel;
      },
    } as AmqpConnectionLike;
  }
}
