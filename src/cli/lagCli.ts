import type { FeedMode } from '../core/Partition.js';
import { estimateLag } from '../estimator/estimateLag.js';
import { type CliIO, parseCosmosArgs, UsageError } from './cosmosArgs.js';
import { connect } from './connect.js';
import { duration, table } from './table.js';

/** Usage of `rxfeed lag`. */
export const LAG_USAGE = `usage: rxfeed lag --database <id> --container <monitored> [--lease-container leases] [--prefix rxfeed.]
                 [--lease-scheme rxfeed|dotnet] [--processor-name <name>]
                 [--mode latestVersion|allVersionsAndDeletes] [--json]

Prints, per lease, how many changes wait after its checkpoint and how old the oldest one is (as the .NET
estimator counts them). Endpoint and key from --endpoint/--key or COSMOS_ENDPOINT/COSMOS_KEY.

  --lease-scheme dotnet   leases in the .NET change feed processor / Azure Functions layout (<prefix>..<token>);
                          give the .NET prefix with --prefix (the part of a lease id before '..') or
                          --processor-name (a Functions trigger's LeaseContainerPrefix, '' when unset), from
                          which it is computed with the --endpoint host and --container`;

/**
 * The `rxfeed lag` command: the backlog of every lease of a processor.
 *
 * @example
 * ```sh
 * rxfeed lag --database shop --container orders --prefix orders-view. --json
 * rxfeed lag --database shop --container orders --lease-scheme dotnet --processor-name orders-view
 * ```
 * @returns the exit code: 0 done, 1 failed, 2 usage error.
 */
export async function runLagCli(argv: string[], io: CliIO): Promise<number> {
  const args = parseCosmosArgs(argv, { mode: { type: 'string' } }, io);
  if (args.values.help) {
    io.out(LAG_USAGE);
    return 0;
  }
  const target = args.target();
  const mode = (args.values.mode as string | undefined) ?? 'latestVersion';
  if (mode !== 'latestVersion' && mode !== 'allVersionsAndDeletes') throw new UsageError(`--mode must be latestVersion or allVersionsAndDeletes, got ${mode}`);
  const connection = await connect(target);
  try {
    const lags = await estimateLag({ source: connection.source(mode as FeedMode), leases: connection.leases, ...(await connection.leaseNaming()) });
    if (target.json) {
      io.out(JSON.stringify({ leases: lags, total: lags.reduce((sum, l) => sum + l.estimatedLag, 0) }, null, 2));
      return 0;
    }
    const rows = lags.map((l) => [l.leaseToken, l.owner, l.estimatedLag, duration(l.timeLagMs), l.lastCheckpoint]);
    for (const line of table(['LEASE', 'OWNER', 'LAG (CHANGES)', 'LAG (TIME)', 'CHECKPOINT'], rows)) io.out(line);
    io.out(`total: ${lags.reduce((sum, l) => sum + l.estimatedLag, 0)} change(s) behind`);
    return 0;
  } finally {
    connection.close();
  }
}
