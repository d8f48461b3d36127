/**
 * Memory under a slow sink: heap growth while a 200k-change backlog drains into a sink far slower than the
 * source, rxfeed (credit flow control) versus an eager reader that reads pages as fast as it can into the
 * same sink. Reads go through a source that copies every change, as a network source deserialises each
 * page into new objects (~1 kB documents), so anything read ahead really costs heap.
 *
 * The heap is sampled (after a forced GC) every 250 ms; "growth" is over the heap before reading began.
 * Targets for rxfeed: ≤ 64 MB and flat (the second half of the run grows no more than the first).
 *
 * Run: npx tsx bench/memory.ts
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { concatMap, map, Observable, timer, type Subscription } from 'rxjs';
import type { ChangeBatch } from '../src/core/ChangeBatch.js';
import { ChangeBatch as Batch } from '../src/core/ChangeBatch.js';
import type { Partition, StartFrom } from '../src/core/Partition.js';
import { createChangeFeed } from '../src/feed/index.js';
import { MemoryLeaseStore } from '../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../src/operators/checkpointEvery.js';
import { MemorySource } from '../src/sources/MemorySource.js';
import type { Page, ReadRequest, Source } from '../src/sources/Source.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface Doc {
  id: string;
  n: number;
  payload: string;
}

/** Copies every page, like a source that deserialises each response. */
class WireSource implements Source<Doc> {
  constructor(private readonly inner: MemorySource<Doc>) {}
  get description() {
    return 'wire';
  }
  get mode() {
    return this.inner.mode;
  }
  listPartitions(signal?: AbortSignal) {
    return this.inner.listPartitions(signal);
  }
  async read(request: ReadRequest): Promise<Page<Doc>> {
    const page = await this.inner.read(request);
    return { ...page, changes: JSON.parse(JSON.stringify(page.changes)) as Page<Doc>['changes'] };
  }
}

export interface MemoryResult {
  name: string;
  processed: number;
  /** Heap growth samples over the baseline, in MB. */
  samplesMb: number[];
  maxGrowthMb: number;
  /** Mean growth of the first and second half of the samples, in MB. */
  firstHalfMb: number;
  secondHalfMb: number;
}

const MB = 1024 * 1024;
const heap = () => {
  gc();
  return process.memoryUsage().heapUsed;
};

/** The slow sink: 1 ms per 20 changes, one batch at a time (20k changes/s, 10 s for the backlog). */
const slowSink = <B extends ChangeBatch<Doc>>(b: B) => timer(Math.ceil(b.size / 20)).pipe(map(() => b));

async function measure(name: string, start: () => { processed: () => number; stop: () => Promise<void> }, durationMs: number) {
  const baseline = heap();
  const run = start();
  const samples: number[] = [];
  const until = Date.now() + durationMs;
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 250));
    samples.push((heap() - baseline) / MB);
  }
  const processed = run.processed();
  await run.stop();
  const half = Math.floor(samples.length / 2);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  return {
    name,
    processed,
    samplesMb: samples,
    maxGrowthMb: Math.max(...samples),
    firstHalfMb: mean(samples.slice(0, half)),
    secondHalfMb: mean(samples.slice(half)),
  } satisfies MemoryResult;
}

export async function runMemory({ changes = 200_000, partitions = 4, durationMs = 5_000 } = {}): Promise<MemoryResult[]> {
  const memory = new MemorySource<Doc>({ partitions });
  const payload = 'x'.repeat(1_000);
  for (let i = 0; i < changes; i++) memory.write({ id: `d${i}`, n: i, payload });
  const source = new WireSource(memory);

  const rxfeed = await measure(
    'rxfeed (maxInFlightChanges 10 000)',
    () => {
      const feed = createChangeFeed<Doc>({ source, leases: new MemoryLeaseStore(), leasePrefix: 'test.', instanceName: 'bench', maxItemCount: 100 });
      let processed = 0;
      const sub = feed.changes$
        .pipe(concatMap(slowSink), checkpointEvery({ count: 1_000, ms: 1_000 }))
        .subscribe((b) => (processed += b.size));
      return {
        processed: () => processed,
        stop: async () => {
          await feed.stop();
          sub.unsubscribe();
        },
      };
    },
    durationMs,
  );

  const eager = await measure(
    'eager reader (no flow control)',
    () => {
      let processed = 0;
      const controller = new AbortController();
      const pages = new Observable<ChangeBatch<Doc>>((subscriber) => {
        const readAll = async (partition: Partition) => {
          let from: StartFrom = 'beginning';
          while (!controller.signal.aborted) {
            const page = await source.read({ partition, from, maxItemCount: 100 });
            subscriber.next(new Batch({ partition: partition.id, changes: page.changes, position: page.position }));
            from = { position: page.position };
            if (page.changes.length < 100) return;
          }
        };
        void source.listPartitions().then((ps) => Promise.all(ps.map(readAll)));
        return () => controller.abort();
      });
      const sub: Subscription = pages.pipe(concatMap(slowSink)).subscribe((b) => (processed += b.size));
      return {
        processed: () => processed,
        stop: async () => sub.unsubscribe(),
      };
    },
    durationMs,
  );
  return [rxfeed, eager];
}

export function formatMemory(results: MemoryResult[]): string {
  const [rx, eager] = results as [MemoryResult, MemoryResult];
  const line = (r: MemoryResult) =>
    `  ${r.name.padEnd(36)} max +${r.maxGrowthMb.toFixed(1).padStart(6)} MB   mean 1st half +${r.firstHalfMb
      .toFixed(1)
      .padStart(6)} MB, 2nd half +${r.secondHalfMb.toFixed(1).padStart(6)} MB   processed ${r.processed}`;
  return [
    'memory under a slow sink (200k backlog, ~1 kB documents, sink 20k changes/s, heap after GC every 250 ms)',
    line(rx),
    line(eager),
    `  rxfeed heap growth: ${rx.maxGrowthMb.toFixed(1)} MB (target ≤ 64 MB, flat: 2nd/1st half ${(rx.secondHalfMb / Math.max(0.1, rx.firstHalfMb)).toFixed(2)}×); ` +
      `eager reader / rxfeed: ${(eager.maxGrowthMb / Math.max(0.1, rx.maxGrowthMb)).toFixed(1)}×`,
    `  rxfeed samples (MB): ${rx.samplesMb.map((s) => s.toFixed(0)).join(' ')}`,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(formatMemory(await runMemory()));
}
