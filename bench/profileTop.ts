/**
 * Prints the frames with the most self time in a V8 CPU profile (`.cpuprofile`, as written by
 * `node --cpu-prof` or by `BENCH_PROFILE` in bench/idle.ts), with their share of the profiled time, and the
 * share of the frames under `src/` (rxfeed's own code).
 *
 * Run: npx tsx bench/profileTop.ts file.cpuprofile [top=25]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: npx tsx bench/profileTop.ts file.cpuprofile [top]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));

/** Self time (µs) per node: each sample's delta goes to the node sampled. */
const selfUs = new Map<number, number>();
let totalUs = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  totalUs += dt;
});

const shortUrl = (url: string): string => {
  const at = url.search(/\/(src|bench|node_modules)\//);
  return at >= 0 ? url.slice(at + 1) : url.replace(/^file:\/\//, '');
};
const nameOf = (n: ProfileNode): string => {
  const { functionName, url, lineNumber } = n.callFrame;
  return `${functionName || '(anonymous)'} ${url ? `${shortUrl(url)}:${lineNumber + 1}` : ''}`.trim();
};

/** Self time per frame (same function, same place), over all the call paths it appears on. */
const frames = new Map<string, number>();
let idleUs = 0;
let ownUs = 0;
for (const [id, us] of selfUs) {
  const node = byId.get(id)!;
  const name = nameOf(node);
  if (node.callFrame.functionName === '(idle)') idleUs += us;
  if (/\/src\//.test(node.callFrame.url) && !/\/src\/emulator\//.test(node.callFrame.url)) ownUs += us;
  frames.set(name, (frames.get(name) ?? 0) + us);
}
const busyUs = totalUs - idleUs;
const pct = (us: number, of: number) => `${((100 * us) / Math.max(1, of)).toFixed(1)}%`;
console.log(`${file}: ${(totalUs / 1000).toFixed(0)} ms profiled, ${(busyUs / 1000).toFixed(0)} ms not idle; rxfeed src/ frames ${pct(ownUs, busyUs)} of that`);
console.log(`self ms   | % busy | frame`);
for (const [name, us] of [...frames].filter(([n]) => !n.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${(us / 1000).toFixed(1).padStart(9)} | ${pct(us, busyUs).padStart(6)} | ${name}`);
}
