#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const USAGE = `usage: rxfeed <command> [options]

commands:
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
 * @returns the process exit code (0 = ok, 2 = usage error); long-running commands keep the process alive.
 */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'emulator': {
      const { runEmulatorCli } = await import('../emulator/main.js');
      const emulator = await runEmulatorCli(rest);
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
