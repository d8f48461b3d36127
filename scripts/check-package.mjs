// Lints the package as it would be published: packs it (scripts/pack.mjs), then runs publint on the staged
// package and Are The Types Wrong on the tarball (every entry point, for node10, node16 CJS/ESM and bundlers).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
/** The file of a dev dependency's command (read from its manifest: not every package exports package.json). */
const bin = (pkg, name) => {
  const dir = join(root, 'node_modules', pkg);
  return join(dir, JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).bin[name]);
};
const node = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] }).toString();

const tarball = node([join(root, 'scripts', 'pack.mjs')]).trim().split('\n').pop();
try {
  process.stdout.write(node([bin('publint', 'publint'), 'run', join(root, '.pack', 'stage'), '--strict']));
  process.stdout.write(node([bin('@arethetypeswrong/cli', 'attw'), tarball, '--format', 'table-flipped']));
} catch (error) {
  process.stdout.write(String(error.stdout ?? error.message));
  process.exit(1);
}
