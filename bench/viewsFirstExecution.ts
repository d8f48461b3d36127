/**
 * @summary Server CPU of a write on a fresh view, one statement at a time on one connection: materializeToView's
 * one-statement guarded write (prepared, as PostgresViewStore runs it) against the hand-written loop's
 * transaction (bench/views.ts), each on new tables per repetition; the first write on the connection for that
 * table, then a second one (another partition's batch: catalog loaded, statement parsed), the write once more
 * under another statement name (parsed again), and both with `plan_cache_mode = force_generic_plan`. CPU from
 * `/proc/<pid>/schedstat` (ns on CPU: the server must run on this machine), load-independent unlike wall time.
 * The batches are those bench/views.ts writes first (4000 changes, batch 1000), captured from one round.
 *
 * Run: npx tsx bench/viewsFirstExecution.ts [repetitions=30]
 */
import pg from 'pg';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { prepared, viewSql } from '../src/postgres/sql/viewSql.js';

const REPS = Number(process.argv[2] ?? 30);
process.argv[2] = '4000'; // bench/views.ts reads it
const URL = process.env.RXFEED_BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

interface Captured {
  readonly text: string;
  readonly values: unknown[];
}
const captured: Captured[] = [];
let capturing = false;
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  if (capturing) {
    const a0 = args[0] as string | { text: string; values?: unknown[] };
    const values = typeof a0 === 'string' ? args[1] : a0.values;
    captured.push({ text: typeof a0 === 'string' ? a0 : a0.text, values: Array.isArray(values) ? values : [] });
  }
  return original.apply(this, args);
};
const { runRound, endRounds } = await import('./views.js');
await runRound('hand', 1000); // opens and warms the pool
capturing = true;
await runRound('hand', 1000);
await runRound('rxfeed-prestored', 1000);
capturing = false;
await endRounds();

const starts = (c: Captured, re: RegExp) => re.test(c.text.replace(/\s+/g, ' ').trim());
/** The one-statement write of partition `p`'s first batch (after its range was stored by an empty write). */
const viewWrite = (p: string) => captured.find((c) => starts(c, /^WITH expected/) && String(c.values[0]).includes(`"${p}"`) && String(c.values[1]).length > 100)!.values;
/** The loop's statements' input for partition `p`'s first batch: upserts, tombstones, deletes. */
const handInputs = (p: string) =>
  [/^INSERT INTO "\w+"\."\w+" AS t /, /^INSERT INTO \S+_tombstones/, /^DELETE/].map((re) => captured.find((c) => starts(c, re) && String(c.values[0]).includes(`"order-${p.slice(1)}-`))!.values);

const schema = `rxfeed_firstexec_${process.pid}`;
const setup = new pg.Client(URL);
const m = new pg.Client(URL);
await setup.connect();
await m.connect();
const pid = (await m.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
const cpuMs = () => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;

/** New view tables, each partition's range stored as the prestored round leaves it (epoch 1, LSN 0). */
async function view(table: string) {
  const sql = viewSql({ schema, table });
  for (const ddl of sql.ddl) await setup.query(ddl);
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(2, '0');
  for (let p = 0; p < 4; p++) {
    await setup.query(`INSERT INTO ${sql.qualified.slice(0, -1)}_positions" (partition_id, epoch, lsn, range_min, range_max) VALUES ($1, 1, 0, $2, $3)`, [
      `p${p}`,
      p === 0 ? '' : hex(p * 0x40),
      p === 3 ? 'FF' : hex((p + 1) * 0x40),
    ]);
  }
  return sql;
}

const results = new Map<string, number[]>();
const timed = async (label: string, fn: () => Promise<unknown>) => {
  const c0 = cpuMs();
  await fn();
  results.set(label, [...(results.get(label) ?? []), cpuMs() - c0]);
};
const writeView = async (sql: ReturnType<typeof viewSql>, p: string, name = prepared(sql.writeGuarded.text).name) => {
  const result = await m.query<{ ok: boolean }>({ name, text: sql.writeGuarded.text, values: viewWrite(p) });
  if (!result.rows[0]?.ok) throw new Error('the view write was refused: the captured state does not match');
};
const writeHand = async (sql: ReturnType<typeof viewSql>, p: string) => {
  const [upserts, tombstones, deletes] = handInputs(p);
  await m.query('BEGIN');
  await m.query(sql.upsertGuarded, upserts);
  await m.query(sql.tombstone, tombstones);
  await m.query(sql.deleteGuarded, deletes);
  await m.query('COMMIT');
};
try {
  for (let r = 0; r < REPS; r++) {
    const sides = [
      async () => {
        const sql = await view(`v${r}`);
        await timed('view, first (p0)', () => writeView(sql, 'p0'));
        await timed('view, second (p1)', () => writeView(sql, 'p1'));
        await timed('view, parsed again (p2)', () => writeView(sql, 'p2', `${prepared(sql.writeGuarded.text).name}_again`));
      },
      async () => {
        const sql = await view(`g${r}`);
        await m.query('SET plan_cache_mode = force_generic_plan');
        await timed('view generic, first (p0)', () => writeView(sql, 'p0'));
        await timed('view generic, second (p1)', () => writeView(sql, 'p1'));
        await m.query('RESET plan_cache_mode');
      },
      async () => {
        const sql = viewSql({ schema, table: `h${r}` });
        for (const ddl of sql.ddl) await setup.query(ddl);
        await timed('loop, first (p0)', () => writeHand(sql, 'p0'));
        await timed('loop, second (p1)', () => writeHand(sql, 'p1'));
      },
    ];
    for (let k = 0; k < sides.length; k++) await sides[(r + k) % sides.length]!();
  }
} finally {
  await setup.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await setup.end();
  await m.end();
}
const at = (xs: number[], f: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * f)]!;
for (const [label, xs] of results) {
  console.log(`${label.padEnd(28)} server CPU median ${at(xs, 0.5).toFixed(2)} ms (middle half ${at(xs, 0.25).toFixed(2)}–${at(xs, 0.75).toFixed(2)}, ${xs.length} writes)`);
}
console.log(`load ${loadavg()[0]!.toFixed(1)}`);
