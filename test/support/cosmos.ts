import { CosmosClient, type Container, type PartitionKeyDefinition } from '@azure/cosmos';
import { CosmosEmulator } from '../../src/emulator/index.js';

/** A Cosmos DB endpoint for integration tests: the real service / official emulator, or ours. */
export interface TestCosmos {
  readonly endpoint: string;
  readonly key: string;
  /** A client with short timeouts and few retries, so fault tests stay fast. */
  readonly client: CosmosClient;
  /** Our emulator, when the tests run on it; `undefined` against a real endpoint (admin-only tests skip). */
  readonly emulator: CosmosEmulator | undefined;
  /** A fresh client for the same endpoint (e.g. one per simulated host). */
  newClient(): CosmosClient;
  stop(): Promise<void>;
}

/**
 * Starts what the Cosmos integration tests talk to. With `COSMOS_ENDPOINT` and `COSMOS_KEY` set, the same
 * suites run against the real service or the official emulator; otherwise an in-process emulator starts.
 */
export async function startTestCosmos(options: { initialRangeCount?: number } = {}): Promise<TestCosmos> {
  const endpointFromEnv = process.env.COSMOS_ENDPOINT;
  const keyFromEnv = process.env.COSMOS_KEY;
  const emulator =
    endpointFromEnv && keyFromEnv ? undefined : await CosmosEmulator.start({ initialRangeCount: options.initialRangeCount ?? 4 });
  const endpoint = emulator?.endpoint ?? endpointFromEnv!;
  const key = emulator?.key ?? keyFromEnv!;
  const clients: CosmosClient[] = [];
  const newClient = (): CosmosClient => {
    const client = new CosmosClient({
      endpoint,
      key,
      connectionPolicy: {
        requestTimeout: 5_000,
        retryOptions: { maxRetryAttemptCount: 3, fixedRetryIntervalInMilliseconds: 0, maxWaitTimeInSeconds: 5 },
      },
    });
    clients.push(client);
    return client;
  };
  const client = newClient();
  return {
    endpoint,
    key,
    client,
    emulator,
    newClient,
    async stop() {
      for (const c of clients) c.dispose();
      await emulator?.stop();
    },
  };
}

/**
 * Skips the running test, with the reason, when it needs the emulator's admin operations and the suite runs
 * against a real endpoint: the test then counts as skipped, not as passed.
 *
 * @example
 * ```ts
 * it('splits', async (ctx) => { const emulator = needsEmulator(cosmos, 'splitting a range', ctx); … });
 * ```
 */
export function needsEmulator(cosmos: TestCosmos, what: string, ctx: { skip(note?: string): never }): CosmosEmulator {
  if (cosmos.emulator) return cosmos.emulator;
  return ctx.skip(`skipped against ${cosmos.endpoint}: ${what} needs the rxfeed emulator's admin operations`);
}

let containers = 0;

/**
 * A new container in database `db` (created when missing), named `<prefix>-<n>` with `n` unique in this
 * process, partitioned as `partitionKey` (default `/pk`, the emulator's default hash version).
 */
export async function freshContainer(client: CosmosClient, prefix = 'c', partitionKey: PartitionKeyDefinition = { paths: ['/pk'] }): Promise<Container> {
  const { database } = await client.databases.createIfNotExists({ id: 'db' });
  const { container } = await database.containers.createIfNotExists({ id: `${prefix}-${++containers}`, partitionKey });
  return container;
}
