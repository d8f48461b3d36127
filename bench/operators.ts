/**
 * Per-change operators against a plain RxJS `map`: `mapChanges` and `filterChanges` over the same batches
 * (already in memory, 4 partitions interleaved, as a feed delivers them), versus
 * `map((b) => b.withChanges(b.changes.map(fn)))` and the same with `filter`: what the operator itself costs
 * per batch (its ordering per partition, its failure handling, its telemetry context), with nothing else in
 * the way. Each run is timed in this process's CPU time (steadier than wall time on a shared machine), after
 * a full GC. Rounds alternate; the ratio is the median of the per-round ratios (plain time / rxfeed time:
 * rxfeed's throughput relative to the plain map), with the middle half's spread. Target ≥ 0.9.
 *
 * Run: npx tsx bench/operators.ts   (env: BENCH_CHANGES=200000 BENCH_ROUNDS=15 BENCH_PAGES=10,100,1000;
 * BENCH_PROFILE=path writes CPU profiles of 20 more runs of each side: path.<operator>-<page>.{plain,rxfeed}.cpuprofile)
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { count, from, lastValueFrom, map, type OperatorFunction } from 'rxjs';
import type { Change } from '../src/core/Change.js';
import type { ChangeBatch as Batch } from '../src/core/ChangeBatch.js';
import { ChangeBatch, filterChanges, mapChanges } from './built.js';

type ChangeBatch<T> = Batch<T>;
import { median, paired, profiled, ratioLine } from './stats.js';

interface Doc {
  id: string;
  n: number;
}

setFlagsFromString('--expose-gc');
/** A full GC before each run: none pays for the garbage of the one before. */
const gc = runInNewContext('gc') as () => void;

const CHANGES = Number(process.env.BENCH_CHANGES ?? 200_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const PAGES = (process.env.BENCH_PAGES ?? '10,100,1000').split(',').map(Number);

function batchesOf(page: number): ChangeBatch<Doc>[] {
  const batches: ChangeBatch<Doc>[] = [];
  for (let b = 0; b < CHANGES / page; b++) {
    const changes: Change<Doc>[] = [];
    for (let i = 0; i < page; i++) changes.push({ id: `d${i}`, operation: 'upsert', document: { id: `d${i}`, n: b * page + i }, lsn: b * page + i, timestampMs: 0 });
    batches.push(new ChangeBatch({ partition: `p${b % 4}`, changes, position: String(b), epoch: 1 }));
  }
  return batches;
}

const double = (c: Change<Doc>): Change<Doc> => ({ ...c, document: c.document && { id: c.document.id, n: c.document.n * 2 } });
const even = (c: Change<Doc>): boolean => (c.document?.n ?? 0) % 2 === 0;

async function time(batches: readonly ChangeBatch<Doc>[], operator: OperatorFunction<ChangeBatch<Doc>, ChangeBatch<Doc>>): Promise<number> {
  gc();
  const started = process.cpuUsage();
  const n = await lastValueFrom(from(batches).pipe(operator, count()));
  const used = process.cpuUsage(started);
  const ms = (used.user + used.system) / 1000;
  if (n !== batches.length) throw new Error(`${n} of ${batches.length} batches came out`);
  return ms;
}

console.log(`node ${process.version}; ${CHANGES} changes in batches of ${PAGES.join(', ')}; 4 partitions; ${ROUNDS} alternating rounds`);
for (const page of PAGES) {
  const batches = batchesOf(page);
  for (const [name, rxfeed, plain] of [
    ['mapChanges', mapChanges<ChangeBatch<Doc>, Doc>(double), map((b: ChangeBatch<Doc>) => b.withChanges(b.changes.map(double)))],
    ['filterChanges', filterChanges<ChangeBatch<Doc>>(even), map((b: ChangeBatch<Doc>) => b.withChanges(b.changes.filter(even)))],
  ] as const) {
    const { a: plainMs, b: rxMs } = await paired(ROUNDS, () => time(batches, plain), () => time(batches, rxfeed), 2);
    console.log(
      `${name.padEnd(13)} batches of ${String(page).padEnd(4)}: plain ${median(plainMs).toFixed(1)} ms CPU, rxfeed ${median(rxMs).toFixed(1)} ms CPU; ` +
        `throughput rxfeed ÷ plain ${ratioLine(plainMs.map((p, i) => p / rxMs[i]!))}`,
    );
    await profiled(`${name}-${page}.plain`, () => time(batches, plain), 20);
    await profiled(`${name}-${page}.rxfeed`, () => time(batches, rxfeed), 20);
  }
}
