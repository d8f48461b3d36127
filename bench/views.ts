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
 * PostgreSQL: RXFEED_BENCH_PG_URL, default postgresql://postgres@127.0.0.1:5432/test (skipped with a note when unreachable).
 * Each run writes into a fresh table of a schema of its own, dropped at the end.
 */
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { from, lastValueFrom } from 'rxjs';
import type { Change } from '../src/core/Change.js';
import { ChangeBatch } from '../src/core/ChangeBatch.js';
import { materializeToView } from '../src/sinks/materializeToView.js';
import { PGliteViewStore } from '../src/postgres/PGliteViewStore.js';
import { PostgresViewStore } from '../src/postgres/PostgresViewStore.js';
import { viewSql } from '../src/postgres/sql/viewSql.js';
import type { ViewMode, ViewStore } from '../src/sinks/ViewStore.js';

const CHANGES = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 10);
const PARTITIONS = 4;
const PG_URL = process.env.RXFEED_BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';
const schema = `rxfeed_bench_${process.pid}`;

interface Order {
  readonly customer: string;
  readonly total: number;
  readonly lines: readonly { sku: string; qty: number }[];
}

/**
 * Batches as a feed of `PARTITIONS` partitions would deliver them: each partition's changes in LSN order,
 * 85% upserts over a key space of a quarter of the changes (so rows get updated), 15% deletes.
 */
function feed(batchSize: number): ChangeBatch<Order>[] {
  const batches: ChangeBatch<Order>[] = [];
  const perPartition = Math.ceil(CHANGES / PARTITIONS);
  let seed = 42;
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
        lsn: i + 1,
        timestampMs: Date.UTC(2026, 0, 1) + i,
      });
    }
    for (let i = 0; i < changes.length; i += batchSize) {
      const slice = changes.slice(i, i + batchSize);
      batches.push(new ChangeBatch({ partition: `p${p}`, changes: slice, position: `p${p}@${i + slice.length}`, epoch: 1, range: rangeOf(p) }));
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

async function run(store: ViewStore<Row>, batchSize: number, mode: ViewMode): Promise<number> {
  const batches = feed(batchSize);
  timed('start');
  const t0 = performance.now();
  await lastValueFrom(
    from(batches).pipe(
      materializeToView(store, { project: (c) => ({ customer: c.document!.customer, total: c.document!.total, lines: c.document!.lines }), mode }),
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
async function handLoop(pool: pg.Pool, table: string, batchSize: number): Promise<number> {
  const sql = viewSql({ schema, table });
  const setup = await pool.connect();
  try {
    for (const ddl of sql.ddl) await setup.query(ddl);
  } finally {
    setup.release();
  }
  const byPartition = new Map<string, ChangeBatch<Order>[]>();
  for (const batch of feed(batchSize)) byPartition.set(batch.partition, [...(byPartition.get(batch.partition) ?? []), batch]);
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
          await client.query('BEGIN');
          if (upserts.length > 0) await client.query(sql.upsertGuarded, [JSON.stringify(upserts)]);
          if (deletes.length > 0) {
            const input = JSON.stringify(deletes);
            await client.query(sql.tombstone, [input]);
            await client.query(sql.deleteGuarded, [input]);
          }
          await client.query('COMMIT');
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

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** The middle half of `xs` (the 25th to the 75th percentile). */
const middleHalf = (xs: number[]): [number, number] => {
  const sorted = [...xs].sort((a, b) => a - b);
  return [sorted[Math.floor((sorted.length - 1) / 4)]!, sorted[Math.ceil(((sorted.length - 1) * 3) / 4)]!];
};

/** The 1-minute load average (ratios from a loaded machine are noisier: the client competes for the cores). */
const load = (): string => loadavg()[0]!.toFixed(1);

async function main(): Promise<void> {
  const loadAtStart = load();
  const rows: string[][] = [];
  const comparisons: string[] = [];
  const record = (store: string, batchSize: number, mode: ViewMode, ms: number) =>
    rows.push([store, String(batchSize), mode, String(CHANGES), ms.toFixed(0), Math.round((CHANGES * 1000) / ms).toLocaleString('en-US')]);

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
      const pool = new pg.Pool({ connectionString: PG_URL, max: PARTITIONS });
      try {
        await handLoop(pool, 'warmup_hand', 100); // untimed
        for (const batchSize of [100, 1000]) {
          const ours: number[] = [];
          const hand: number[] = [];
          const ratios: number[] = [];
          for (let round = 0; round < ROUNDS; round++) {
            // Alternate which one goes first, so that neither always meets a warmer or a busier machine.
            const loop = () => handLoop(pool, `h${++table}`, batchSize);
            const view = async () => {
              const store = await PostgresViewStore.create<Row>({ connection: pool, table: `t${++table}`, schema });
              try {
                return await run(store, batchSize, 'guarded');
              } finally {
                await store.close();
              }
            };
            let h: number;
            let o: number;
            if (round % 2 === 0) {
              h = await loop();
              o = await view();
            } else {
              o = await view();
              h = await loop();
            }
            hand.push(h);
            ours.push(o);
            ratios.push(h / o);
          }
          const [low, high] = middleHalf(ratios);
          comparisons.push(
            `PostgreSQL, batch ${batchSize}, guarded: materializeToView ${median(ours).toFixed(0)} ms, hand-written pg loop ` +
              `${median(hand).toFixed(0)} ms (medians of ${ROUNDS} alternating rounds): ${median(ratios).toFixed(2)}× the loop's throughput ` +
              `(paired per round; middle half ${low.toFixed(2)}–${high.toFixed(2)})`,
          );
        }
      } finally {
        await pool.end();
      }
    } finally {
      await probe.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    }
  }
  await probe.end().catch(() => undefined);

  const header = ['store', 'batch', 'mode', 'changes', 'ms', 'changes/s'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 3 ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join('  ');
  console.log(`\nmaterializeToView, ${PARTITIONS} partitions, concurrency 4, 85% upserts / 15% deletes (node ${process.version})`);
  console.log(line(header));
  for (const r of rows) console.log(line(r));
  if (comparisons.length > 0) console.log(`\n${comparisons.join('\n')}`);
  console.log(`\nload average (1 min): ${loadAtStart} at start, ${load()} at end`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
