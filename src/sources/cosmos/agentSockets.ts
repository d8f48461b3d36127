import type { Container } from '@azure/cosmos';

/**
 * Connections Node's HTTP agents keep open between requests unless told otherwise (`maxFreeSockets`), as
 * the SDK's own default agents do (`keepAlive: true` and nothing else).
 */
const NODE_FREE_SOCKETS = 256;

/** The parts of a Node HTTP agent that say how many connections it opens and keeps. */
interface AgentLike {
  readonly maxSockets?: unknown;
  readonly maxFreeSockets?: unknown;
}

const count = (value: unknown): number | undefined => (typeof value === 'number' && value >= 1 ? Math.floor(value) : undefined);

/**
 * How many change feed reads a container's client serves at once without opening connections it then
 * closes: half the connections its HTTP agent keeps alive between requests (the other half is left to the
 * lease store and the application, which often share the client), never more than the agent opens at all.
 * 128 for the SDK's default agent.
 *
 * The agent is the one given to the `CosmosClient` (`agent` option), read from the SDK's client context as
 * 4.x keeps it; when that is not found (another SDK layout, a custom `httpClient`), the SDK's default agent
 * is assumed.
 *
 * @internal
 */
export function concurrentReadsOf(container: Container): number {
  const context = (container as unknown as { clientContext?: { cosmosClientOptions?: { agent?: AgentLike } } }).clientContext;
  const agent = context?.cosmosClientOptions?.agent;
  return concurrentReadsOfAgent(agent);
}

/**
 * {@link concurrentReadsOf} for an agent (`undefined`: the SDK's default one).
 *
 * @internal
 */
export function concurrentReadsOfAgent(agent: AgentLike | undefined): number {
  if (!agent) return NODE_FREE_SOCKETS / 2;
  const maxSockets = count(agent.maxSockets) ?? Number.POSITIVE_INFINITY;
  const kept = count(agent.maxFreeSockets) ?? NODE_FREE_SOCKETS;
  return Math.max(1, Math.min(maxSockets, Math.floor(kept / 2)));
}
