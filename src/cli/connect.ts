import type { CosmosClient, Container } from '@azure/cosmos';
import { CosmosLeaseStore } from '../leases/CosmosLeaseStore.js';
import { dotnetLeasePrefix } from '../leases/dotnetLeasePrefix.js';
import type { LeaseNamingOptions } from '../leases/protocol/index.js';
import { CosmosSource } from '../sources/CosmosSource.js';
import { checkHostResolves } from '../sources/cosmos/reachability.js';
import type { FeedMode } from '../core/Partition.js';
import { type CosmosTarget, UsageError } from './cosmosArgs.js';

/** The account, lease store and (when named) monitored source a command works on. */
export interface CosmosConnection {
  readonly leases: CosmosLeaseStore;
  /** The monitored container as a source; needs `--container`. */
  source(mode?: FeedMode): CosmosSource<unknown>;
  /**
   * The processor's lease prefix and scheme as the library takes them; with `--processor-name`, the .NET
   * prefix computed from the monitored container (two reads).
   */
  leaseNaming(): Promise<LeaseNamingOptions>;
  /** Closes the client's connections. */
  close(): void;
}

/** Connects to the account named by `target`. The key goes to the client only; it is never printed. */
export async function connect(target: CosmosTarget): Promise<CosmosConnection> {
  // The SDK retries a host name that does not resolve for about two minutes before it says anything.
  await checkHostResolves(target.endpoint, '--endpoint');
  const { CosmosClient } = await import('@azure/cosmos');
  const client: CosmosClient = new CosmosClient({ endpoint: target.endpoint, key: target.key });
  const database = client.database(target.database);
  const leaseContainer: Container = database.container(target.leaseContainer);
  return {
    leases: new CosmosLeaseStore({ container: leaseContainer }),
    source(mode = 'latestVersion') {
      if (!target.container) throw new UsageError('--container (the monitored container) is required for this command');
      return new CosmosSource(database.container(target.container), { mode });
    },
    async leaseNaming() {
      const { leasePrefix, leaseScheme, processorName } = target.naming;
      if (processorName === undefined) return { ...(leasePrefix !== undefined ? { leasePrefix } : {}), leaseScheme };
      // parseCosmosArgs only lets --processor-name through with --container.
      const container = database.container(target.container!);
      return { leasePrefix: await dotnetLeasePrefix({ container, endpoint: target.endpoint, processorName }), leaseScheme };
    },
    close: () => client.dispose(),
  };
}
