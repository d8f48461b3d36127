import type { FeedMode } from '../core/Partition.js';
import { estimateLag } from '../estimator/estimateLag.js';
import { type CliIO, parseCosmosArgs, UsageError } from './cosmosArgs.js';
import { connect } from './connect.js';
import { duration, table } from './table.js';

/** Usage of `rxfeed lag`. */
export const LAG_USAGE = `usage: rxfeed lag --database <id> --container <monitored> [--lease-container leases] [--prefix rxfeed.]
                 [--mode latestVersion|allVersionsAndDeletes] [--json]

Prints, per lease, how many changes wait after its checkpoint and how old the oldest one is (as the .NET
estimator counts them). Endpoint and key from --endpoint/--key or COSMOS_ENDPOINT/COSMOS_KEY.`;

/**
 * The `rxfeed lag` command: the backlog of every lease of a processor.
 *
 * @example
 * ```sh
 * rxfeed lag --database shop --container orders --prefix orders-view. --json
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
    const lags = await estimateLag({ source: connection.source(mode as FeedMode), leases: connection.leases, leasePrefix: target.prefix });
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
