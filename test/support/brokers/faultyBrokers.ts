import type { JetStreamAckLike, JetStreamClientLike } from '../../../src/nats/publishToJetStream.js';
import type { AmqpConfirmChannelLike, AmqpConnectionLike } from '../../../src/amqp/publishToAmqp.js';

/**
 * Faults a broker client can show, by publish call (1-based, counting every call the relay makes):
 * - `lostAck`: the message reaches the broker, its acknowledgement does not (a timeout): a retry is a duplicate;
 * - `slowAck`: the acknowledgement comes `ms` late;
 * - `down`: this call and the next `count - 1` never reach the broker (a dropped connection);
 * - `full`: the broker refuses the message for now (a full stream with discard `new`);
 * - `refuse`: the broker refuses it for good (a message over the size limit).
 */
export type BrokerFault =
  | { readonly at: number; readonly kind: 'lostAck' | 'full' | 'refuse' }
  | { readonly at: number; readonly kind: 'slowAck'; readonly ms: number }
  | { readonly at: number; readonly kind: 'down'; readonly count: number };

/** An error shaped like the client library's, so the relay classifies it as it would the real one. */
function brokerError(name: string, message: string, code?: number): Error {
  const error = new Error(message);
  error.name = name;
  if (code !== undefined) (error as Error & { code: number }).code = code;
  return error;
}

const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The fault planned for call `n`, if any. */
function faultAt(plan: readonly BrokerFault[], n: number): BrokerFault | undefined {
  return plan.find((f) => (f.kind === 'down' ? n >= f.at && n < f.at + f.count : n === f.at));
}

/** A JetStream client whose publishes fail as `plan` says; every other call goes to `js`. */
export function faultyJetStream(js: JetStreamClientLike, plan: readonly BrokerFault[]): JetStreamClientLike & { calls: number } {
  const client = {
    calls: 0,
    async publish(subject: string, payload?: Uint8Array | string, options?: { msgID?: string; timeout?: number }): Promise<JetStreamAckLike> {
      const fault = faultAt(plan, ++client.calls);
      switch (fault?.kind) {
        case 'down':
          await later(1);
          throw brokerError('TimeoutError', 'timeout (injected: connection down)');
        case 'full':
          throw brokerError('JetStreamApiError', 'maximum messages exceeded (injected)', 10077);
        case 'refuse':
          throw brokerError('JetStreamApiError', 'message size exceeds maximum allowed (injected)', 10054);
        case 'lostAck':
          await js.publish(subject, payload, options);
          throw brokerError('TimeoutError', 'timeout (injected: acknowledgement lost)');
        case 'slowAck': {
          const ack = await js.publish(subject, payload, options);
          await later(fault.ms);
          return ack;
        }
        default:
          return js.publish(subject, payload, options);
      }
    },
  };
  return client;
}

/** A JetStream client that records the ids JetStream acknowledged, into `confirmed`. */
export function confirmingJetStream(js: JetStreamClientLike, confirmed = new Set<string>()): JetStreamClientLike & { confirmed: Set<string> } {
  return {
    confirmed,
    async publish(subject, payload, options) {
      const ack = await js.publish(subject, payload, options);
      if (options?.msgID) confirmed.add(options.msgID);
      return ack;
    },
  };
}

/**
 * An AMQP connection opener whose confirm channels fail publishes as `plan` says (`full` is a nack, `lostAck` a
 * confirm that never comes, `down` closes the real connection under the relay); `confirmed` records the
 * message ids the broker confirmed.
 */
export function faultyAmqp(
  open: () => Promise<AmqpConnectionLike>,
  plan: readonly BrokerFault[] = [],
  confirmed = new Set<string>(),
): { connect: () => Promise<AmqpConnectionLike>; confirmed: Set<string>; calls: number; connections: number } {
  const state = {
    confirmed,
    calls: 0,
    connections: 0,
    connect: async (): Promise<AmqpConnectionLike> => {
      const connection = await open();
      state.connections++;
      return {
        on: (event: 'error' | 'close', listener: (error: Error) => void) => connection.on(event as 'error', listener),
        close: () => connection.close(),
        createConfirmChannel: async () => {
          const channel = await connection.createConfirmChannel();
          const wrapped: AmqpConfirmChannelLike = {
            once: (event, listener) => channel.once(event, listener),
            on: (event: 'error' | 'close', listener: (error: Error) => void) => channel.on(event as 'error', listener),
            close: () => channel.close(),
            publish(exchange, routingKey, content, options, callback) {
              const fault = faultAt(plan, ++state.calls);
              const record = (error: unknown) => {
                if (!error) confirmed.add(options.messageId);
                callback(error);
              };
              switch (fault?.kind) {
                case 'full':
                  setTimeout(() => callback(new Error('message nacked (injected: queue full)')), 1);
                  return true;
                case 'refuse':
                  setTimeout(() => callback(Object.assign(new Error('NOT_FOUND - no exchange (injected)'), { code: 404 })), 1);
                  return true;
                case 'lostAck':
                  return channel.publish(exchange, routingKey, content, options, () => undefined);
                case 'slowAck':
                  return channel.publish(exchange, routingKey, content, options, (error) => setTimeout(() => record(error), fault.ms));
                case 'down':
                  if (state.calls === fault.at) void connection.close().catch(() => undefined);
                  return channel.publish(exchange, routingKey, content, options, record);
                default:
                  return channel.publish(exchange, routingKey, content, options, record);
              }
            },
          };
          return wrapped;
        },
      };
    },
  };
  return state;
}
