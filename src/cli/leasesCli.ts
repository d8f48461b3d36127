import { listLeases, releaseLeases, resetLeases, rewindLeases, type LeaseChange, type RewindTarget } from '../admin/index.js';
import { DEFAULT_LEASE_PREFIX } from '../leases/coordinator/timings.js';
import { type CliIO, parseCosmosArgs, progressLine, UsageError } from './cosmosArgs.js';
import { connect } from './connect.js';
import { duration, table } from './table.js';

/** Usage of `rxfeed leases`. */
export const LEASES_USAGE = `usage: rxfeed leases <ls|rewind|release|reset> --database <id> [options]

  ls                      list leases: owner, state (owned|expired|free), checkpoint, epoch, age
  rewind --to <target>    move checkpoints: beginning | now | an ISO time (2026-11-22T00:00:00Z) | a position
                          (a position needs exactly one --lease); needs --container for all but a position
  release                 free owned leases (owner cleared, epoch raised) so another host takes them
  reset                   delete every lease and the bootstrap markers; the next start bootstraps again

options:
  --endpoint <url>        account endpoint (default: $COSMOS_ENDPOINT)
  --key <key>             account key (default: $COSMOS_KEY); never printed
  --database <id>         database of the containers
  --container <id>        the monitored container
  --lease-container <id>  the lease container (default: leases)
  --prefix <prefix>       the processor's lease prefix (default: rxfeed.); with --lease-scheme dotnet, the .NET
                          prefix: the part of a lease id before '..'
  --lease-scheme <scheme> how the processor names its leases: rxfeed (<prefix><token>, the default) or dotnet
                          (<prefix>..<token>: the .NET change feed processor and Azure Functions Cosmos DB trigger)
  --processor-name <name> with --lease-scheme dotnet, instead of --prefix: the .NET processor name (a Functions
                          trigger's LeaseContainerPrefix, '' when unset); the prefix is computed from it, the
                          --endpoint host and --container (the monitored container)
  --lease <token>         only this lease (repeatable; rewind and release)
  --lease-expiration-ms   the processor's lease expiration, decides whether an owner is live (default: 60000)
  --force                 also change leases owned by a live host: fences it (raises the epoch)
  --json                  machine-readable output`;

/**
 * The `rxfeed leases` command: look at and fix a processor's lease container.
 *
 * @example
 * ```sh
 * COSMOS_ENDPOINT=https://acct.documents.azure.com COSMOS_KEY=... rxfeed leases ls --database shop --prefix orders-view.
 * rxfeed leases ls --database shop --container orders --lease-scheme dotnet --processor-name orders-view
 * ```
 * @returns the exit code: 0 done, 1 refused or failed, 2 usage error.
 */
export async function runLeasesCli(argv: string[], io: CliIO): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === 'help' || sub === '--help' || sub === '-h') {
    io.out(LEASES_USAGE);
    return 0;
  }
  if (!['ls', 'rewind', 'release', 'reset'].includes(sub)) throw new UsageError(`unknown leases command '${sub}'`);
  const args = parseCosmosArgs(rest, { to: { type: 'string' }, lease: { type: 'string', multiple: true }, force: { type: 'boolean' } }, io);
  if (args.values.help) {
    io.out(LEASES_USAGE);
    return 0;
  }
  const target = args.target();
  const tokens = args.values.lease as string[] | undefined;
  const force = args.values.force === true;
  const to = sub === 'rewind' ? rewindTarget(args.values.to as string | undefined) : undefined;
  const connection = await connect(target);
  try {
    const naming = await connection.leaseNaming();
    const admin = {
      leases: connection.leases,
      ...naming,
      leaseExpirationMs: target.leaseExpirationMs,
      ...(tokens ? { leaseTokens: tokens } : {}),
    };
    if (sub === 'ls') {
      const { leases, corrupt } = await listLeases(admin);
      if (target.json) io.out(JSON.stringify({ leases, corrupt: corrupt.map((c) => ({ id: c.documentId, problem: c.problem })) }, null, 2));
      else {
        for (const line of table(
          ['LEASE', 'OWNER', 'STATE', 'EPOCH', 'AGE', 'CHECKPOINT'],
          leases.map((l) => [l.leaseToken, l.owner, l.state, l.epoch, duration(l.ageMs), l.continuation]),
        )) {
          io.out(line);
        }
        if (leases.length === 0) io.out(`no leases under prefix '${naming.leasePrefix ?? DEFAULT_LEASE_PREFIX}'${naming.leaseScheme === 'dotnet' ? ' (lease scheme dotnet)' : ''}`);
        for (const c of corrupt) io.err(`unreadable lease document ${c.documentId}: ${c.problem}`);
      }
      return 0;
    }
    let changes: LeaseChange[];
    if (sub === 'rewind') {
      const needsSource = typeof to !== 'object' || to instanceof Date;
      changes = await rewindLeases({
        ...admin,
        to: to!,
        force,
        ...(needsSource ? { source: connection.source() } : {}),
        onProgress: progressLine(io, 'rewinding'),
      });
    } else if (sub === 'release') {
      changes = await releaseLeases({ ...admin, force, onProgress: progressLine(io, 'releasing') });
    } else {
      if (tokens) throw new UsageError('reset deletes every lease of the prefix; use --lease with rewind or release');
      changes = await resetLeases({ ...admin, force, onProgress: progressLine(io, 'deleting') });
    }
    report(io, sub, changes, target.json);
    return 0;
  } finally {
    connection.close();
  }
}

function rewindTarget(text: string | undefined): RewindTarget {
  if (!text) throw new UsageError('rewind needs --to <beginning|now|ISO time|position>');
  if (text === 'beginning' || text === 'now') return text;
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) {
    const at = new Date(text);
    if (!Number.isFinite(at.getTime())) throw new UsageError(`--to ${text} is not a valid ISO 8601 time`);
    return at;
  }
  return { position: text };
}

function report(io: CliIO, verb: string, changes: readonly LeaseChange[], json: boolean): void {
  if (json) {
    io.out(JSON.stringify({ [verb]: changes }, null, 2));
    return;
  }
  if (changes.length === 0) {
    io.out(`nothing to ${verb}`);
    return;
  }
  const rows = changes.map((c) => [c.leaseToken, c.previousOwner, c.fenced ? 'yes' : 'no', c.previousContinuation, c.continuation === undefined ? '(deleted)' : c.continuation]);
  for (const line of table(['LEASE', 'PREVIOUS OWNER', 'FENCED', 'FROM', 'TO'], rows)) io.out(line);
}
