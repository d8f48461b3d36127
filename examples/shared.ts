/**
 * What the Cosmos DB examples share: the account to run on.
 *
 * Settings (environment): `COSMOS_ENDPOINT` and `COSMOS_KEY` name an account; without them an embedded emulator
 * starts, so each example runs with nothing but Node.
 */
import { CosmosClient } from '@azure/cosmos';
import { CosmosEmulator } from 'rxfeed/emulator';

/** A Cosmos DB client, whether it talks to a fresh emulator (no history), and how to let it go. */
export interface CosmosConnection {
  readonly client: CosmosClient;
  /** True on a fresh embedded emulator: no containers, leases or checkpoints from an earlier run. */
  readonly fresh: boolean;
  /** Disposes of the client, and stops the emulator when one was started. */
  readonly stop: () => Promise<void>;
}

/**
 * The account from the environment (`COSMOS_ENDPOINT`, `COSMOS_KEY`), or a fresh embedded emulator whose new
 * containers start with `initialRangeCount` physical partitions.
 *
 * @example
 * ```ts
 * const cosmos = await connectCosmos(process.env, { initialRangeCount: 4 });
 * try {
 *   // cosmos.client.database(...)
 * } finally {
 *   await cosmos.stop();
 * }
 * ```
 */
export async function connectCosmos(env: NodeJS.ProcessEnv, { initialRangeCount }: { initialRangeCount: number }): Promise<CosmosConnection> {
  if (env.COSMOS_ENDPOINT) {
    if (!env.COSMOS_KEY) throw new Error('COSMOS_ENDPOINT is set but COSMOS_KEY is not; set both, or neither to use the embedded emulator');
    const client = new CosmosClient({ endpoint: env.COSMOS_ENDPOINT, key: env.COSMOS_KEY });
    return { client, fresh: false, stop: async () => client.dispose() };
  }
  const emulator = await CosmosEmulator.start({ initialRangeCount });
  const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
  return {
    client,
    fresh: true,
    stop: async () => {
      client.dispose();
      await emulator.stop();
    },
  };
}
