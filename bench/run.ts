/**
 * The core dataflow benchmarks, printed side by side (no assertions; figures vary by machine):
 * operator overhead versus a bare loop, and heap growth under a slow sink versus an eager reader.
 *
 * Run: npx tsx bench/run.ts   (or `npm run bench`)
 */
import { formatMemory, runMemory } from './memory.js';
import { formatOverhead, runOverhead } from './overhead.js';

console.log(`node ${process.version}, ${process.platform}/${process.arch}\n`);
for (const pageSize of [100, 1_000]) console.log(formatOverhead(await runOverhead({ pageSize })) + '\n');
console.log(formatMemory(await runMemory()));
