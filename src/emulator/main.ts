#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { CosmosEmulator } from './CosmosEmulator.js';

const USAGE = `usage: rxfeed emulator [--port 8081] [--host 127.0.0.1] [--partitions|--ranges 1] [--page-size 100]
                       [--master-key <base64>] [--no-auth]

Runs the rxfeed Cosmos DB emulator until interrupted. Point @azure/cosmos at the printed endpoint with the
official emulator's well-known key (or the --master-key you chose); requests are signature-checked unless
--no-auth is given.
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
 * Starts an emulator from command-line arguments and prints its endpoint; the body of an `emulator` CLI
 * command. Stopping it (e.g. on SIGINT) is the caller's part.
 *
 * @example
 * ```ts
 * import { runEmulatorCli } from 'rxfeed/emulator';
 * await runEmulatorCli(['--port', '8081', '--ranges', '4']);
 * ```
 * @param argv - arguments after the command name.
 * @param print - where the endpoint line (or the usage) goes. Default `console.log`.
 * @returns the running emulator, or `undefined` after `--help`.
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
  });
  print(`rxfeed Cosmos DB emulator listening on ${emulator.endpoint}`);
  if (values['master-key'] === undefined && !values['no-auth']) print('key: the official emulator key (EMULATOR_KEY in rxfeed/emulator)');
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
