/**
 * Operator overhead: MemorySource → mapChanges → checkpointEvery through the whole engine (leases, partition
 * readers, credit flow control, checkpoints), versus a bare loop reading the same pages from the same source
 * and mapping every change with the same function. Both in one process, alternating; the ratio is the median of the per-round ratios.
 * A ratio of 1.0 means rxfeed costs nothing over the loop; the target is ≥ 0.8.
 *
 * Run: npx tsx bench/overhead.ts
 */
import { filter, firstValueFrom, scan } from 'rxjs';
import type { Change } from '../src/core/Change.js';
import type { Partition, StartFrom } from '../src/core/Partition.js';
import { createChangeFeed } from '../src/feed/index.js';
import { MemoryLeaseStore } from '../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../src/operators/checkpointEvery.js';
import { mapChanges } from '../src/operators/mapChanges.js';
import { MemorySource } from '../src/sources/MemorySource.js';

interface Doc {
  id: string;
  n: number;
  customer: string;
}

export interface OverheadResult {
  changes: number;
  pageSize: number;
  bareMs: number;
  rxfeedMs: number;
  /** Median over rounds of bare time / rxfeed time (throughput of rxfeed relative to the loop). */
  ratio: number;
}

const project = (c: Change<Doc>): Change<{ id: string; n: number }> => ({
  ...c,
  document: c.document && { id: c.document.id, n: c.document.n * 2 },
});

/** The same reads and the same map, as plain loops (one per partition, run concurrently like the readers). */
async function bareLoop(source: MemorySource<Doc>, pageSize: number): Promise<number> {
  let count = 0;
  let sink = 0;
  const readAll = async (partition: Partition) => {
    let from: StartFrom = 'beginning';
    for (;;) {
      const page = await source.read({ partition, from, maxItemCount: pageSize });
      const mapped = page.changes.map(project);
      for (const c of mapped) sink += c.document?.n ?? 0;
      count += page.changes.length;
      from = { position: page.position };
      if (page.changes.length < pageSize) return;
    }
  };
  await Promise.all((await source.listPartitions()).map(readAll));
  if (sink < 0) throw new Error('unreachable');
  return count;
}

/** Reads through rxfeed until every change went through; returns the count and the time it took (stop() excluded). */
async function throughRxfeed(source: MemorySource<Doc>, pageSize: number, total: number): Promise<[number, number]> {
  const started = performance.now();
  const feed = createChangeFeed<Doc>({
    source,
    leases: new MemoryLeaseStore(),
    leasePrefix: 'test.', instanceName: 'bench',
    maxItemCount: pageSize,
    maxInFlightChanges: pageSize * 32,
    pollIntervalMs: 1_000,
  });
  let sink = 0;
  const count = await firstValueFrom(
    feed.changes$.pipe(
      mapChanges(project),
      checkpointEvery({ count: 10_000, ms: 1_000 }),
      scan((n, b) => {
        for (const c of b) sink += c.document?.n ?? 0;
        return n + b.size;
      }, 0),
      filter((n) => n >= total),
    ),
  );
  const elapsed = performance.now() - started;
  if (sink < 0) throw new Error('unreachable');
  await feed.stop();
  return [count, elapsed];
}

export async function runOverhead({ changes = 200_000, pageSize = 1_000, partitions = 4, rounds = 9 } = {}): Promise<OverheadResult> {
  const source = new MemorySource<Doc>({ partitions });
  for (let i = 0; i < changes; i++) source.write({ id: `d${i}`, n: i, customer: `c${i % 100}` });
  const bare: number[] = [];
  const rx: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const t = performance.now();
    const a = await bareLoop(source, pageSize);
    bare.push(performance.now() - t);
    const [b, elapsed] = await throughRxfeed(source, pageSize, changes);
    rx.push(elapsed);
    if (a !== changes || b !== changes) throw new Error(`counted ${a} / ${b} of ${changes}`);
    if (round > 0) ratios.push(bare.at(-1)! / elapsed); // round 0 warms the JIT up
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const bareMs = median(bare.slice(1));
  const rxfeedMs = median(rx.slice(1));
  return { changes, pageSize, bareMs, rxfeedMs, ratio: median(ratios) };
}

export function formatOverhead(r: OverheadResult): string {
  const rate = (ms: number) => `${Math.round((r.changes / ms) * 1000).toLocaleString('en-US')} changes/s`;
  return [
    `operator overhead (${r.changes.toLocaleString('en-US')} changes, pages of ${r.pageSize}, median of rounds)`,
    `  bare loop (read pages, map)                        ${r.bareMs.toFixed(1).padStart(8)} ms  ${rate(r.bareMs)}`,
    `  rxfeed (changeFeed → mapChanges → checkpointEvery) ${r.rxfeedMs.toFixed(1).padStart(8)} ms  ${rate(r.rxfeedMs)}`,
    `  ratio rxfeed/bare throughput: ${r.ratio.toFixed(2)}× (target ≥ 0.8×)`,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const pageSize of [100, 1_000]) console.log(formatOverhead(await runOverhead({ pageSize })));
}
