/**
 * @summary rxfeed end to end on the in-memory source: four partitions with orders arriving while it runs,
 * a filter, a slow asynchronous sink, checkpointEvery, a progress line every second and a clean shutdown on
 * Ctrl-C. Ends with a check that every order written was processed.
 *
 * Run: `npm run demo:memory` (Ctrl-C to stop), or `npm run demo:memory -- --duration-ms 5000` to stop by itself.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { checkpointEvery, createChangeFeed, eachBatch, filterChanges, MemoryLeaseStore, MemorySource } from 'rxfeed';

interface Order {
  id: string;
  customer: string;
  total: number;
}

export async function main(argv = process.argv.slice(2)): Promise<boolean> {
  const { values } = parseArgs({
    args: argv,
    options: {
      'duration-ms': { type: 'string' },
      partitions: { type: 'string', default: '4' },
      'orders-per-second': { type: 'string', default: '2000' },
    },
  });
  const durationMs = values['duration-ms'] === undefined ? undefined : Number(values['duration-ms']);
  const partitions = Number(values.partitions);
  const ordersPerSecond = Number(values['orders-per-second']);

  const source = new MemorySource<Order>({ partitions });
  const leases = new MemoryLeaseStore();
  const view = new Map<string, Order>(); // the "slow sink": big orders by id

  let written = 0;
  let expectedInView = 0;
  const writeOrders = (n: number) => {
    for (let i = 0; i < n; i++) {
      const total = Math.round(Math.random() * 10_000) / 100;
      source.write({ id: `order-${written}`, customer: `c${written % 97}`, total });
      written++;
      if (total >= 50) expectedInView++;
    }
  };
  writeOrders(5_000); // a backlog to start with
  const writer = setInterval(() => writeOrders(Math.ceil(ordersPerSecond / 10)), 100);

  let checkpointed = 0;
  const positions = new Map<string, string>();
  const feed = createChangeFeed<Order>({
    source,
    leases,
    instanceName: `demo-${process.pid}`,
    leasePrefix: 'demo.',
    maxItemCount: 200,
    pollIntervalMs: 250,
    maxInFlightChanges: 4_000,
    events: (event) => {
      if (event.type === 'checkpoint') {
        checkpointed += event.changes;
        positions.set(event.lease, event.position);
      } else if (event.type === 'error' || event.type === 'stall') {
        console.error(`[${event.type}] ${event.lease ?? ''} ${event.type === 'error' ? event.error.message : event.message}`);
      }
    },
  });

  const done = feed.changes$
    .pipe(
      filterChanges((c) => (c.document?.total ?? 0) >= 50),
      // A sink far slower than the source: ~0.1 ms per order plus 5 ms per write, one batch at a time per
      // partition, partitions in parallel.
      eachBatch(
        async (batch) => {
          await sleep(5 + batch.size / 10);
          for (const change of batch) if (change.document) view.set(change.id, change.document);
        },
        { concurrency: partitions },
      ),
      checkpointEvery({ count: 1_000, ms: 1_000 }),
    )
    .subscribe({ error: (error: unknown) => console.error('pipeline failed:', error) });

  const started = Date.now();
  let last = { at: started, checkpointed: 0 };
  const progress = setInterval(() => {
    const now = Date.now();
    const rate = ((checkpointed - last.checkpointed) * 1000) / Math.max(1, now - last.at);
    last = { at: now, checkpointed };
    const cps = [...positions].sort(([a], [b]) => a.localeCompare(b)).map(([lease, pos]) => `${lease}@${pos}`);
    console.log(
      `${((now - started) / 1000).toFixed(0).padStart(3)}s  written ${written}  processed ${checkpointed} ` +
        `(${Math.round(rate)}/s)  in flight ${feed.inFlightChanges}  view ${view.size}  checkpoints ${cps.join(' ')}`,
    );
  }, 1_000);

  // Shut down on Ctrl-C or after --duration-ms: stop writing, let the feed catch up (bounded), then stop it.
  let interrupted = 0;
  let onSigint: () => void = () => undefined;
  await new Promise<void>((resolve) => {
    onSigint = () => {
      if (++interrupted > 1) process.exit(130);
      resolve();
    };
    process.on('SIGINT', onSigint);
    if (durationMs !== undefined) setTimeout(resolve, durationMs);
  });
  clearInterval(writer);
  console.log(`stopping: ${written} orders written; catching up (Ctrl-C again to quit at once)`);
  const deadline = Date.now() + 15_000;
  while (checkpointed < written && Date.now() < deadline) await sleep(100);
  await feed.stop();
  clearInterval(progress);
  done.unsubscribe();
  process.off('SIGINT', onSigint);

  const atEnd = leases
    .snapshot()
    .filter((l) => l.feedRange !== undefined)
    .every((l) => l.continuation === `mem:${source.latestLsn(l.leaseToken)}`);
  const ok = checkpointed === written && view.size === expectedInView && atEnd;
  console.log(
    `check: ${ok ? 'OK' : 'FAILED'}: ${written} written, ${checkpointed} processed and checkpointed, ` +
      `${view.size}/${expectedInView} orders ≥ 50 in the view, checkpoints ${atEnd ? '' : 'NOT '}at the end of every partition`,
  );
  return ok;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    (ok) => process.exit(ok ? 0 : 1),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
