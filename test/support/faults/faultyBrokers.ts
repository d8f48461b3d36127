import type { AmqpConfirmChannelLike, AmqpConnectionLike, AmqpPublishOptions } from '../../../src/amqp/publishToAmqp.js';
import type { JetStreamAckLike, JetStreamClientLike } from '../../../src/nats/publishToJetStream.js';
import type { HostClock } from './clock.js';
import { type FaultEnv, type FaultPlan } from './plan.js';

/**
 * Faults of a broker's publish (key: the message's de-duplication id, `Nats-Msg-Id` or AMQP `messageId`):
 * - `drop`: the connection drops as this message is sent: it never reaches the broker, nor does any message
 *   sent in the next `ms` (default 0: the rest of this pipelined round); messages sent before it and not
 *   acknowledged yet reached the broker, their acknowledgements are lost. JetStream: each lost publish
 *   rejects with a `TimeoutError` after its `timeout`; AMQP: the connection and its channels close (pending
 *   confirms fail with "channel closed"), and a connection opened within `ms` is refused (`ECONNREFUSED`);
 * - `full`: the broker refuses the message for now: JetStream's `maximum messages exceeded` (a full stream
 *   with discard `new`), an AMQP nack (a queue full with `reject-publish`); nothing stored;
 * - `refuse`: the broker refuses it for good: JetStream's `message size exceeds maximum allowed`, AMQP's
 *   `404 NOT_FOUND` (no such exchange); nothing stored;
 * - `slowAck`: the message lands, its acknowledgement comes `ms` late (default 1 000);
 * - `lostAck`: the message lands, its acknowledgement never comes (JetStream: a `TimeoutError` after the
 *   publish's `timeout`; AMQP: no confirm, the relay's confirm timeout must notice);
 * - `blocked`: flow control: the broker stops reading for `ms` (default 1 000): this message and every one
 *   sent meanwhile land, in order, once it reads again (AMQP: `publish` returns false, `drain` follows).
 */
export type BrokerFaultKind = 'drop' | 'full' | 'refuse' | 'slowAck' | 'lostAck' | 'blocked';

/** A fault plan of a broker: rules for `publish`. */
export type BrokerFaultPlan = FaultPlan<'publish', BrokerFaultKind>;

/** An error shaped like the client library's, so the relay classifies it as it would the real one. */
function brokerError(name: string, message: string, code?: number | string): Error {
  const error = new Error(message);
  error.name = name;
  if (code !== undefined) (error as Error & { code: unknown }).code = code;
  return error;
}

/** A promise with its settle functions outside. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** The JetStream client of {@link faultyJetStream}: the wrapped client, and what struck. */
export interface FaultyJetStream extends JetStreamClientLike {
  /** Publish calls so far. */
  readonly calls: number;
  /** Connection drops so far. */
  readonly drops: number;
}

/**
 * Wraps a JetStream client (the real one of `@nats-io/jetstream`, or a model) so its publishes fail, stall
 * or lose their acknowledgement as `plan` says (see {@link BrokerFaultKind}). Delays run on `env`'s clock.
 *
 * @example
 * ```ts
 * const js = faultyJetStream(jetstream(nc), { publish: [{ kind: 'drop', after: 3, count: 1 }] }, new FaultEnv({ scheduler: asyncScheduler }));
 * feed$.pipe(publishToJetStream(js, { subject }), checkpointEvery(100));
 * ```
 */
export function faultyJetStream(js: JetStreamClientLike, plan: BrokerFaultPlan, env: FaultEnv): FaultyJetStream {
  const now = () => env.scheduler.now();
  let downUntil = -Infinity;
  let blockedUntil = -Infinity;
  /** Publishes sent and not acknowledged yet: a drop loses their acknowledgements. */
  const unacknowledged = new Set<() => void>();
  const state = { calls: 0, drops: 0 };
  const timedOut = async (timeout: number, why: string): Promise<never> => {
    await env.delay(timeout);
    throw brokerError('TimeoutError', `timeout (injected: ${why})`);
  };
  /** Sends through `js`; the acknowledgement is lost if the connection drops before it came. */
  const send = async (subject: string, payload: Uint8Array | string | undefined, options: { msgID?: string; timeout?: number } | undefined, timeout: number, started: number): Promise<JetStreamAckLike> => {
    const lost = deferred<never>();
    const lose = () => lost.reject(new Error('lost'));
    unacknowledged.add(lose);
    try {
      return await Promise.race([js.publish(subject, payload, options), lost.promise]);
    } catch (error) {
      if ((error as Error).message !== 'lost') throw error;
      await env.delay(Math.max(0, started + timeout - now()));
      throw brokerError('TimeoutError', 'timeout (injected: connection dropped before the acknowledgement)');
    } finally {
      unacknowledged.delete(lose);
    }
  };
  return {
    get calls() {
      return state.calls;
    },
    get drops() {
      return state.drops;
    },
    async publish(subject, payload, options) {
      state.calls++;
      const started = now();
      const timeout = options?.timeout ?? 5_000;
      const rule = env.pick('broker', plan, 'publish', options?.msgID);
      if (rule?.kind === 'drop') {
        state.drops++;
        downUntil = started + (rule.ms ?? 0);
        for (const lose of [...unacknowledged]) lose();
      }
      if (started <= downUntil) return timedOut(timeout, 'connection down');
      if (rule?.kind === 'blocked') blockedUntil = Math.max(blockedUntil, started + (rule.ms ?? 1_000));
      if (started < blockedUntil) await env.delay(blockedUntil - started);
      switch (rule?.kind) {
        case 'full':
          throw brokerError('JetStreamApiError', 'maximum messages exceeded (injected)', 10077);
        case 'refuse':
          throw brokerError('JetStreamApiError', 'message size exceeds maximum allowed (injected)', 10054);
        case 'lostAck':
          void js.publish(subject, payload, options).catch(() => undefined);
          return timedOut(timeout, 'acknowledgement lost');
        case 'slowAck': {
          const ack = await send(subject, payload, options, timeout, started);
          await env.delay(rule.ms ?? 1_000);
          return ack;
        }
        default:
          return send(subject, payload, options, timeout, started);
      }
    },
  };
}

/** The JetStream client as one host sees it (see {@link HostClock.gate}). */
export function gateJetStream(js: JetStreamClientLike, host: HostClock): JetStreamClientLike {
  return { publish: (subject, payload, options) => host.gate(() => js.publish(subject, payload, options)) };
}

/** The AMQP opener of {@link faultyAmqp}: pass it as the relay's target. */
export interface FaultyAmqp {
  readonly connect: () => Promise<AmqpConnectionLike>;
  /** Message ids the broker confirmed to the relay through this wrapper. */
  readonly confirmed: Set<string>;
  /** Publish calls so far. */
  readonly calls: number;
  /** Connections opened so far. */
  readonly connections: number;
  /** Connection drops so far. */
  readonly drops: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- one listener type for the overloads of `on`
type Listener = (error: any) => void;

/** Listeners by event, called by the wrapper (real events forwarded, or a drop it injects). */
class Emitter {
  readonly #listeners = new Map<string, Listener[]>();
  on(event: string, listener: Listener, once = false): void {
    const wrapped: Listener = once
      ? (error) => {
          this.off(event, wrapped);
          listener(error);
        }
      : listener;
    this.#listeners.set(event, [...(this.#listeners.get(event) ?? []), wrapped]);
  }
  off(event: string, listener: Listener): void {
    this.#listeners.set(event, (this.#listeners.get(event) ?? []).filter((l) => l !== listener));
  }
  emit(event: string, error?: Error): void {
    for (const listener of [...(this.#listeners.get(event) ?? [])]) listener(error);
  }
}

/**
 * Wraps an AMQP connection opener (amqplib's `connect`, or a model's) so that its confirm channels' publishes
 * fail, stall or lose their confirm as `plan` says (see {@link BrokerFaultKind}); a `drop` closes the
 * connection under the relay as a network failure does (the wrapper emits `error` and `close`, fails the
 * pending confirms and closes the real connection). `confirmed` records the ids confirmed to the relay.
 *
 * @example
 * ```ts
 * const broker = faultyAmqp(() => amqp.connect(url), { publish: [{ kind: 'full', probability: 0.05 }] }, env);
 * feed$.pipe(publishToAmqp(broker, { exchange, routingKey }), checkpointEvery(100));
 * ```
 */
export function faultyAmqp(open: () => Promise<AmqpConnectionLike>, plan: BrokerFaultPlan, env: FaultEnv, confirmed = new Set<string>()): FaultyAmqp {
  const now = () => env.scheduler.now();
  const state = { calls: 0, connections: 0, drops: 0 };
  let refuseUntil = -Infinity;
  const connect = async (): Promise<AmqpConnectionLike> => {
    if (now() <= refuseUntil) throw brokerError('Error', 'connect ECONNREFUSED (injected: connection down)', 'ECONNREFUSED');
    const connection = await open();
    state.connections++;
    const events = new Emitter();
    let dead = false;
    const channels = new Set<() => void>();
    connection.on('error', (error) => !dead && events.emit('error', error));
    connection.on('close', () => {
      if (dead) return;
      dead = true;
      for (const close of [...channels]) close();
      events.emit('close');
    });
    /** A network failure: everything unconfirmed fails, the connection and its channels close. */
    const drop = (ms: number) => {
      if (dead) return;
      state.drops++;
      refuseUntil = now() + ms;
      dead = true;
      for (const close of [...channels]) close();
      events.emit('error', brokerError('Error', 'Unexpected close (injected: connection dropped)'));
      events.emit('close');
      void connection.close().catch(() => undefined);
    };
    return {
      on: (event: 'error' | 'close', listener: Listener) => events.on(event, listener),
      close: async () => {
        if (dead) return;
        await connection.close();
      },
      createConfirmChannel: async () => {
        if (dead) throw brokerError('IllegalOperationError', 'Connection closed (injected)');
        const channel = await connection.createConfirmChannel();
        const channelEvents = new Emitter();
        const pending = new Set<(error: unknown) => void>();
        let closed = false;
        let blockedUntil = -Infinity;
        let blocks = 0;
        /** Publishes held back by flow control, sent in order once the broker reads again. */
        let held: (() => void)[] | undefined;
        const closeChannel = () => {
          if (closed) return;
          closed = true;
          channels.delete(closeChannel);
          const error = new Error('channel closed');
          for (const fail of [...pending]) fail(error);
          channelEvents.emit('close');
        };
        channels.add(closeChannel);
        channel.on('error', (error) => !closed && channelEvents.emit('error', error));
        channel.on('close', () => closeChannel());
        const wrapped: AmqpConfirmChannelLike = {
          once: (event, listener) => channelEvents.on(event, listener, true),
          on: (event: 'error' | 'close', listener: Listener) => channelEvents.on(event, listener),
          close: async () => {
            if (closed) return;
            closeChannel();
            await channel.close().catch(() => undefined);
          },
          publish(exchange: string, routingKey: string, content: Buffer, options: AmqpPublishOptions, callback: (error: unknown) => void): boolean {
            if (closed) throw brokerError('IllegalOperationError', 'Channel closed (injected)');
            state.calls++;
            const rule = env.pick('broker', plan, 'publish', options.messageId);
            // Each callback once, and none after the channel closed (its pending ones failed then).
            let settled = false;
            const settle = (error: unknown) => {
              if (settled) return;
              settled = true;
              pending.delete(settle);
              if (!error) confirmed.add(options.messageId);
              callback(error);
            };
            pending.add(settle);
            /** Publishes on the real channel (after what flow control holds); false when its buffer is full. */
            const real = (onConfirm: (error: unknown) => void): boolean => {
              const send = () => (closed ? true : channel.publish(exchange, routingKey, content, options, (error) => !closed && onConfirm(error)));
              if (held) {
                held.push(() => void send());
                return true;
              }
              const ready = send();
              if (!ready) channel.once('drain', () => channelEvents.emit('drain'));
              return ready;
            };
            switch (rule?.kind) {
              case 'drop':
                drop(rule.ms ?? 0);
                return true;
              case 'full':
                void env.delay(0).then(() => settle(new Error('message nacked (injected: queue full)')));
                return true;
              case 'refuse':
                void env.delay(0).then(() => settle(brokerError('Error', "NOT_FOUND - no exchange (injected)", 404)));
                return true;
              case 'lostAck':
                return real(() => undefined) && held === undefined;
              case 'slowAck':
                return real((error) => void env.delay(rule.ms ?? 1_000).then(() => settle(error))) && held === undefined;
              case 'blocked': {
                const until = now() + (rule.ms ?? 1_000);
                if (until > blockedUntil) {
                  blockedUntil = until;
                  held ??= [];
                  // The last block's delay releases (not a clock reading: a host's clock may be stepped back).
                  const block = ++blocks;
                  void env.delay(until - now()).then(() => {
                    if (block !== blocks) return; // blocked again meanwhile: a later delay releases
                    const sends = held ?? [];
                    held = undefined;
                    for (const s of sends) s();
                    channelEvents.emit('drain');
                  });
                }
                real(settle);
                return false;
              }
              default:
                return real(settle) && held === undefined;
            }
          },
        };
        return wrapped;
      },
    };
  };
  return {
    connect,
    confirmed,
    get calls() {
      return state.calls;
    },
    get connections() {
      return state.connections;
    },
    get drops() {
      return state.drops;
    },
  };
}

/**
 * An AMQP opener as one host sees it (see {@link HostClock.gate}): a paused host's publishes go out once it
 * runs again, in order, and it sees confirms and events only while it runs; a dead host's never.
 */
export function gateAmqp(open: () => Promise<AmqpConnectionLike>, host: HostClock): () => Promise<AmqpConnectionLike> {
  const later = (f: () => void) => void host.pass().then(f);
  return async () => {
    const connection = await host.gate(open);
    return {
      on: (event: 'error' | 'close', listener: Listener) => connection.on(event as 'error', (error?: Error) => later(() => listener(error))),
      close: () => host.gate(() => connection.close()),
      createConfirmChannel: async () => {
        const channel = await host.gate(() => connection.createConfirmChannel());
        let queue: (() => void)[] | undefined;
        const flush = () => {
          const sends = queue ?? [];
          queue = undefined;
          for (const s of sends) s();
        };
        const gated: AmqpConfirmChannelLike = {
          once: (event, listener) => channel.once(event, () => later(listener)),
          on: (event: 'error' | 'close', listener: Listener) => channel.on(event as 'error', (error?: Error) => later(() => listener(error))),
          close: () => host.gate(() => channel.close()),
          publish(exchange, routingKey, content, options, callback) {
            const send = () => channel.publish(exchange, routingKey, content, options, (error) => later(() => callback(error)));
            if (queue === undefined && host.state === 'running') return send();
            if (queue === undefined) {
              queue = [];
              void host.pass().then(flush);
            }
            queue.push(() => {
              try {
                send();
              } catch (error) {
                later(() => callback(error));
              }
            });
            return true;
          },
        };
        return gated;
      },
    };
  };
}
