/**
 * Handler form versus Rx form: the same MemorySource (8 partitions), the same per-batch work, the same
 * checkpoint throttle, through the whole engine (leases, readers, credit, checkpoints). Rounds alternate in
 * one process; the ratio is the median of the per-round ratios (Rx time / handler time: handler throughput
 * relative to the Rx form). Target ≥ 0.9.
 *
 * Run: npx tsx bench/handlers.ts   (options: --changes N, --rounds N, --page N)
 */
import { filter, firstValueFrom, scan } from 'rxjs';
import type { Change } from '../src/core/Change.js';
import { createChangeFeed } from '../src/feed/index.js';
import { processChanges } from '../src/handlers/index.js';
import { MemoryLeaseStore } from '../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../src/operators/checkpointEvery.js';
import { eachBatch } from '../src/operators/eachBatch.js';
import { MemorySource } from '../src/sources/MemorySource.js';

interface Doc {
  id: string;
  n: number;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const CHANGES = arg('changes', 1_000_000);
const ROUNDS = arg('rounds', 7);
const PAGE = arg('page', 100);
const PARTITIONS = 8;
const CHECKPOINT = { count: 10_000, ms: 1_000 } as const;

/** The work of one call: a little arithmetic over the changes, awaited like real async work. */
let sink = 0;
async function work(changes: readonly Change<Doc>[]): Promise<void> {
  for (const c of changes) sink += c.document?.n ?? 0;
}

function feedOptions(source: MemorySource<Doc>) {
  return { source, leases: new MemoryLeaseStore(), instanceName: 'bench', leasePrefix: 'bench.', maxItemCount: PAGE, maxInFlightChanges: PAGE * 32, pollIntervalMs: 1_000 };
}

async function rxForm(source: MemorySource<Doc>): Promise<number> {
  const started = performance.now();
  const feed = createChangeFeed<Doc>(feedOptions(source));
  await firstValueFrom(
    feed.changes$.pipe(
      eachBatch((batch) => work(batch.changes), { concurrency: PARTITIONS }),
      checkpointEvery(CHECKPOINT),
      scan((n, b) => n + b.size, 0),
      filter((n) => n >= CHANGES),
    ),
  );
  const ms = performance.now() - started;
  await feed.stop();
  return ms;
}

async function handlerForm(source: MemorySource<Doc>): Promise<number> {
  const started = performance.now();
  let count = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  const handle = processChanges<Doc>(
    { ...feedOptions(source), checkpoint: CHECKPOINT },
    {
      processChanges: async (changes) => {
        await work(changes);
        count += changes.length;
        if (count >= CHANGES) done();
      },
    },
  );
  await all;
  const ms = performance.now() - started;
  await handle.close();
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const source = new MemorySource<Doc>({ partitions: PARTITIONS });
for (let i = 0; i < CHANGES; i++) source.write({ id: `d${i}`, n: i });
console.log(`node ${process.version}, ${process.platform}/${process.arch}; ${CHANGES} changes, ${PARTITIONS} partitions, pages of ${PAGE}, ${ROUNDS} rounds\n`);
await rxForm(source); // warm-up, both paths
await handlerForm(source);
const rx: number[] = [];
const handlers: number[] = [];
const ratios: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  const r = await rxForm(source);
  const h = await handlerForm(source);
  rx.push(r);
  handlers.push(h);
  ratios.push(r / h);
}
const rate = (ms: number) => Math.round(CHANGES / (ms / 1000)).toLocaleString('en-US');
console.log(`Rx form (eachBatch + checkpointEvery): median ${median(rx).toFixed(0)} ms, ${rate(median(rx))} changes/s`);
console.log(`handler form (processChanges):         median ${median(handlers).toFixed(0)} ms, ${rate(median(handlers))} changes/s`);
console.log(`ratio (handler throughput / Rx throughput, median of rounds): ${median(ratios).toFixed(2)} (target ≥ 0.9)`);
if (sink < 0) throw new Error('unreachable');
