/**
 * @summary View throughput: changes/s through materializeToView into PostgreSQL (pg) and PGlite, batch sizes 100 and 1000.
 *
 * Run: npx tsx bench/views.ts [changes=20000] [rounds=10]
 * PostgreSQL is also measured against a hand-written `pg` loop running the same set-based statements
 * (guarded mode: upsert, tombstones, delete, one transaction per batch, one worker per partition on a pool of
 * 4), alternating rounds in one run; the ratio is rxfeed's throughput over the loop's (target ≥ 0.9), paired
 * per round, printed as the median with the middle half's spread. rxfeed's batches carry their partition's
 * key range, as a feed's do, so its writes pay for fencing by range and positions; the loop has neither. In those
 * rounds both run on the same pool, opened and warmed before the first round, so neither pays for connecting.
 * Two comparisons: "fresh view (first writes included)", where each round writes into new tables (rxfeed stores
 * every partition's range on its first write and plans its prepared write afresh on every connection: costs a
 * running view pays once), and "steady state", where each side writes new versions of the same documents into
 * ONE table kept across rounds, warmed first (first writes done, rxfeed's prepared write run past PostgreSQL's 5
 * custom plans on every connection); the warm-up's first write per partition is printed apart.
 * PostgreSQL: RXFEED_BENCH_PG_URL, default postgresql://postgres@127.0.0.1:5432/test (skipped with a note when unreachable).
 * BENCH_VIEWS=fresh (or steady) runs that comparison alone, without the throughput table (PGlite included).
 * BENCH_BATCHES=1000 (comma-separated) limits the comparisons' batch sizes (default 100,1000).
 * BENCH_COMPARE=dir (fresh comparison): also runs another build of rxfeed (`dir/esm/index.js` and
 * `dir/esm/postgres/index.js`, e.g. a copy of `dist` made before a change) as a third side of every round, and
 * this side from this worktree's build (`dist`, built first unless RXFEED_BENCH_BUILT=1) instead of the sources,
 * so that both are built code; prints both against the loop and this build over the other, paired per round.
 * Each run writes into a fresh table of a schema of its own, dropped at the end.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { from, lastValueFrom } from 'rxjs';
import type { Change } from '../src/core/Change.js';
import { ChangeBatch } from '../src/core/ChangeBatch.js';
import { materializeToView } from '../src/sinks/materializeToView.js';
import { PGliteViewStore } from '../src/postgres/PGliteViewStore.js';
import { PostgresViewStore } from '../src/postgres/PostgresViewStore.js';
import { viewSql } from '../src/postgres/sql/viewSql.js';
import { median, ratioLine } from './stats.js';
import type { ViewMode, ViewStore } from '../src/sinks/ViewStore.js';

const CHANGES = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 10);
const PARTITIONS = 4;
const PG_URL = process.env.RXFEED_BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';
const schema = `rxfeed_bench_${process.pid}`;
const ONLY = process.env.BENCH_VIEWS as 'fresh' | 'steady' | undefined;
const BATCHES = (process.env.BENCH_BATCHES ?? '100,1000').split(',').map(Number);
const COMPARE = process.env.BENCH_COMPARE;

/** The parts of rxfeed a view round runs: from the sources, or from a build. */
interface ViewBuild {
  readonly materializeToView: typeof materializeToView;
  readonly PostgresViewStore: typeof PostgresViewStore;
  /** Its own class: a sink tells batches from arrays of them with `instanceof`. */
  readonly ChangeBatch: typeof ChangeBatch;
}

/** A build of rxfeed in `dir` (its `esm` folder). */
async function loadBuild(dir: string): Promise<ViewBuild> {
  const root = (path: string) => pathToFileURL(`${dir}/esm/${path}`).href;
  const [core, postgres] = await Promise.all([import(root('index.js')), import(root('postgres/index.js'))]);
  const { materializeToView: materialize, ChangeBatch: Batch } = core as ViewBuild;
  return { materializeToView: materialize, ChangeBatch: Batch, PostgresViewStore: (postgres as ViewBuild).PostgresViewStore };
}

/** The view side of the rounds: the sources, or (with BENCH_COMPARE) this worktree's build, next to the other build. */
async function viewBuilds(): Promise<{ ours: ViewBuild; other: ViewBuild | undefined }> {
  if (!COMPARE) return { ours: { materializeToView, PostgresViewStore, ChangeBatch }, other: undefined };
  if (process.env.RXFEED_BENCH_BUILT !== '1') execFileSync(process.execPath, [fileURLToPath(new URL('../scripts/build.mjs', import.meta.url))], { stdio: 'ignore' });
  return { ours: await loadBuild(fileURLToPath(new URL('../dist', import.meta.url))), other: await loadBuild(COMPARE) };
}

interface Order {
  readonly customer: string;
  readonly total: number;
  readonly lines: readonly { sku: string; qty: number }[];
}

/**
 * Batches as a feed of `PARTITIONS` partitions would deliver them: each partition's changes in LSN order,
 * 85% upserts over a key space of a quarter of the changes (so rows get updated), 15% deletes. `generation` n
 * continues the feed: the same key space, new versions of its documents at LSNs after generation n − 1's (for
 * the steady state, where one view takes every round's writes); generation 0 is what a fresh view gets.
 */
function feed(batchSize: number, generation = 0): ChangeBatch<Order>[] {
  const batches: ChangeBatch<Order>[] = [];
  const perPartition = Math.ceil(CHANGES / PARTITIONS);
  const base = generation * perPartition;
  let seed = 42 + generation;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let p = 0; p < PARTITIONS; p++) {
    const changes: Change<Order>[] = [];
    for (let i = 0; i < perPartition; i++) {
      const id = `order-${p}-${Math.floor(rnd() * (perPartition / 4))}`;
      const deleted = rnd() < 0.15;
      changes.push({
        id,
        operation: deleted ? 'delete' : 'upsert',
        document: deleted ? undefined : { customer: `c${i % 500}`, total: Math.round(rnd() * 10_000) / 100, lines: [{ sku: `s${i % 50}`, qty: 1 + (i % 3) }] },
        lsn: base + i + 1,
        timestampMs: Date.UTC(2026, 0, 1) + base + i,
      });
    }
    for (let i = 0; i < changes.length; i += batchSize) {
      const slice = changes.slice(i, i + batchSize);
      batches.push(new ChangeBatch({ partition: `p${p}`, changes: slice, position: `p${p}@${base + i + slice.length}`, epoch: 1, range: rangeOf(p) }));
    }
  }
  // Interleave partitions, as a merged feed would.
  return batches.sort((a, b) => Number(a.position.split('@')[1]) - Number(b.position.split('@')[1]));
}

type Row = { customer: string; total: number; lines: Order['lines'] };

/** Partition `p`'s key range: [p·40, (p+1)·40) in hex, the last one up to FF. */
function rangeOf(p: number): { minInclusive: string; maxExclusive: string } {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(2, '0');
  return { minInclusive: p === 0 ? '' : hex(p * 0x40), maxExclusive: p === PARTITIONS - 1 ? 'FF' : hex((p + 1) * 0x40) };
}

/** Called at the start and the end of each timed part (bench/viewsProfile.ts reads CPU counters there). */
let timed: (phase: 'start' | 'end') => void = () => undefined;
/** Sets what runs at the start and the end of each timed part. */
export function onTimed(hook: (phase: 'start' | 'end') => void): void {
  timed = hook;
}

async function run(store: ViewStore<Row>, batchSize: number, mode: ViewMode, generation = 0, build?: ViewBuild): Promise<number> {
  const Batch = build?.ChangeBatch ?? ChangeBatch;
  const batches = feed(batchSize, generation).map((b) => (Batch === ChangeBatch ? b : new Batch({ partition: b.partition, changes: b.changes, position: b.position, epoch: b.epoch, range: b.range })));
  const materialize = build?.materializeToView ?? materializeToView;
  timed('start');
  const t0 = performance.now();
  await lastValueFrom(
    from(batches).pipe(
      materialize(store, { project: (c) => ({ customer: c.document!.customer, total: c.document!.total, lines: c.document!.lines }), mode }),
    ),
  );
  const ms = performance.now() - t0;
  timed('end');
  return ms;
}

/**
 * The hand-written loop: per batch one transaction with the same set-based statements materializeToView runs
 * in guarded mode (last change per key wins within a batch; upserts guarded by LSN and tombstones, deletes
 * leave tombstones), one worker per partition, batches of a partition in order. No fencing, no positions.
 */
async function handLoop(pool: pg.Pool, table: string, batchSize: number, onBatch?: (partition: string, ms: number) => void): Promise<number> {
  await handTable(pool, table);
  return handWrite(pool, table, feed(batchSize), onBatch);
}

/** Creates the hand-written loop's tables (the same DDL as materializeToView's). */
async function handTable(pool: pg.Pool, table: string): Promise<void> {
  const setup = await pool.connect();
  try {
    for (const ddl of viewSql({ schema, table }).ddl) await setup.query(ddl);
  } finally {
    setup.release();
  }
}

/**
 * The hand-written loop's timed part: writes `feed` into `table` (created before), one worker per partition;
 * resolves to ms. `onBatch` gets each batch's transaction time (ms, from `BEGIN` to `COMMIT`'s reply).
 */
async function handWrite(pool: pg.Pool, table: string, feedBatches: ChangeBatch<Order>[], onBatch?: (partition: string, ms: number) => void): Promise<number> {
  const sql = viewSql({ schema, table });
  const byPartition = new Map<string, ChangeBatch<Order>[]>();
  for (const batch of feedBatches) byPartition.set(batch.partition, [...(byPartition.get(batch.partition) ?? []), batch]);
  timed('start');
  const t0 = performance.now();
  await Promise.all(
    [...byPartition.values()].map(async (batches) => {
      const client = await pool.connect();
      try {
        for (const batch of batches) {
          const last = new Map<string, Change<Order>>();
          for (const c of batch.changes) last.set(c.id, c);
          const upserts: unknown[] = [];
          const deletes: unknown[] = [];
          for (const c of last.values()) {
            if (c.operation === 'delete') deletes.push({ key: c.id, lsn: c.lsn, ts_ms: c.timestampMs });
            else {
              const d = c.document!;
              upserts.push({ key: c.id, doc: { customer: d.customer, total: d.total, lines: d.lines }, lsn: c.lsn, ts_ms: c.timestampMs, partition_id: batch.partition });
            }
          }
          const b0 = performance.now();
          await client.query('BEGIN');
          if (upserts.length > 0) await client.query(sql.upsertGuarded, [JSON.stringify(upserts)]);
          if (deletes.length > 0) {
            const input = JSON.stringify(deletes);
            await client.query(sql.tombstone, [input]);
            await client.query(sql.deleteGuarded, [input]);
          }
          await client.query('COMMIT');
          onBatch?.(batch.partition, performance.now() - b0);
        }
      } finally {
        client.release();
      }
    }),
  );
  const ms = performance.now() - t0;
  timed('end');
  return ms;
}

let sharedPool: pg.Pool | undefined;
let tables = 0;

/**
 * One timed run on a pool shared by every call (opened and warmed on the first): `'rxfeed'` is
 * materializeToView (guarded), `'hand'` the hand-written loop; for bench/viewsProfile.ts. Resolves to ms.
 */
export async function runRound(which: 'rxfeed' | 'hand' | 'rxfeed-prestored', batchSize: number): Promise<number> {
  if (!sharedPool) {
    sharedPool = new pg.Pool({ connectionString: PG_URL, max: PARTITIONS });
    await handLoop(sharedPool, `warm_hand_${process.pid}`, 100);
    const warm = await PostgresViewStore.create<Row>({ connection: sharedPool, table: 'warmup_view', schema });
    await run(warm, 100, 'guarded');
    await warm.close();
  }
  if (which === 'hand') return handLoop(sharedPool, `ph${++tables}`, batchSize);
  const store = await PostgresViewStore.create<Row>({ connection: sharedPool, table: `pt${++tables}`, schema });
  if (which === 'rxfeed-prestored') {
    // Untimed: each partition's range stored by an empty write, as after a partition's first batch.
    for (let p = 0; p < PARTITIONS; p++) {
      await store.write({ mode: 'guarded', changes: [], partitions: [{ partition: `p${p}`, epoch: 1, position: `p${p}@0`, lsn: 0, range: rangeOf(p) }] });
    }
  }
  try {
    return await run(store, batchSize, 'guarded');
  } finally {
    await store.close();
  }
}

/** The pool {@link runRound} runs on (bench/viewsProfile.ts reads its connections' server processes). */
export const roundPool = (): pg.Pool | undefined => sharedPool;

/** Drops the schema {@link runRound} wrote into and closes its pool. */
export async function endRounds(): Promise<void> {
  if (!sharedPool) return;
  await sharedPool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await sharedPool.end();
  sharedPool = undefined;
}

/** Each partition's first write time (ms) and the times of the writes after (those that commit no first write). */
function writeTimes(): { first: Map<string, number>; later: number[]; add: (partitions: readonly string[], ms: number) => void } {
  const first = new Map<string, number>();
  const later: number[] = [];
  const add = (partitions: readonly string[], ms: number) => {
    const fresh = partitions.filter((p) => !first.has(p));
    for (const p of fresh) first.set(p, ms);
    if (fresh.length === 0) later.push(ms);
  };
  return { first, later, add };
}

/** Times each `write` of `store` (ms) and hands it to `onWrite` with the partitions the write commits. */
function timingWrites(store: ViewStore<Row>, onWrite: (partitions: readonly string[], ms: number) => void): ViewStore<Row> {
  return new Proxy(store, {
    get(target, key) {
      if (key === 'write') {
        return async (write: Parameters<ViewStore<Row>['write']>[0]) => {
          const t0 = performance.now();
          try {
            return await target.write(write);
          } finally {
            onWrite(
              write.partitions.map((c) => c.partition),
              performance.now() - t0,
            );
          }
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * Per connection of `pool` (all `PARTITIONS` checked out at once), how many times the prepared statement
 * materializeToView's writes come down to (the one-statement guarded write) ran with a custom and with a
 * generic plan (pg_prepared_statements, PostgreSQL 14+); `undefined` for a connection that has not prepared it.
 */
async function writePlans(pool: pg.Pool): Promise<({ custom: number; generic: number } | undefined)[]> {
  const clients = await Promise.all(Array.from({ length: PARTITIONS }, () => pool.connect()));
  try {
    return await Promise.all(
      clients.map(async (client) => {
        const { rows } = await client.query<{ custom: string; generic: string }>(
          `SELECT custom_plans AS custom, generic_plans AS generic FROM pg_prepared_statements WHERE statement LIKE 'WITH expected%tombstoned%'`,
        );
        return rows[0] && { custom: Number(rows[0].custom), generic: Number(rows[0].generic) };
      }),
    );
  } finally {
    for (const client of clients) client.release();
  }
}

/**
 * The steady state: materializeToView and the hand-written loop each write into ONE table (the view; the
 * loop's own) that lives across all rounds, on one pool of `PARTITIONS` connections that never closes an idle
 * one. Warm-up, untimed in the ratio, the same for both sides: generation 0 at batch 1000 (each partition's
 * first write; materializeToView stores its range there: timed per write and printed apart), then generations
 * at batch 100 until materializeToView's prepared write has run more than 5 times (PostgreSQL's custom-plan
 * executions, after which its plan cache may keep a generic plan) on every connection of the pool; the loop's
 * statements are unnamed, so PostgreSQL plans them at every execution whatever the warm-up. Then `ROUNDS`
 * alternating rounds per batch size, each writing the next generation (new versions of the documents, the same
 * mix of upserts, tombstones and deletes) into each side's table; ratio paired per round.
 */
async function steadyState(): Promise<string[]> {
  const lines: string[] = [];
  const pool = new pg.Pool({ connectionString: PG_URL, max: PARTITIONS, idleTimeoutMillis: 0 });
  try {
    const handTableName = 'steady_hand';
    await handTable(pool, handTableName);
    const viewFirst = new Map<string, number>();
    const viewLater: number[] = [];
    const view = timingWrites(await PostgresViewStore.create<Row>({ connection: pool, table: 'steady_view', schema }), (partitions, ms) => {
      const first = partitions.filter((p) => !viewFirst.has(p));
      for (const p of first) viewFirst.set(p, ms);
      if (first.length === 0) viewLater.push(ms);
    });
    const handFirst = new Map<string, number>();
    const handLater: number[] = [];
    const onHandBatch = (partition: string, ms: number) => {
      if (handFirst.has(partition)) handLater.push(ms);
      else handFirst.set(partition, ms);
    };
    // Every connection of the pool opened first, so that neither side's first writes pay for connecting.
    const opened = await Promise.all(Array.from({ length: PARTITIONS }, () => pool.connect()));
    for (const client of opened) client.release();
    let generation = 0;
    // Generation 0: each side alone (the loop first), so that the first writes are timed without the other's.
    const handPass = await handWrite(pool, handTableName, feed(1000, generation), onHandBatch);
    const viewPass = await run(view, 1000, 'guarded', generation);
    const laterMs = (xs: number[]) => (xs.length > 0 ? `median ${median(xs).toFixed(0)} ms` : 'none');
    const firsts = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b)).map(([p, ms]) => `${p} ${ms.toFixed(0)}`).join(', ');
    lines.push(
      `First writes (steady-state warm-up, generation 0 into empty tables, batch 1000, ${PARTITIONS} partitions at once), ms from call to reply:\n` +
        `  materializeToView: ${firsts(viewFirst)} (its later writes in that pass: ${laterMs(viewLater)}); whole pass ${viewPass.toFixed(0)} ms\n` +
        `  hand-written loop: ${firsts(handFirst)} (its later batches in that pass: ${laterMs(handLater)}); whole pass ${handPass.toFixed(0)} ms`,
    );
    let plans = await writePlans(pool);
    for (let pass = 0; pass < 10 && plans.some((p) => p === undefined || p.custom + p.generic <= 5); pass++) {
      generation++;
      await handWrite(pool, handTableName, feed(100, generation));
      await run(view, 100, 'guarded', generation);
      plans = await writePlans(pool);
    }
    // One more warm-up generation at batch 1000 (as the rounds alternate both sizes), both sides.
    generation++;
    await handWrite(pool, handTableName, feed(1000, generation));
    await run(view, 1000, 'guarded', generation);
    plans = await writePlans(pool);
    lines.push(
      `materializeToView's prepared write per pool connection after the warm-up (custom + generic plans): ` +
        plans.map((p) => (p ? `${p.custom} + ${p.generic}` : 'not prepared')).join(', '),
    );
    for (const batchSize of BATCHES) {
      const hand: number[] = [];
      const ours: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const g = ++generation;
        // Alternate which one goes first, so that neither always meets a warmer or a busier machine.
        if (round % 2 === 0) {
          hand.push(await handWrite(pool, handTableName, feed(batchSize, g)));
          ours.push(await run(view, batchSize, 'guarded', g));
        } else {
          ours.push(await run(view, batchSize, 'guarded', g));
          hand.push(await handWrite(pool, handTableName, feed(batchSize, g)));
        }
      }
      const ratios = hand.map((h, i) => h / ours[i]!);
      lines.push(
        `PostgreSQL, batch ${batchSize}, guarded, steady state (one table each across rounds, warmed): materializeToView ${median(ours).toFixed(0)} ms, ` +
          `hand-written pg loop ${median(hand).toFixed(0)} ms (medians of ${ROUNDS} alternating rounds): ${ratioLine(ratios)} the loop's throughput (paired per round)`,
      );
    }
    plans = await writePlans(pool);
    lines.push(
      `materializeToView's prepared write per pool connection at the end (custom + generic plans): ` +
        plans.map((p) => (p ? `${p.custom} + ${p.generic}` : 'not prepared')).join(', '),
    );
    await view.close();
  } finally {
    await pool.end();
  }
  return lines;
}

type RecordRow = (store: string, batchSize: number, mode: ViewMode, ms: number) => void;

/** The throughput table's PGlite rows: a fresh table per batch size and mode, one pass each. */
async function throughputTable(record: RecordRow): Promise<void> {
  const t0 = performance.now();
  const pglite = await PGlite.create();
  console.log(`PGlite started in ${(performance.now() - t0).toFixed(0)} ms`);
  let table = 0;
  const warm = await PGliteViewStore.create<Row>({ table: 'warmup', schema, pglite });
  await run(warm, 100, 'guarded'); // untimed: JIT and PGlite caches
  await warm.close();
  for (const batchSize of [100, 1000]) {
    for (const mode of ['guarded', 'exactlyOnce'] as const) {
      const store = await PGliteViewStore.create<Row>({ table: `t${++table}`, schema, pglite });
      record('PGlite', batchSize, mode, await run(store, batchSize, mode));
      await store.close();
    }
  }
  await pglite.close();

}

/** The throughput table's PostgreSQL rows (skipped when PostgreSQL is unreachable). */
async function pgThroughput(record: RecordRow): Promise<void> {
  let table = 100;
  const warmPg = await PostgresViewStore.create<Row>({ connection: PG_URL, table: 'warmup', schema });
  await run(warmPg, 100, 'guarded'); // untimed
  await warmPg.close();
  for (const batchSize of [100, 1000]) {
    for (const mode of ['guarded', 'exactlyOnce'] as const) {
      const store = await PostgresViewStore.create<Row>({ connection: PG_URL, table: `t${++table}`, schema });
      record('PostgreSQL', batchSize, mode, await run(store, batchSize, mode));
      await store.close();
    }
  }
}

/** The 1-minute load average (ratios from a loaded machine are noisier: the client competes for the cores). */
const load = (): string => loadavg()[0]!.toFixed(1);

async function main(): Promise<void> {
  const loadAtStart = load();
  const rows: string[][] = [];
  const comparisons: string[] = [];
  const record = (store: string, batchSize: number, mode: ViewMode, ms: number) =>
    rows.push([store, String(batchSize), mode, String(CHANGES), ms.toFixed(0), Math.round((CHANGES * 1000) / ms).toLocaleString('en-US')]);

  if (ONLY === undefined) await throughputTable(record);
  const probe = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  const reachable = await probe.connect().then(
    () => true,
    (error: unknown) => {
      console.log(`PostgreSQL skipped: ${PG_URL.replace(/\/\/[^@]*@/, '//')} unreachable (${(error as Error).message})`);
      return false;
    },
  );
  if (reachable) {
    try {
      if (ONLY === undefined) await pgThroughput(record);
      let table = 0;
      const pool = new pg.Pool({ connectionString: PG_URL, max: PARTITIONS });
      try {
        const builds = ONLY === 'steady' ? undefined : await viewBuilds();
        await handLoop(pool, 'warmup_hand', 100); // untimed
        if (builds?.other) {
          // Untimed: each build's code warmed on this pool, as the loop's is.
          for (const build of [builds.ours, builds.other]) {
            const warm = await build.PostgresViewStore.create<Row>({ connection: pool, table: `warm${++table}`, schema });
            await run(warm, 100, 'guarded', 0, build);
            await warm.close();
          }
        }
        for (const batchSize of builds ? BATCHES : []) {
          const ours: number[] = [];
          const hand: number[] = [];
          const ratios: number[] = [];
          const others: number[] = [];
          const otherRatios: number[] = [];
          const oursOverOther: number[] = [];
          // Per round, the slowest of the partitions' first writes (they run at once) and the median of the others.
          const firstWrites = { view: [] as number[], hand: [] as number[], viewLater: [] as number[], handLater: [] as number[], other: [] as number[], otherLater: [] as number[] };
          for (let round = 0; round < ROUNDS; round++) {
            const viewWrites = writeTimes();
            const handWrites = writeTimes();
            const otherWrites = writeTimes();
            const loop = () => handLoop(pool, `h${++table}`, batchSize, (partition, ms) => handWrites.add([partition], ms));
            const view = async (build: ViewBuild, times: ReturnType<typeof writeTimes>) => {
              const store = timingWrites(await build.PostgresViewStore.create<Row>({ connection: pool, table: `t${++table}`, schema }), times.add);
              try {
                return await run(store, batchSize, 'guarded', 0, build);
              } finally {
                await store.close();
              }
            };
            // Rotate which one goes first, so that none always meets a warmer or a busier machine.
            const sides: (() => Promise<void>)[] = [
              async () => void hand.push(await loop()),
              async () => void ours.push(await view(builds!.ours, viewWrites)),
            ];
            if (builds!.other) sides.push(async () => void others.push(await view(builds!.other!, otherWrites)));
            for (let i = 0; i < sides.length; i++) await sides[(round + i) % sides.length]!();
            ratios.push(hand.at(-1)! / ours.at(-1)!);
            firstWrites.view.push(Math.max(...viewWrites.first.values()));
            firstWrites.hand.push(Math.max(...handWrites.first.values()));
            if (viewWrites.later.length > 0) firstWrites.viewLater.push(median(viewWrites.later));
            if (handWrites.later.length > 0) firstWrites.handLater.push(median(handWrites.later));
            if (builds!.other) {
              otherRatios.push(hand.at(-1)! / others.at(-1)!);
              oursOverOther.push(others.at(-1)! / ours.at(-1)!);
              firstWrites.other.push(Math.max(...otherWrites.first.values()));
              if (otherWrites.later.length > 0) firstWrites.otherLater.push(median(otherWrites.later));
            }
          }
          if (builds!.other) {
            comparisons.push(
              `PostgreSQL, batch ${batchSize}, fresh view, BENCH_COMPARE=${COMPARE}: that build ${median(others).toFixed(0)} ms, ${ratioLine(otherRatios)} the loop's throughput; ` +
                `this build over that build: ${ratioLine(oursOverOther)} (paired per round)\n` +
                `  that build's first writes (slowest of the ${PARTITIONS}, median over rounds) ${median(firstWrites.other).toFixed(0)} ms; later writes (median) ` +
                `${firstWrites.otherLater.length > 0 ? median(firstWrites.otherLater).toFixed(0) : '–'} ms`,
            );
          }
          comparisons.push(
            `PostgreSQL, batch ${batchSize}, guarded, fresh view (first writes included; a new table each round): materializeToView${builds!.other ? ' (this build)' : ''} ${median(ours).toFixed(0)} ms, ` +
              `hand-written pg loop ${median(hand).toFixed(0)} ms (medians of ${ROUNDS} alternating rounds): ${ratioLine(ratios)} the loop's throughput (paired per round)\n` +
              `  its first writes (slowest of the ${PARTITIONS} partitions' in a round, median over rounds): materializeToView ${median(firstWrites.view).toFixed(0)} ms, ` +
              `loop ${median(firstWrites.hand).toFixed(0)} ms; later writes (median): materializeToView ${firstWrites.viewLater.length > 0 ? median(firstWrites.viewLater).toFixed(0) : '–'} ms, ` +
              `loop ${firstWrites.handLater.length > 0 ? median(firstWrites.handLater).toFixed(0) : '–'} ms`,
          );
        }
      } finally {
        await pool.end();
      }
      if (ONLY !== 'fresh') comparisons.push(...(await steadyState()));
    } finally {
      await probe.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    }
  }
  await probe.end().catch(() => undefined);

  const header = ['store', 'batch', 'mode', 'changes', 'ms', 'changes/s'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 3 ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join('  ');
  if (rows.length > 0) {
    console.log(`\nmaterializeToView, ${PARTITIONS} partitions, concurrency 4, 85% upserts / 15% deletes (node ${process.version})`);
    console.log(line(header));
    for (const r of rows) console.log(line(r));
  }
  if (comparisons.length > 0) console.log(`\n${comparisons.join('\n')}`);
  console.log(`\nload average (1 min): ${loadAtStart} at start, ${load()} at end`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
