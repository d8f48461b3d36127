import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Starts `src/emulator/main.ts` in a child process on a free port and resolves with its endpoint, so the
 * benchmarks measure the client's CPU alone.
 */
export async function spawnEmulator(): Promise<{ endpoint: string; child: ChildProcess }> {
  const main = fileURLToPath(new URL('../src/emulator/main.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', main, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
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
