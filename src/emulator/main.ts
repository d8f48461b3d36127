#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { CosmosEmulator } from './CosmosEmulator.js';
import type { CrossPartitionQueries } from './handlers/context.js';

const USAGE = `usage: rxfeed emulator [--port 8081] [--host 127.0.0.1] [--partitions|--ranges 1] [--page-size 100]
                       [--master-key <base64>] [--no-auth] [--cross-partition-queries gateway|client]

Runs the rxfeed Cosmos DB emulator until interrupted and prints the endpoint and the key to pass to
@azure/cosmos (the official emulator's well-known key, or the --master-key you chose); requests are
signature-checked unless --no-auth is given. Containers get about one partition key range per 10,000 RU/s
of requested throughput; --partitions fixes the count for every container instead. Queries over a whole
container run on the emulator as on the service's gateway; --cross-partition-queries client refuses them with
the query plan instead, so that the SDK queries each range itself.
Admin over HTTP: POST /_emulator/split {databaseId, containerId, rangeId[, boundary]}, POST /_emulator/merge,
POST|DELETE /_emulator/faults, POST /_emulator/reset, GET /_emulator/ranges/<db>/<container>, /_emulator/dump,
/_emulator/requests.`;

function intArg(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n)) throw new Error(`--${name} must be an integer, got ${raw}`);
  return n;
}

/**
 * What the CLI prints at start: where to connect and with which key, in a form a shell can paste. The
 * well-known emulator key is public and printed as is; a `--master-key` the user chose is not echoed back.
 */
function startupLines(endpoint: string, key: string, ownKey: boolean, checkAuth: boolean): string[] {
  const keyLine = !checkAuth
    ? 'key:      any key is accepted (--no-auth); the SDK still needs one, e.g. the official emulator key'
    : ownKey
      ? 'key:      the --master-key you passed'
      : `key:      ${key}`;
  const lines = [`rxfeed Cosmos DB emulator listening on ${endpoint}`, `endpoint: ${endpoint}`, keyLine];
  if (checkAuth && !ownKey) lines.push(`export COSMOS_ENDPOINT=${endpoint} COSMOS_KEY='${key}'`);
  return lines;
}

/**
 * Starts an emulator from command-line arguments and prints its endpoint; the body of an `emulator` CLI
 * command. Stopping it (e.g. on SIGINT) is the caller's part.
 *
 * @example
 * ```ts
 * import { runEmulatorCli } from './main.js';
 * await runEmulatorCli(['--port', '8081', '--ranges', '4']);
 * ```
 * @param argv - arguments after the command name.
 * @param print - where the endpoint line (or the usage) goes. Default `console.log`.
 * @returns the running emulator, or `undefined` after `--help`.
 * @internal The body of `rxfeed emulator` (src/cli), not part of `rxfeed/emulator`.
 */
export async function runEmulatorCli(argv: string[], print: (line: string) => void = console.log): Promise<CosmosEmulator | undefined> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: '8081' },
      host: { type: 'string', default: '127.0.0.1' },
      ranges: { type: 'string' },
      'page-size': { type: 'string' },
      'master-key': { type: 'string' },
      partitions: { type: 'string' },
      'no-auth': { type: 'boolean' },
      'cross-partition-queries': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    print(USAGE);
    return undefined;
  }
  const ranges = intArg('ranges', values.ranges ?? values.partitions);
  const pageSize = intArg('page-size', values['page-size']);
  const emulator = await CosmosEmulator.start({
    port: intArg('port', values.port) ?? 8081,
    host: values.host ?? '127.0.0.1',
    ...(ranges !== undefined ? { initialRangeCount: ranges } : {}),
    ...(pageSize !== undefined ? { changeFeedPageSize: pageSize } : {}),
    ...(values['master-key'] !== undefined ? { masterKey: values['master-key'] } : {}),
    checkAuth: !values['no-auth'],
    ...(values['cross-partition-queries'] !== undefined ? { crossPartitionQueries: values['cross-partition-queries'] as CrossPartitionQueries } : {}),
  });
  for (const line of startupLines(emulator.endpoint, emulator.key, values['master-key'] !== undefined, !values['no-auth'])) print(line);
  return emulator;
}

// Run when executed directly, also through an npm bin symlink (argv[1] is then the link).
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  runEmulatorCli(process.argv.slice(2)).then(
    (emulator) => {
      const stop = (): void => void emulator?.stop().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : err);
      console.error(USAGE);
      process.exit(2);
    },
  );
}
