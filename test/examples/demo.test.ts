import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { main } from '../../examples/demo/main.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Runs the demo as `npm run demo` does (a separate process), with a short duration. */
function runDemo(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/demo/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, COSMOS_ENDPOINT: undefined, DEBUG: undefined },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('npm run demo', () => {
  it.each([
    ['allVersionsAndDeletes (the default)', ['--duration-ms', '10000', '--ranges', '4', '--rate', '100']],
    ['latestVersion', ['--duration-ms', '8000', '--ranges', '2', '--rate', '100', '--mode', 'latestVersion']],
  ])('%s: two instances survive a SIGKILL with a takeover and the demo ends with PASS and exit code 0', { timeout: 240_000 }, async (_mode, args) => {
    const { code, output } = await runDemo(args);
    const killed = /^.*>>> SIGKILL (host-[ab]) .*owner of ranges? ([\d,]+)/m.exec(output);
    expect(killed, output).not.toBeNull();
    const [, victim, ranges] = killed!;
    const survivor = victim === 'host-a' ? 'host-b' : 'host-a';
    for (const range of ranges!.split(',')) expect(output).toContain(`>>> ${survivor} took over range ${range} from ${victim}`);
    expect(output).toMatch(/>>> takeover complete/);
    // Live progress lines with rates, lag and ownership.
    expect(output).toMatch(/written \d+ \(\d+\/s\) {2}processed \d+ \(\d+\/s\) {2}lag \S+ {2}ranges host-/);
    expect(output).toMatch(/PASS: view order_summary has (\d+) rows for \1 open orders/);
    expect(output).not.toMatch(/FAIL/);
    expect(code, output).toBe(0);
  });

  it('says what to fix for a bad flag', async () => {
    await expect(main(['--ranges', '0'])).rejects.toThrow(/--ranges must be a positive integer/);
    await expect(main(['--rate', 'fast'])).rejects.toThrow(/--rate must be a positive number/);
    await expect(main(['--duration-ms=-5'])).rejects.toThrow(/--duration-ms must be a positive number/);
    await expect(main(['--mode', 'all'])).rejects.toThrow(/--mode must be allVersionsAndDeletes or latestVersion/);
  });
});
