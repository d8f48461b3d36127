/**
 * @summary Per-round timeline of bench/views.ts' fresh-view rounds, aggregated over rounds: when the first
 * statement went out, the range store (each statement's time, its COMMIT's reply), when the partitions' first
 * write statements went out and replied, and the same for the hand-written loop's first transactions (BEGIN
 * sent, upserts sent, COMMIT replied); plus the server CPU of the pool's backends (`/proc/<pid>/schedstat`, ns
 * on CPU: the server must run on this machine) and the client's CPU per round. Sides `rxfeed`, `hand` and
 * `rxfeed-prestored` (ranges stored before the timed part) alternate; medians over rounds, ms into the round.
 *
 * Run: npx tsx bench/viewsFirstWrites.ts [changes=4000] [batch=1000] [rounds=20]
 * (4000 changes at batch 1000: one batch per partition, a round is the first writes alone.)
 */
import { watchPgQueries } from './pgQueryHook.js';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

const CHANGES = process.argv[2] ?? '4000';
const BATCH = Number(process.argv[3] ?? 1000);
const ROUNDS = Number(process.argv[4] ?? 20);
process.argv[2] = CHANGES; // bench/views.ts reads it

interface Statement {
  readonly pid: number;
  readonly sent: number;
  readonly replied: number;
  readonly kind: string;
}
let roundStart = 0;
let statements: Statement[] = [];

/** A statement's kind, from its text. */
function kindOf(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  if (t.startsWith('WITH expected')) return 'write';
  if (t === 'BEGIN' || t === 'COMMIT') return t;
  if (t.startsWith('SELECT generation')) return 'lineage';
  if (/^INSERT INTO \S+_positions/.test(t)) return 'lockPartitions';
  if (t.startsWith('SELECT o.')) return 'selectRanges';
  if (/^UPDATE \S+_positions/.test(t)) return 'storeRanges';
  if (/^INSERT INTO \S+_tombstones/.test(t)) return 'tombstone';
  if (t.startsWith('INSERT')) return 'upsert';
  if (t.startsWith('DELETE')) return 'delete';
  return t.slice(0, 24);
}

watchPgQueries<{ processID: number }>((client, args) => {
  const a0 = args[0] as string | { text: string };
  const kind = kindOf(typeof a0 === 'string' ? a0 : a0.text);
  const sent = performance.now();
  const note = () => {
    if (roundStart > 0) statements.push({ pid: client.processID, sent: sent - roundStart, replied: performance.now() - roundStart, kind });
  };
  return note;
});

const { runRound, endRounds, onTimed, roundPool } = await import('./views.js');

/** CPU ms the pool's server processes used so far. */
function serverCpuMs(): number {
  const pool = roundPool() as unknown as { _clients?: { processID?: number }[] } | undefined;
  let ns = 0;
  for (const client of pool?._clients ?? []) ns += Number(readFileSync(`/proc/${client.processID}/schedstat`, 'utf8').split(' ')[0]);
  return ns / 1e6;
}

const min = (xs: number[]) => Math.min(...xs);
const max = (xs: number[]) => Math.max(...xs);
const middle = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const median = (xs: number[]) => {
  const finite = xs.filter((x) => Number.isFinite(x));
  return finite.length > 0 ? middle(finite) : NaN;
};

/** The round's marks: the first of each partition's statements (one per partition for the first writes). */
function marks(which: string, all: Statement[]): Record<string, number> {
  const r: Record<string, number> = { firstSent: min(all.map((s) => s.sent)) };
  const firstOf = (kind: string) => all.filter((s) => s.kind === kind).sort((a, b) => a.sent - b.sent).slice(0, 4);
  if (which === 'hand') {
    const begins = firstOf('BEGIN');
    const upserts = firstOf('upsert');
    r.beginSent = min(begins.map((s) => s.sent));
    r.lastUpsertSent = max(upserts.map((s) => s.sent));
    const commits = begins.map((b) => all.find((s) => s.pid === b.pid && s.kind === 'COMMIT' && s.sent >= b.sent)!);
    r.lastFirstCommitReplied = max(commits.map((c) => c.replied));
    r.firstTransaction = middle(begins.map((b, i) => commits[i]!.replied - b.sent));
    return r;
  }
  const store = all.filter((s) => s.kind !== 'write');
  if (store.length > 0) {
    r.rangeStoreBegin = min(store.map((s) => s.sent));
    r.rangeStoreCommitted = max(store.filter((s) => s.kind === 'COMMIT').map((s) => s.replied));
    for (const kind of ['BEGIN', 'lineage', 'lockPartitions', 'selectRanges', 'storeRanges', 'COMMIT']) {
      const s = store.find((x) => x.kind === kind);
      if (s) r[`rs.${kind}`] = s.replied - s.sent;
    }
  }
  const writes = firstOf('write');
  r.firstWriteSent = min(writes.map((s) => s.sent));
  r.lastWriteSent = max(writes.map((s) => s.sent));
  r.lastFirstWriteReplied = max(writes.map((s) => s.replied));
  r.firstWrite = middle(writes.map((s) => s.replied - s.sent));
  return r;
}

const rows = new Map<string, Record<string, number>[]>();
const order = ['rxfeed', 'hand', 'rxfeed-prestored'] as const;
for (let round = 0; round < ROUNDS; round++) {
  for (const which of round % 2 ? [...order].reverse() : order) {
    let server0 = 0;
    let client0 = process.cpuUsage();
    let serverCpu = 0;
    let clientCpu = 0;
    onTimed((phase) => {
      if (phase === 'start') {
        statements = [];
        server0 = serverCpuMs();
        client0 = process.cpuUsage();
        roundStart = performance.now();
      } else {
        roundStart = 0;
        serverCpu = serverCpuMs() - server0;
        const c = process.cpuUsage(client0);
        clientCpu = (c.user + c.system) / 1000;
      }
    });
    const wall = await runRound(which, BATCH);
    rows.set(which, [...(rows.get(which) ?? []), { wall, serverCpu, clientCpu, ...marks(which, statements) }]);
  }
}
for (const [which, rs] of rows) {
  console.log(`${which} (${rs.length} rounds, medians): ` + Object.keys(rs[0]!).map((k) => `${k} ${median(rs.map((r) => r[k]!)).toFixed(1)}`).join(', '));
}
const hand = rows.get('hand')!;
for (const which of ['rxfeed', 'rxfeed-prestored']) {
  console.log(`${which}: hand over ${which} ${median(rows.get(which)!.map((r, i) => hand[i]!.wall! / r.wall!)).toFixed(2)} (paired per round)`);
}
console.log(`load ${loadavg()[0]!.toFixed(1)}`);
await endRounds();
