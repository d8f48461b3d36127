import { parseArgs, type ParseArgsConfig } from 'node:util';

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
  readonly prefix: string;
  readonly leaseExpirationMs: number;
  readonly json: boolean;
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
    const expiration = Number(text('lease-expiration-ms') ?? 60_000);
    if (!Number.isFinite(expiration) || expiration <= 0) throw new UsageError('--lease-expiration-ms must be a positive number');
    return {
      endpoint,
      key,
      database,
      container: text('container'),
      leaseContainer: text('lease-container') ?? 'leases',
      prefix: text('prefix') ?? 'rxfeed.',
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
