/**
 * @summary One processor instance of the demo: reads the `orders` change feed under leases shared with the
 * other instances, materializes order summaries into the parent's PGlite view over IPC, checkpoints after
 * each write committed, and tells the parent about its leases.
 *
 * Started by examples/demo/main.ts (`node --import tsx examples/demo/worker.ts` with an IPC channel).
 * Env: COSMOS_ENDPOINT, COSMOS_KEY, DEMO_HOST (this instance's lease owner name), DEMO_MODE (the feed mode:
 * `allVersionsAndDeletes` or `latestVersion`).
 */
import { CosmosClient } from '@azure/cosmos';
import { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, materializeToView } from 'rxfeed';
import type { FeedEvent, FeedMode } from 'rxfeed';
import { IpcViewStore } from './IpcViewStore.js';
import { DEMO, DEMO_LEASE_TIMINGS, isCancelled, projectOrder, type Order, type OrderSummary, type WorkerMessage } from './orders.js';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (this worker is started by examples/demo/main.ts)`);
  return value;
}

function describe(event: FeedEvent): string {
  switch (event.type) {
    case 'leaseAcquired':
      return `epoch ${event.epoch}`;
    case 'leaseReleased':
      return event.reason;
    case 'leaseLost':
      return event.newOwner ? `to ${event.newOwner}` : '';
    case 'leaseTakenOver':
      return event.from ? `from ${event.from}` : '';
    default:
      return '';
  }
}

function run(): void {
  const host = required('DEMO_HOST');
  const send = (message: WorkerMessage): void => {
    if (process.connected) process.send?.(message, () => undefined);
  };
  const client = new CosmosClient({ endpoint: required('COSMOS_ENDPOINT'), key: required('COSMOS_KEY') });
  const database = client.database(DEMO.database);
  const view = new IpcViewStore<OrderSummary>({ channel: DEMO.viewChannel });
  const mode = required('DEMO_MODE') as FeedMode;

  const feed = createChangeFeed<Order>({
    source: new CosmosSource<Order>(database.container(DEMO.orders), { mode }),
    leases: new CosmosLeaseStore({ container: database.container(DEMO.leases) }),
    instanceName: host,
    leasePrefix: DEMO.leasePrefix,
    // An AllVersionsAndDeletes feed can only start from now (the service keeps no full history); the demo
    // writes nothing until every lease holds its first checkpoint, so nothing is missed.
    startFrom: mode === 'allVersionsAndDeletes' ? 'now' : 'beginning',
    maxItemCount: 200,
    pollIntervalMs: 200,
    drainTimeoutMs: 5_000,
    ...DEMO_LEASE_TIMINGS,
    events: (event) => {
      if (event.type === 'leaseAcquired' || event.type === 'leaseReleased' || event.type === 'leaseLost' || event.type === 'leaseTakenOver') {
        send({ kind: 'lease', host, type: event.type, lease: event.lease, detail: describe(event) });
      } else if (event.type === 'error') {
        send({ kind: 'problem', host, text: `error${event.lease ? ` on range ${event.lease}` : ''}: ${event.error.message}` });
      } else if (event.type === 'stall') {
        send({ kind: 'problem', host, text: `stall${event.lease ? ` on range ${event.lease}` : ''}: ${event.message}` });
      }
    },
  });

  const subscription = feed.changes$
    .pipe(
      // One transaction per batch in the parent's PGlite; re-emitted only after it committed…
      materializeToView(view, { project: projectOrder, isDeleted: isCancelled, concurrency: 4 }),
      // …so a checkpoint only ever covers what is in the view.
      checkpointEvery({ count: 500, ms: 500 }),
    )
    .subscribe({
      error: (error: unknown) => {
        send({ kind: 'problem', host, text: `pipeline failed: ${(error as Error).message}` });
        void shutdown(1);
      },
    });

  let stopping: Promise<void> | undefined;
  const shutdown = (code: number): Promise<void> =>
    (stopping ??= (async () => {
      // Whatever happens below (the parent and its emulator may be gone), do not linger.
      setTimeout(() => process.exit(code), 15_000).unref();
      // stop() releases this host's leases after the batches in flight reached the checkpoint.
      await feed.stop().catch(() => undefined);
      subscription.unsubscribe();
      await view.close();
      client.dispose();
      send({ kind: 'stopped', host });
      if (process.connected) process.disconnect();
      // Leave no idle socket or timer to keep the process alive after its work is done.
      process.exit(code);
    })());

  process.on('message', (message) => {
    if (message === 'stop') void shutdown(0);
  });
  // The parent decides when to stop: Ctrl-C reaches the whole process group, and the parent then sends 'stop'.
  process.on('SIGINT', () => undefined);
  // Parent gone (crashed or killed): nobody is left to hold the view, stop.
  process.on('disconnect', () => void shutdown(0));
  send({ kind: 'ready', host });
}

run();
