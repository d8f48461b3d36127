// Packs the built package the way `npm publish` would (manifest without `prepare`), without running the
// build again: stages package.json, README.md, LICENSE and dist in .pack/stage and runs `npm pack` there.
// Prints the tarball's path. Used by `npm run check:package` (publint, attw) and test/package.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, '.pack');
const stage = join(out, 'stage');

if (!existsSync(join(root, 'dist', 'esm', 'index.js')) || !existsSync(join(root, 'dist', 'cjs', 'index.js'))) {
  console.error('dist is missing: run `npm run build` first');
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(stage, { recursive: true });
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
delete pkg.scripts.prepare;
writeFileSync(join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
for (const file of ['README.md', 'LICENSE', 'dist']) cpSync(join(root, file), join(stage, file), { recursive: true });
const npm = process.env.npm_execpath;
const args = ['pack', '--ignore-scripts', '--silent', '--pack-destination', out];
const name = (npm ? execFileSync(process.execPath, [npm, ...args], { cwd: stage }) : execFileSync('npm', args, { cwd: stage }))
  .toString()
  .trim()
  .split('\n')
  .pop();
console.log(join(out, name));
