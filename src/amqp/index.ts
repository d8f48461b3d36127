/**
 * `rxfeed/amqp`: relay changes to a RabbitMQ (AMQP 0-9-1) exchange with publisher confirms, checkpointing
 * only what the broker confirmed. Install `amqplib`; the `rxfeed` entry point never loads it.
 *
 * @example
 * ```ts
 * import { publishToAmqp } from 'rxfeed/amqp';
 * feed$.pipe(publishToAmqp('amqp://guest:guest@127.0.0.1:5672', { exchange: 'orders', routingKey: (c) => `order.${c.id}` }), checkpointEvery(500));
 * ```
 *
 * @packageDocumentation
 */
export {
  publishToAmqp,
  type PublishToAmqpOptions,
  type AmqpTarget,
  type AmqpConnectionLike,
  type AmqpConfirmChannelLike,
  type AmqpPublishOptions,
} from './publishToAmqp.js';
export { RelayError, RelayStats, type RelayOptions, type RelayBackoff } from '../relay/relay.js';
