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
  // process's CPU time depends on where the scheduler happens to put the other. `-a`: all of this process's
  // threads (V8's compiler and GC threads, libuv's pool), which exist by now; without it only the main thread
  // was pinned and the background threads ran on either CPU, the emulator's among them.
  const pinned = process.env.BENCH_PIN === '1';
  if (pinned) execFileSync('taskset', ['-a', '-cp', '0', String(process.pid)], { stdio: 'ignore' });
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
 * `[command, args]` to start a helper process (a writer) beside the emulator: on the emulator's CPU with
 * BENCH_PIN=1 (a child inherits its parent's CPU, the measured one), as it is otherwise.
 */
export function besideEmulator(command: string, args: readonly string[]): [string, string[]] {
  return process.env.BENCH_PIN === '1' ? ['taskset', ['-c', '1', command, ...args]] : [command, [...args]];
}

/**
 * The CPU time (ms) of this process's main thread so far, from the kernel's scheduler statistics (ns of
 * on-CPU time); `undefined` without /proc. The process's CPU time minus this is its other threads' (V8's
 * optimizing compiler, concurrent marking and sweeping, libuv's pool).
 */
export function mainThreadCpuMs(): number | undefined {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return undefined;
  }
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
