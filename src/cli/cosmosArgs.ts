import { parseArgs, type ParseArgsConfig } from 'node:util';
import { LEASE_OPTIONS } from '../leases/coordinator/options.js';

/** Where a CLI command writes, and what it reads from the environment (injectable for tests). */
export interface CliIO {
  /** Standard output: the table or the JSON. */
  readonly out: (line: string) => void;
  /** Standard error: errors and the progress line. */
  readonly err: (line: string) => void;
  /** Environment (`COSMOS_ENDPOINT`, `COSMOS_KEY`). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Redraws the one-line progress status (on a terminal); absent where it would only add noise. */
  readonly status?: (text: string) => void;
}

/** The process's own IO. */
export const processIO: CliIO = {
  out: (line) => void process.stdout.write(`${line}\n`),
  err: (line) => void process.stderr.write(`${line}\n`),
  env: process.env,
  ...(process.stderr.isTTY ? { status: (text: string) => void process.stderr.write(`\r\u001b[2K${text}`) } : {}),
};

/** A command-line mistake: printed with the usage, exit code 2. */
export class UsageError extends Error {}

/** The flags every Cosmos command takes. */
export const COSMOS_FLAGS = {
  endpoint: { type: 'string' },
  key: { type: 'string' },
  database: { type: 'string' },
  container: { type: 'string' },
  'lease-container': { type: 'string' },
  prefix: { type: 'string' },
  'lease-scheme': { type: 'string' },
  'processor-name': { type: 'string' },
  'lease-expiration-ms': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

/** The connection and lease settings of a command, read from flags and the environment. */
export interface CosmosTarget {
  readonly endpoint: string;
  /** The account key. Never printed or logged. */
  readonly key: string;
  readonly database: string;
  readonly container: string | undefined;
  readonly leaseContainer: string;
  /** How the processor names its leases: `--prefix` (or, with `processorName`, computed when connected) and `--lease-scheme`. */
  readonly naming: CliLeaseNaming;
  readonly leaseExpirationMs: number;
  readonly json: boolean;
}

/**
 * The lease naming flags: `--prefix` as given (`undefined`: the library's default `rxfeed.`), `--lease-scheme`,
 * and `--processor-name`, from which the .NET prefix is computed once connected (it needs the monitored
 * container's `_rid`).
 */
export interface CliLeaseNaming {
  readonly leasePrefix: string | undefined;
  readonly leaseScheme: 'rxfeed' | 'dotnet';
  /** The .NET processor name (a Functions trigger's `LeaseContainerPrefix`); only with the `dotnet` scheme. */
  readonly processorName: string | undefined;
}

/** Checks the lease naming flags together; throws a {@link UsageError} naming what to fix. */
function leaseNaming(prefix: string | undefined, scheme: string | undefined, processorName: string | undefined, container: string | undefined): CliLeaseNaming {
  const leaseScheme = scheme ?? LEASE_OPTIONS.leaseScheme.default;
  if (leaseScheme !== 'rxfeed' && leaseScheme !== 'dotnet') throw new UsageError(`--lease-scheme must be rxfeed or dotnet, got ${leaseScheme}`);
  if (processorName !== undefined) {
    if (leaseScheme !== 'dotnet') {
      throw new UsageError("--processor-name names a .NET processor (or a Functions trigger's LeaseContainerPrefix): add --lease-scheme dotnet");
    }
    if (prefix !== undefined) throw new UsageError('pass either --prefix or --processor-name, not both (--processor-name computes the prefix)');
    if (!container) throw new UsageError("--processor-name needs --container (the monitored container: its _rid is part of the .NET lease prefix)");
  } else if (leaseScheme === 'dotnet' && prefix === undefined) {
    throw new UsageError(
      "--lease-scheme dotnet needs the .NET lease prefix: pass --processor-name <name> ('' for a Functions trigger without " +
        "LeaseContainerPrefix) with --container, or --prefix <the part of a lease id before '..'>",
    );
  }
  return { leasePrefix: prefix, leaseScheme, processorName };
}

/** Parses `argv` with the common Cosmos flags plus `extra`; throws a {@link UsageError} naming what to fix. */
export function parseCosmosArgs<E extends NonNullable<ParseArgsConfig['options']>>(argv: string[], extra: E, io: CliIO) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...COSMOS_FLAGS, ...extra }, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  const text = (name: string): string | undefined => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
  const target = (): CosmosTarget => {
    const endpoint = text('endpoint') ?? io.env.COSMOS_ENDPOINT;
    const key = text('key') ?? io.env.COSMOS_KEY;
    if (!endpoint) throw new UsageError('no account endpoint: pass --endpoint or set COSMOS_ENDPOINT');
    if (!key) throw new UsageError('no account key: pass --key or set COSMOS_KEY');
    const database = text('database');
    if (!database) throw new UsageError('--database is required');
    const expiration = Number(text('lease-expiration-ms') ?? LEASE_OPTIONS.leaseExpirationMs.default);
    if (!Number.isFinite(expiration) || expiration <= 0) throw new UsageError('--lease-expiration-ms must be a positive number');
    return {
      endpoint,
      key,
      database,
      container: text('container'),
      leaseContainer: text('lease-container') ?? 'leases',
      naming: leaseNaming(text('prefix'), text('lease-scheme'), text('processor-name'), text('container')),
      leaseExpirationMs: expiration,
      json: values.json === true,
    };
  };
  return { values, positionals: parsed.positionals, target };
}

/** A progress reporter for `(done, total)` that redraws one status line and clears it when done. */
export function progressLine(io: CliIO, verb: string): (done: number, total: number) => void {
  const status = io.status;
  if (!status) return () => undefined;
  return (done, total) => status(done < total ? `${verb} ${done}/${total}` : '');
}
