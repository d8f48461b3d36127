/**
 * @summary Statement profile of bench/views.ts' PostgreSQL comparison at one batch size: per round, the
 * statements each side sent (how many, time from send to reply, parameter size), the CPU the pool's server
 * processes used (read from /proc: the server must run on this machine) and the client's CPU, for
 * materializeToView (`rxfeed`), the hand-written loop (`hand`) and materializeToView with every partition's
 * range stored before the timed part (`rxfeed-prestored`: what a partition's first write costs is the
 * difference), alternating in one process; then the medians and the paired ratios (hand over rxfeed).
 *
 * Run: npx tsx bench/viewsProfile.ts [changes=20000] [batch=1000] [rounds=3]
 * Env: QUIET=1 prints the summary only; TIMELINE=1 prints each statement's start and end (ms into the round,
 * by server process); ONLY=rxfeed|hand|rxfeed-prestored runs one side (for `node --cpu-prof`).
 */
import { watchPgQueries } from './pgQueryHook.js';
import { performance } from 'node:perf_hooks';
import { loadavg } from 'node:os';

const CHANGES = process.argv[2] ?? '20000';
const BATCH = Number(process.argv[3] ?? 1000);
const ROUNDS = Number(process.argv[4] ?? 3);
process.argv[2] = CHANGES;

const TIMELINE = process.env.TIMELINE === '1';
let roundStart = 0;
let timeline: string[] = [];
type Stat = { n: number; ms: number; bytes: number };
let stats = new Map<string, Stat>();
const kind = (text: string): string => {
  const t = text.replace(/\s+/g, ' ').trim();
  if (t.startsWith('WITH expected')) return t.includes('tombstoned') ? 'writeGuarded (CTE)' : 'writeUnguarded (CTE)';
  return t.slice(0, 48);
};
watchPgQueries<{ processID?: number }>((client, args) => {
  const a0 = args[0] as string | { text: string; values?: unknown[] };
  const text = typeof a0 === 'string' ? a0 : a0.text;
  const values = typeof a0 === 'string' ? (args[1] as unknown[] | undefined) : a0.values;
  const bytes = (values ?? []).reduce<number>((s, v) => s + (typeof v === 'string' ? v.length : 8), 0);
  const t0 = performance.now();
  const note = () => {
    const k = kind(text);
    if (TIMELINE && roundStart > 0) timeline.push(`${String(client.processID).padStart(7)} ${(t0 - roundStart).toFixed(1).padStart(7)} → ${(performance.now() - roundStart).toFixed(1).padStart(7)}  ${k}`);
    const s = stats.get(k) ?? { n: 0, ms: 0, bytes: 0 };
    s.n++;
    s.ms += performance.now() - t0;
    s.bytes += bytes;
    stats.set(k, s);
  };
  return note;
});

const QUIET = process.env.QUIET === '1';
const walls = new Map<string, number[]>();
const cpus = new Map<string, number[]>();
const { runRound, endRounds, roundPool, onTimed } = await import('./views.js');
import { readFileSync } from 'node:fs';

/** CPU ms (user + system) the pool's backends used so far, read from /proc (the server runs on this machine). */
const serverCpuMs = (): number => {
  const pool = roundPool() as unknown as { _clients?: { processID?: number }[] } | undefined;
  let ticks = 0;
  for (const client of pool?._clients ?? []) {
    try {
      const fields = readFileSync(`/proc/${client.processID}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // not readable: the server is elsewhere
    }
  }
  return ticks * 10;
};
for (let round = 0; round < ROUNDS; round++) {
  const order = (process.env.ONLY ? [process.env.ONLY] : ['rxfeed', 'hand', 'rxfeed-prestored']) as ('rxfeed' | 'hand' | 'rxfeed-prestored')[];
  for (const which of round % 2 ? [...order].reverse() : order) {
    let server0 = 0;
    let client0 = process.cpuUsage();
    let server = 0;
    let client = client0;
    onTimed((phase) => {
      if (phase === 'start') {
        stats = new Map();
        timeline = [];
        roundStart = performance.now();
        server0 = serverCpuMs();
        client0 = process.cpuUsage();
      } else {
        if (TIMELINE) console.log(`\n${which} timeline (server process, start → end ms):\n${timeline.join('\n')}`);
        roundStart = 0;
        client = process.cpuUsage(client0);
        server = serverCpuMs() - server0;
      }
    });
    const ms = await runRound(which, BATCH);
    walls.set(which, [...(walls.get(which) ?? []), ms]);
    cpus.set(which, [...(cpus.get(which) ?? []), server]);
    if (QUIET) continue;
    console.log(
      `\n${which}, batch ${BATCH}: ${ms.toFixed(0)} ms wall, server CPU ${server} ms, client CPU ${((client.user + client.system) / 1000).toFixed(0)} ms (load ${loadavg()[0]!.toFixed(1)})`,
    );
    for (const [k, s] of [...stats].sort((x, y) => y[1].ms - x[1].ms)) {
      console.log(`  ${String(s.n).padStart(4)} × ${(s.ms / s.n).toFixed(2).padStart(7)} ms  (${s.ms.toFixed(0).padStart(5)} ms, ${(s.bytes / s.n / 1024).toFixed(0)} KiB params)  ${k}`);
    }
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const hand = walls.get('hand') ?? [];
for (const [which, ms] of walls) {
  if (which === 'hand' || hand.length === 0) continue;
  const ratios = ms.map((m, i) => hand[i]! / m);
  console.log(`${which}: median ${median(ms).toFixed(0)} ms, hand ${median(hand).toFixed(0)} ms, paired ratio ${median(ratios).toFixed(2)}; server CPU ${median(cpus.get(which)!)} vs hand ${median(cpus.get('hand')!)} ms`);
}
console.log(`load ${loadavg()[0]!.toFixed(1)}`);
await endRounds();
