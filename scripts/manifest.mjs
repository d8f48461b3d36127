// `prepare` builds rxfeed when it is installed from git (npm runs only `prepare` for git dependencies), but a
// published manifest must carry no install-time scripts (npm 11 warns about them). `prepack` calls this with
// `strip` to take `prepare` out of package.json just before npm writes the tarball, `postpack` with `restore`.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const manifest = fileURLToPath(new URL('../package.json', import.meta.url));
const saved = `${manifest}.orig`;
const command = process.argv[2];

if (command === 'strip') {
  const text = readFileSync(manifest, 'utf8');
  const pkg = JSON.parse(text);
  if (!existsSync(saved)) writeFileSync(saved, text);
  delete pkg.scripts.prepare;
  writeFileSync(manifest, `${JSON.stringify(pkg, null, 2)}\n`);
} else if (command === 'restore') {
  if (existsSync(saved)) renameSync(saved, manifest);
} else {
  console.error('usage: node scripts/manifest.mjs strip|restore');
  process.exit(2);
}
