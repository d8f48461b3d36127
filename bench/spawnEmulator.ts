import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Starts `src/emulator/main.ts` in a child process on a free port and resolves with its endpoint, so the
 * benchmarks measure the client's CPU alone.
 */
export async function spawnEmulator(): Promise<{ endpoint: string; child: ChildProcess }> {
  const main = fileURLToPath(new URL('../src/emulator/main.ts', import.meta.url));
  // BENCH_EMULATOR_PROFILE=dir: the emulator writes a CPU profile of its whole run there when it stops.
  const profile = process.env.BENCH_EMULATOR_PROFILE;
  const args = [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : []), '--import', 'tsx', main, '--port', '0'];
  // BENCH_PIN=1: the emulator on the second CPU, this process on the first (Linux `taskset`), so neither
  // process's CPU time depends on where the scheduler happens to put the other.
  const pinned = process.env.BENCH_PIN === '1';
  if (pinned) execFileSync('taskset', ['-cp', '0', String(process.pid)], { stdio: 'ignore' });
  const child = pinned
    ? spawn('taskset', ['-c', '1', process.execPath, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const endpoint = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`emulator exited with ${code}: ${out}`)));
  });
  return { endpoint, child };
}

/**
 * The CPU time (user + system, ms, in 10 ms ticks) process `pid` has used so far, from /proc; `undefined`
 * without a pid or without /proc.
 */
export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields after the command name (which is in parentheses): utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return undefined;
  }
}
