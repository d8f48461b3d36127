// Public: the lease prefix the .NET processor and Azure Functions compute, for `leaseScheme: 'dotnet'`.
import type { Container } from '@azure/cosmos';
import { InvalidOptionsError } from '../errors/index.js';

/** Options of {@link dotnetLeasePrefix}. */
export interface DotnetLeasePrefixOptions {
  /** The monitored container (not the lease container): its and its database's `_rid` are part of the prefix. */
  readonly container: Container;
  /**
   * The account endpoint exactly as the .NET client was given it (e.g. `https://shop.documents.azure.com:443/`);
   * only its host name is used.
   */
  readonly endpoint: string | URL;
  /**
   * The .NET `GetChangeFeedProcessorBuilder(processorName, …)` name; for an Azure Functions Cosmos DB trigger,
   * its `LeaseContainerPrefix` setting (`''` when not set).
   */
  readonly processorName: string;
}

/**
 * The lease prefix the .NET v3 change feed processor, its estimator and the Azure Functions Cosmos DB trigger
 * compute: `<processorName><endpoint host>_<database _rid>_<container _rid>`. Pass it as the prefix together
 * with `leaseScheme: 'dotnet'`; lease ids are then `<prefix>..<lease token>`. Reads the container and its
 * database once (two requests).
 *
 * @example
 * ```ts
 * const leasePrefix = await dotnetLeasePrefix({ container: orders, endpoint, processorName: 'orders-view' });
 * const feed$ = changeFeed({ source, leases, instanceName, leasePrefix, leaseScheme: 'dotnet' });
 * ```
 */
export async function dotnetLeasePrefix(options: DotnetLeasePrefixOptions): Promise<string> {
  const { container, endpoint, processorName } = options ?? ({} as DotnetLeasePrefixOptions);
  if (!container || typeof container.read !== 'function') {
    throw new InvalidOptionsError('container', 'pass the monitored @azure/cosmos Container, e.g. client.database(db).container(id)');
  }
  if (typeof processorName !== 'string') {
    throw new InvalidOptionsError('processorName', "pass the .NET processor name (a Functions trigger's LeaseContainerPrefix, '' when unset)");
  }
  let host: string;
  try {
    host = new URL(String(endpoint)).hostname;
  } catch {
    throw new InvalidOptionsError('endpoint', 'pass the account endpoint the .NET client uses, e.g. https://shop.documents.azure.com:443/');
  }
  const [{ resource: containerDef }, { resource: databaseDef }] = await Promise.all([container.read(), container.database.read()]);
  const containerRid = containerDef?._rid;
  const databaseRid = databaseDef?._rid;
  if (!containerRid || !databaseRid) {
    throw new InvalidOptionsError('container', `container ${container.id} or its database has no _rid; does it exist?`);
  }
  return `${processorName}${host}_${databaseRid}_${containerRid}`;
}
