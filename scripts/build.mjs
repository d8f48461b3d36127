// Builds the package: ES modules and declarations with tsc (dist/esm), then the same modules as CommonJS
// (dist/cjs), transformed file by file with esbuild, next to a copy of the declarations and a package.json
// that marks the folder as CommonJS. One source, two formats, matching declarations, no bundling.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const esm = join(root, 'dist', 'esm');
const cjs = join(root, 'dist', 'cjs');
const started = process.hrtime.bigint();

rmSync(join(root, 'dist'), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });

/** @param {string} dir */
function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

let count = 0;
for (const file of files(esm)) {
  const rel = relative(esm, file);
  // The command line is ESM only (the bin points at dist/esm).
  if (rel.split(/[\\/]/)[0] === 'cli') continue;
  const out = join(cjs, rel);
  mkdirSync(dirname(out), { recursive: true });
  if (file.endsWith('.d.ts')) {
    copyFileSync(file, out);
  } else if (file.endsWith('.js')) {
    const { code } = transformSync(readFileSync(file, 'utf8'), {
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      sourcefile: rel,
      // `import.meta.url` only serves the "run as a script" checks, which stay off in CommonJS.
      logOverride: { 'empty-import-meta': 'silent' },
    });
    writeFileSync(out, code);
    count++;
  }
}
writeFileSync(join(cjs, 'package.json'), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);
const ms = Number(process.hrtime.bigint() - started) / 1e6;
console.log(`built dist/esm and dist/cjs (${count} CommonJS modules) in ${(ms / 1000).toFixed(1)} s`);
