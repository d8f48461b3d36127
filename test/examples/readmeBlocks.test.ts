/**
 * The README's JavaScript blocks run exactly as written (issue 26, "the first day"): each ```js block is
 * written to a file in a directory inside this repository, where `require('rxfeed')` and `import 'rxfeed'`
 * resolve through the package's own name to the build (`npm run build` first; `npm test` builds before the
 * tests), and run with plain `node`: no transpiler, nothing removed or added.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../..', import.meta.url));

interface Block {
  /** 1-based line of the opening fence, for the test's name. */
  readonly line: number;
  readonly code: string;
}

/** Every ```js (or ```cjs / ```mjs) block of the README. */
function javascriptBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(js|cjs|mjs)\s*$/.test(lines[i]!)) continue;
    const end = lines.indexOf('```', i + 1);
    blocks.push({ line: i + 1, code: lines.slice(i + 1, end).join('\n') + '\n' });
    i = end;
  }
  return blocks;
}

function runNode(file: string, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd, env: { ...process.env, DEBUG: '' }, stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const built = existsSync(join(repo, 'dist', 'cjs', 'index.js')) && existsSync(join(repo, 'dist', 'esm', 'index.js'));
const blocks = javascriptBlocks(readFileSync(join(repo, 'README.md'), 'utf8'));
let dir: string | undefined;
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("README.md's JavaScript blocks, run as written with node", () => {
  it('has blocks to run, among them the CommonJS quick start', () => {
    expect(blocks.some((b) => b.code.includes("require('rxfeed')") && b.code.includes("console.log('totals:'"))).toBe(true);
  });

  it.for(blocks.map((b) => [b.line, b] as const))('the block at line %i exits 0', { timeout: 120_000 }, async ([, block], ctx) => {
    if (!built) {
      if (process.env.CI === 'true') throw new Error('dist is missing: `npm run build` must run before the tests');
      console.warn('skipped: dist is missing: run `npm run build` first');
      return ctx.skip();
    }
    // Inside the repository (ignored by git), so that the package's own name resolves to its build.
    dir ??= mkdtempSync(join(repo, '.rxfeed-readme-'));
    const file = join(dir, `line-${block.line}.${/\brequire\(/.test(block.code) ? 'cjs' : 'mjs'}`);
    writeFileSync(file, block.code);
    const { code, stdout, stderr } = await runNode(file, dir);
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    if (block.code.includes('totals:')) expect(stdout).toMatch(/totals: \{ ada: 42, bob: 7 \}/);
  });
});
