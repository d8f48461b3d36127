/**
 * Prints the frames with the most self time in a V8 CPU profile (`.cpuprofile`, as written by
 * `node --cpu-prof` or by `BENCH_PROFILE` in bench/cosmos.ts and bench/idle.ts), with their share of the
 * profiled time, and the busy time by where the code lives: rxfeed (its `src/` or built `dist/`, the
 * emulator aside), `@azure/cosmos`, other packages, Node's own JavaScript, and the rest (native code, GC).
 *
 * Given two profiles (say, the per-range loops and rxfeed, or rxfeed before and after a change), it prints
 * both side by side with the difference, frames ordered by the larger of the two.
 *
 * A side may be several profiles summed (say, every steady window of one side), given as one argument with
 * the files separated by commas.
 *
 * Run: npx tsx bench/profileTop.ts a.cpuprofile[,a2.cpuprofile…] [b.cpuprofile[,…]] [top=25]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time of one profile: per frame, per place the code lives, and in all (µs). */
interface Summary {
  readonly file: string;
  readonly frames: Map<string, number>;
  readonly places: Map<string, number>;
  readonly busyUs: number;
  readonly totalUs: number;
}

const PLACES = ['rxfeed', '@azure/cosmos', 'other packages', 'node', 'native, GC'] as const;

function placeOf(url: string): (typeof PLACES)[number] {
  if (/\/node_modules\/@azure\/cosmos\//.test(url)) return '@azure/cosmos';
  if (/\/node_modules\//.test(url)) return 'other packages';
  if (/\/(src|dist\/(esm|cjs))\//.test(url) && !/\/emulator\//.test(url)) return 'rxfeed';
  if (url.startsWith('node:')) return 'node';
  return 'native, GC';
}

const shortUrl = (url: string): string => {
  const at = url.search(/\/(src|dist|bench|node_modules)\//);
  return at >= 0 ? url.slice(at + 1) : url.replace(/^file:\/\//, '');
};

function summarize(file: string): Summary {
  const frames = new Map<string, number>();
  const places = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const one of file.split(',')) {
    const profile = JSON.parse(readFileSync(one, 'utf8')) as Profile;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    profile.samples.forEach((id, i) => {
      // The first delta runs from the profile's start to its first sample (the inspector's `dispatch` of
      // `Profiler.start`, up to 150 ms): not time of any frame.
      if (i === 0) return;
      const us = profile.timeDeltas[i] ?? 0;
      const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
      totalUs += us;
      if (functionName === '(idle)') {
        idleUs += us;
        return;
      }
      const name = `${functionName || '(anonymous)'} ${url ? `${shortUrl(url)}:${lineNumber + 1}` : ''}`.trim();
      frames.set(name, (frames.get(name) ?? 0) + us);
      const place = placeOf(url);
      places.set(place, (places.get(place) ?? 0) + us);
    });
  }
  return { file, frames, places, busyUs: totalUs - idleUs, totalUs };
}

const args = process.argv.slice(2);
const files = args.filter((a) => a.endsWith('.cpuprofile'));
const top = Number(args.find((a) => !a.endsWith('.cpuprofile')) ?? 25);
if (files.length < 1 || files.length > 2) {
  console.error('usage: npx tsx bench/profileTop.ts a.cpuprofile [b.cpuprofile] [top]');
  process.exit(2);
}
const summaries = files.map(summarize);
const ms = (us: number | undefined) => ((us ?? 0) / 1000).toFixed(1).padStart(9);
const pct = (us: number | undefined, of: number) => `${((100 * (us ?? 0)) / Math.max(1, of)).toFixed(1)}%`.padStart(6);

for (const [i, s] of summaries.entries()) {
  console.log(`${'ab'[i]}: ${s.file.split(',').length > 1 ? `${s.file.split(',').length} profiles (${s.file.split(',')[0]} …)` : s.file}: ${(s.totalUs / 1000).toFixed(0)} ms profiled, ${(s.busyUs / 1000).toFixed(0)} ms not idle`);
}
const [a, b] = summaries as [Summary, Summary | undefined];
const header = b ? `   a ms   |    b ms   |  b − a   |` : `self ms   | % busy |`;
console.log(`\n${header} where the code lives`);
for (const place of PLACES) {
  const x = a.places.get(place);
  console.log(b ? `${ms(x)} | ${ms(b.places.get(place))} | ${ms((b.places.get(place) ?? 0) - (x ?? 0))} | ${place}` : `${ms(x)} | ${pct(x, a.busyUs)} | ${place}`);
}
console.log(`\n${header} frame (self time)`);
const names = [...new Set([...a.frames.keys(), ...(b?.frames.keys() ?? [])])];
const weight = (name: string) => Math.max(a.frames.get(name) ?? 0, b?.frames.get(name) ?? 0);
for (const name of names.sort((x, y) => weight(y) - weight(x)).slice(0, top)) {
  const x = a.frames.get(name);
  console.log(b ? `${ms(x)} | ${ms(b.frames.get(name))} | ${ms((b.frames.get(name) ?? 0) - (x ?? 0))} | ${name}` : `${ms(x)} | ${pct(x, a.busyUs)} | ${name}`);
}
