import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileProject } from './compile.js';

/**
 * Installs the packed tarball into fresh projects, as a user would, and type-checks (skipLibCheck off) and
 * runs a small pipeline on `rxfeed/emulator` in each: ESM and CommonJS, JavaScript and TypeScript with
 * node16, nodenext and bundler resolution. Offline: rxfeed is extracted from the tarball; what npm would
 * install next to it (its dependencies, its required peers, and `@types/node`) is linked from this repo's
 * node_modules. The optional peers (pg, PGlite, prom-client) are absent, as in a fresh project.
 */

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));
const fixtures = join(repo, 'test', 'package', 'fixtures');

interface Cell {
  readonly name: string;
  readonly type: 'module' | 'commonjs';
  /** `module`/`moduleResolution` for TypeScript cells; JavaScript cells run the fixture as is. */
  readonly ts?: { module: string; moduleResolution: string };
  /** Also run the README's quick start (every TypeScript cell type-checks it). */
  readonly quickStart?: boolean;
}

const cells: Cell[] = [
  { name: 'js-esm', type: 'module' },
  { name: 'js-cjs', type: 'commonjs', quickStart: true },
  { name: 'ts-node16-esm', type: 'module', ts: { module: 'node16', moduleResolution: 'node16' } },
  { name: 'ts-node16-cjs', type: 'commonjs', ts: { module: 'node16', moduleResolution: 'node16' } },
  { name: 'ts-nodenext-esm', type: 'module', ts: { module: 'nodenext', moduleResolution: 'nodenext' }, quickStart: true },
  { name: 'ts-nodenext-cjs', type: 'commonjs', ts: { module: 'nodenext', moduleResolution: 'nodenext' }, quickStart: true },
  { name: 'ts-bundler-esm', type: 'module', ts: { module: 'esnext', moduleResolution: 'bundler' } },
];

/** The code block after `<!-- quickstart:<name> -->` in README.md. */
function readmeBlock(name: string): string {
  const readme = readFileSync(join(repo, 'README.md'), 'utf8');
  const match = new RegExp(`<!-- quickstart:${name} -->\\s*\`\`\`\\w+\\n([\\s\\S]*?)\`\`\``).exec(readme);
  if (!match) throw new Error(`README.md has no <!-- quickstart:${name} --> code block`);
  return match[1]!;
}

/** The CommonJS JavaScript quick start: the README's complete `require` program, as written. */
function readmeCommonJs(): string {
  return readmeBlock('cjs');
}

let root: string;
const skipReason = existsSync(join(repo, 'dist', 'cjs', 'index.js')) ? undefined : 'dist is missing: run `npm run build` first';

beforeAll(async () => {
  if (skipReason) {
    if (process.env.CI) throw new Error(skipReason);
    console.log(`skipped packaging test: ${skipReason}`);
    return;
  }
  root = mkdtempSync(join(tmpdir(), 'rxfeed-pkg-'));
  const { stdout } = await run(process.execPath, [join(repo, 'scripts', 'pack.mjs')], { cwd: repo });
  const tarball = stdout.trim().split('\n').pop()!;
  const installed = join(root, 'node_modules', 'rxfeed');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    scripts?: Record<string, string>;
  };
  expect(manifest.scripts?.prepare, 'the published manifest has no install-time script').toBeUndefined();
  const requiredPeers = Object.keys(manifest.peerDependencies ?? {}).filter((p) => !manifest.peerDependenciesMeta?.[p]?.optional);
  // The emulator answers the lease store's query with the optional @zeit/cosmosdb-query as long as its
  // source imports it; a quick start user then installs it too.
  const emulatorQuery = readFileSync(join(repo, 'src', 'emulator', 'QueryEngine.ts'), 'utf8').includes("'@zeit/cosmosdb-query'");
  const extra = emulatorQuery ? ['@zeit/cosmosdb-query'] : [];
  for (const dep of [...Object.keys(manifest.dependencies ?? {}), ...requiredPeers, '@types/node', ...extra]) {
    const link = join(root, 'node_modules', dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(repo, 'node_modules', dep), link, 'dir');
  }
  for (const cell of cells) {
    const dir = join(root, cell.name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: cell.name, private: true, type: cell.type }));
    if (!cell.ts) {
      cpSync(join(fixtures, cell.type === 'module' ? 'pipeline.mjs' : 'pipeline.cjs'), join(dir, 'index.js'));
      // The README's CommonJS JavaScript variant: its `require` block in front of the program without types.
      if (cell.quickStart) writeFileSync(join(dir, 'quickstart.js'), readmeCommonJs());
      continue;
    }
    mkdirSync(join(dir, 'src'));
    cpSync(join(fixtures, 'pipeline.ts'), join(dir, 'src', 'index.ts'));
    // The README's quick start, as written, type-checked under every module kind and resolution.
    writeFileSync(join(dir, 'src', 'quickstart.ts'), readmeBlock('esm'));
    const compilerOptions = {
      ...cell.ts,
      target: 'ES2022',
      lib: ['ES2022'],
      types: ['node'],
      strict: true,
      skipLibCheck: false,
      esModuleInterop: cell.type === 'commonjs',
      rootDir: 'src',
      outDir: 'out',
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src'] }, null, 2));
  }
}, 60_000);

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.skipIf(skipReason !== undefined && !process.env.CI)('the packed package in a fresh project', () => {
  it.each(cells)('$name: type-checks with skipLibCheck off and runs a pipeline on the emulator (and the README quick start)', async (cell) => {
    const dir = join(root, cell.name);
    const out = cell.ts ? join(dir, 'out') : dir;
    if (cell.ts) expect(compileProject(dir)).toEqual([]);
    const entry = join(out, 'index.js');
    // Compiled to the format the project asked for: `require` in CommonJS, `import` in ESM.
    const emitted = readFileSync(entry, 'utf8');
    expect(emitted.includes('require("rxfeed")') || emitted.includes("require('rxfeed')")).toBe(cell.type === 'commonjs');
    const env = { ...process.env, DEBUG: '' };
    const runs = [run(process.execPath, [entry], { cwd: dir, env, timeout: 30_000 })];
    if (cell.quickStart) runs.push(run(process.execPath, [join(out, 'quickstart.js')], { cwd: dir, env, timeout: 30_000 }));
    const [pipeline, quickStart] = await Promise.all(runs);
    expect(pipeline!.stdout.trim()).toBe('ok 5 true true');
    if (quickStart) expect(quickStart.stdout).toContain('totals: { ada: 42, bob: 7 }');
  });
});
