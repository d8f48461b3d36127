/**
 * @summary A change feed processor made for Kubernetes: health probes on :8080, a graceful stop within the
 * pod's grace period, and leases in the .NET layout so KEDA's `azure-cosmosdb` scaler can scale it on lag.
 *
 * Run: `npx tsx examples/kubernetes/processor.ts` (with `COSMOS_CONNECTION` set; see deployment.yaml)
 *
 * Settings (environment): `COSMOS_CONNECTION` (an account connection string), `COSMOS_DATABASE`,
 * `COSMOS_CONTAINER` (the monitored container), `COSMOS_LEASE_CONTAINER`, `PROCESSOR_NAME` (also in the KEDA
 * trigger), `POD_NAME` (this replica's instance name, from the downward API), `PORT` (probes, default 8080).
 */
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { CosmosClient } from '@azure/cosmos';
import {
  checkpointEvery,
  CosmosLeaseStore,
  CosmosSource,
  createChangeFeed,
  dotnetLeasePrefix,
  eachBatch,
  healthHandler,
  stopOnSignals,
} from 'rxfeed';

/** The pod's grace period is 30 s (deployment.yaml): the stop must end before it, leaving time to exit. */
export const STOP_TIMEOUT_MS = 25_000;
export const PORT = Number(process.env['PORT'] ?? 8080);

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`set ${name} (see examples/kubernetes/deployment.yaml)`);
  return value;
};

async function main(): Promise<void> {
  const connection = env('COSMOS_CONNECTION');
  const client = new CosmosClient(connection);
  const database = client.database(env('COSMOS_DATABASE', 'shop'));
  const container = database.container(env('COSMOS_CONTAINER', 'orders'));
  const endpoint = /AccountEndpoint=([^;]+)/.exec(connection)?.[1] ?? '';
  const feed = createChangeFeed<{ id: string }>({
    source: new CosmosSource(container, { priorityLevel: 'Low' }),
    leases: new CosmosLeaseStore({ container: database.container(env('COSMOS_LEASE_CONTAINER', 'leases')) }),
    instanceName: env('POD_NAME', hostname()),
    // The .NET layout: KEDA's azure-cosmosdb scaler reads these leases to measure the lag.
    leaseScheme: 'dotnet',
    leasePrefix: await dotnetLeasePrefix({ container, endpoint, processorName: env('PROCESSOR_NAME', 'orders-processor') }),
  });
  createServer(healthHandler(feed)).listen(PORT);
  stopOnSignals(feed, { timeoutMs: STOP_TIMEOUT_MS });
  feed.changes$
    .pipe(
      eachBatch(async (batch) => {
        for (const change of batch) console.log(change.operation, change.id);
      }),
      checkpointEvery({ count: 500, ms: 5_000 }),
    )
    .subscribe({ error: (error: unknown) => console.error('processor stopped:', error) });
}

if (process.argv[1]?.endsWith('processor.ts')) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
