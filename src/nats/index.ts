/**
 * `rxfeed/nats`: relay changes to NATS JetStream, checkpointing only what JetStream acknowledged. Install
 * `@nats-io/jetstream` (and `@nats-io/transport-node` to let rxfeed connect); the `rxfeed` entry point never
 * loads them.
 *
 * @example
 * ```ts
 * import { publishToJetStream } from 'rxfeed/nats';
 * feed$.pipe(publishToJetStream({ servers: 'nats://127.0.0.1:4222' }, { subject: (c) => `orders.${c.id}` }), checkpointEvery(500));
 * ```
 *
 * @packageDocumentation
 */
export {
  publishToJetStream,
  type PublishToJetStreamOptions,
  type JetStreamTarget,
  type JetStreamClientLike,
  type JetStreamAckLike,
} from './publishToJetStream.js';
export { RelayError, RelayStats, type RelayOptions, type RelayBackoff } from '../relay/relay.js';
