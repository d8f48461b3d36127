import { listLeases, releaseLeases, resetLeases, rewindLeases, type LeaseAdminOptions, type LeaseChange, type RewindTarget } from '../admin/index.js';
import { LeaseInUseError } from '../errors/index.js';
import { floorId, type LeaseIds } from '../leases/coordinator/leaseDocuments.js';
import { DEFAULT_LEASE_PREFIX } from '../leases/coordinator/options.js';
import { resolveLeaseIds } from '../leases/leaseNaming.js';
import type { LeaseStore } from '../leases/LeaseStore.js';
import { type CliIO, parseCosmosArgs, progressLine, UsageError } from './cosmosArgs.js';
import { connect, type CosmosConnection } from './connect.js';
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
        if (leases.length === 0) {
          io.out(`no leases under prefix '${naming.leasePrefix ?? DEFAULT_LEASE_PREFIX}'${naming.leaseScheme === 'dotnet' ? ' (lease scheme dotnet)' : ''}`);
          const prefixes = await prefixesIn(connection.leases);
          io.out(prefixes.length > 0 ? `prefixes in lease container '${target.leaseContainer}': ${prefixes.join(', ')}` : `lease container '${target.leaseContainer}' holds no leases`);
        }
        for (const c of corrupt) io.err(`unreadable lease document ${c.documentId}: ${c.problem}`);
      }
      return 0;
    }
    let changes: LeaseChange[];
    try {
      changes = await change(sub, { admin, force, to, tokens, connection, io });
    } catch (error) {
      if (!(error instanceof LeaseInUseError)) throw error;
      const owners = [...new Set(error.inUse.map((l) => l.owner))].join(', ');
      throw new Error(
        `refused: ${error.inUse.length} lease(s) are owned by a live host (${owners}): ${error.inUse.map((l) => l.leaseToken).join(', ')}. ` +
          `Stop the processor first, or pass --force to ${sub} them anyway (fences the owners: their next write is refused)`,
      );
    }
    report(io, sub, changes, target.json);
    if (sub === 'reset' && !target.json) io.out(await afterReset(connection.leases, resolveLeaseIds(naming), changes));
    return 0;
  } finally {
    connection.close();
  }
}

interface ChangeRequest {
  readonly admin: LeaseAdminOptions;
  readonly force: boolean;
  readonly to: RewindTarget | undefined;
  readonly tokens: readonly string[] | undefined;
  readonly connection: CosmosConnection;
  readonly io: CliIO;
}

/** Runs the rewind, release or reset that `sub` names. */
function change(sub: string, { admin, force, to, tokens, connection, io }: ChangeRequest): Promise<LeaseChange[]> {
  if (sub === 'rewind') {
    const needsSource = typeof to !== 'object' || to instanceof Date;
    return rewindLeases({
      ...admin,
      to: to!,
      force,
      ...(needsSource ? { source: connection.source() } : {}),
      onProgress: progressLine(io, 'rewinding'),
    });
  }
  if (sub === 'release') return releaseLeases({ ...admin, force, onProgress: progressLine(io, 'releasing') });
  if (tokens) throw new UsageError('reset deletes every lease of the prefix; use --lease with rewind or release');
  return resetLeases({ ...admin, force, onProgress: progressLine(io, 'deleting') });
}

/** What happens after a reset: who bootstraps again, and from which epoch. */
async function afterReset(store: LeaseStore, ids: LeaseIds, changes: readonly LeaseChange[]): Promise<string> {
  const floor = (await store.read(floorId(ids.markerPrefix)))?.epoch ?? 0;
  const epochs = floor > 0 ? `; the new leases start above epoch ${floor}, so stores fencing by epoch accept them` : '';
  const live = [...new Set(changes.filter((c) => c.fenced).map((c) => c.previousOwner))];
  return live.length > 0
    ? `running hosts (${live.join(', ')}) lose their leases at their next write and bootstrap again from their startFrom${epochs}`
    : `the processor bootstraps again from its startFrom at its next start (running hosts: at their next round)${epochs}`;
}

/** The lease prefixes in a lease container (from its `.info` markers and lease ids), for a prefix that matched nothing. */
async function prefixesIn(store: LeaseStore): Promise<string[]> {
  const { leases } = await store.list('');
  const dotnet = new Set<string>();
  const rxfeed = new Set<string>();
  for (const l of leases) {
    // Markers (`.info`, `.lock`, `.floor`) have an empty token or one starting with a dot.
    if (!l.leaseToken || l.leaseToken.startsWith('.') || !l.id.endsWith(l.leaseToken)) continue;
    const before = l.id.slice(0, -l.leaseToken.length);
    if (before === '') continue;
    if (before.endsWith('..')) dotnet.add(before.slice(0, -2));
    else rxfeed.add(before);
  }
  for (const l of leases) {
    const info = l.id.endsWith('.info') ? l.id.slice(0, -'.info'.length) : undefined;
    if (info && !dotnet.has(info)) rxfeed.add(info);
  }
  return [...[...rxfeed].sort().map((p) => `'${p}'`), ...[...dotnet].sort().map((p) => `'${p}' (--lease-scheme dotnet)`)];
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
