#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { type CliIO, processIO, UsageError } from './cosmosArgs.js';

const USAGE = `usage: rxfeed <command> [options]

commands:
  leases      list, rewind, release or reset a processor's leases (rxfeed leases --help)
  lag         how far behind each lease is (rxfeed lag --help)
  emulator    run the local Cosmos DB emulator (rxfeed emulator --help)
  help        print this text`;

/**
 * The `rxfeed` command: dispatches to a subcommand.
 *
 * @example
 * ```sh
 * npx rxfeed emulator --port 8081 --partitions 4
 * ```
 * @param argv - arguments after `rxfeed`.
 * @param io - where output goes and the environment it reads (`COSMOS_ENDPOINT`, `COSMOS_KEY`). Default: the process's.
 * @returns the process exit code (0 = ok, 1 = refused or failed, 2 = usage error); long-running commands keep the
 * process alive.
 */
export async function main(argv: string[], io: CliIO = processIO): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'leases':
    case 'lag':
      try {
        const run = command === 'leases' ? (await import('./leasesCli.js')).runLeasesCli : (await import('./lagCli.js')).runLagCli;
        return await run(rest, io);
      } catch (error) {
        return failure(error, io, command);
      }
    case 'emulator': {
      const { runEmulatorCli } = await import('../emulator/main.js');
      const emulator = await runEmulatorCli(rest, io.out);
      if (emulator) {
        const stop = (): void => void emulator.stop().then(() => process.exit(0));
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      }
      return 0;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return 0;
    default:
      console.error(`rxfeed: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}

/** Prints what went wrong (a usage mistake with the usage) and returns the exit code. */
function failure(error: unknown, io: CliIO, command: string): number {
  if (error instanceof UsageError) {
    io.err(`rxfeed ${command}: ${error.message}\n(rxfeed ${command} --help for the options)`);
    return 2;
  }
  const code = (error as { code?: unknown }).code;
  io.err(`rxfeed ${command}: ${error instanceof Error ? error.message : String(error)}${code !== undefined ? ` (code ${String(code)})` : ''}`);
  return 1;
}

// Run when executed directly, also through the npm bin symlink (argv[1] is then the link).
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      if (code !== 0) process.exit(code);
    },
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(2);
    },
  );
}
