/**
 * What rxfeed costs in request units (RU, as the emulator charges them: its table follows the service's
 * published costs, see src/emulator/charges.ts), for the change feed and for the lease container:
 *
 * - busy: RU per 1,000 changes processed (4 ranges, `checkpointEvery({ count: 1000, ms: 5000 })`);
 * - idle: RU per lease-hour with nothing to read (a host owning 4 leases for an hour of virtual time);
 *
 * next to the .NET change feed processor's request model at its defaults (renew every 17 s, a lease
 * listing every 13 s, a poll every 5 s, a checkpoint per page of 100), priced with the charges the emulator
 * gave rxfeed's own requests of each kind. The processor runs on a virtual clock (an hour takes seconds);
 * every request goes to the emulator over HTTP through the real `@azure/cosmos` client.
 *
 * Run: npx tsx bench/requestUnits.ts   (BENCH_CHANGES to change the busy run's size)
 */
import { CosmosClient } from '@azure/cosmos';
import { checkpointEvery, CosmosLeaseStore, CosmosSource, createChangeFeed, type LeaseStore, type Source } from '../src/index.js';
import { CosmosEmulator } from '../src/emulator/index.js';
import type { LoggedRequest } from '../src/emulator/server.js';
import { VirtualClock } from '../test/support/faults/clock.js';

const CHANGES = Number(process.env['BENCH_CHANGES'] ?? 4_000);
const RANGES = 4;
const HOUR = 3_600_000;
const NET = { renewMs: 17_000, acquireMs: 13_000, pollMs: 5_000, pageSize: 100 };

// The monitored container has RANGES physical partitions; the lease container, small, has one (as on the service).
const emulator = await CosmosEmulator.start({ initialRangeCount: (_db, coll) => (coll === 'leases' ? 1 : RANGES), requestLogSize: 1_000_000 });
const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
const { database } = await client.databases.createIfNotExists({ id: 'ru' });
const { container: orders } = await database.containers.createIfNotExists({ id: 'orders', partitionKey: { paths: ['/id'] } });
const { container: leaseContainer } = await database.containers.createIfNotExists({ id: 'leases', partitionKey: { paths: ['/id'] } });

/** Counts calls in flight, so virtual time only moves once every request it started has come back; and listings. */
let inFlight = 0;
let listings = 0;
const tracked = <T extends object>(target: T): T =>
  new Proxy(target, {
    get(t, key, receiver) {
      const value = Reflect.get(t, key, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (key === 'list') listings++;
        const result = (value as (...a: unknown[]) => unknown).apply(t, args);
        if (!(result instanceof Promise)) return result;
        inFlight++;
        return result.finally(() => inFlight--);
      };
    },
  });

async function advance(clock: VirtualClock, ms: number, stepMs = 1_000): Promise<void> {
  for (let t = 0; t < ms; t += stepMs) {
    await clock.advance(stepMs);
    let spins = 0;
    do {
      await new Promise((resolve) => setImmediate(resolve));
      if (++spins % 10_000 === 0) console.error(`waiting: ${inFlight} calls in flight at ${new Date(clock.now()).toISOString()}`);
    } while (inFlight > 0);
  }
}

const ru = (log: readonly LoggedRequest[], pick: (r: LoggedRequest) => boolean) => log.filter(pick).reduce((sum, r) => sum + (r.requestCharge ?? 0), 0);
const onLeases = (r: LoggedRequest) => r.containerId === 'leases';
const onFeed = (r: LoggedRequest) => r.containerId === 'orders' && r.kind === 'changeFeed';
const mean = (log: readonly LoggedRequest[], pick: (r: LoggedRequest) => boolean) => {
  const hits = log.filter(pick);
  return hits.length === 0 ? NaN : ru(hits, () => true) / hits.length;
};

function processor(clock: VirtualClock) {
  return createChangeFeed<{ id: string }>({
    source: tracked(new CosmosSource<{ id: string }>(orders)) as Source<{ id: string }>,
    leases: tracked(new CosmosLeaseStore({ container: leaseContainer })) as LeaseStore,
    instanceName: 'bench',
    leasePrefix: 'ru.',
    scheduler: clock,
    telemetry: false,
  });
}

// ---- start-up, then busy: CHANGES changes on leases already owned, then the stop ---------------------------
const busyClock = new VirtualClock(Date.now());
const busy = processor(busyClock);
let processed = 0;
const busySubscription = busy.changes$
  .pipe(checkpointEvery({ count: 1_000, ms: 5_000, scheduler: busyClock }))
  .subscribe((batch) => (processed += batch.size));
await advance(busyClock, 10_000, 100); // bootstrap, acquire every lease
const startupLog = emulator.requests();
// Written while virtual time stands still: the processor only reads them once time moves.
for (let i = 0; i < CHANGES; i += 100) {
  await Promise.all(Array.from({ length: Math.min(100, CHANGES - i) }, (_, j) => orders.items.create({ id: `o${i + j}`, total: i + j, customer: `c${(i + j) % 97}` })));
}
emulator.clearRequests();
const busyStart = busyClock.now();
while (processed < CHANGES) await advance(busyClock, 100, 100);
await advance(busyClock, 5_000, 100); // the last checkpoint (every 5 s at most)
const busyMs = busyClock.now() - busyStart;
const busyLog = emulator.requests();
emulator.clearRequests();
let stopped = false;
void busy.stop().then(() => (stopped = true));
while (!stopped) await advance(busyClock, 100, 100);
busySubscription.unsubscribe();
const stopLog = emulator.requests();

// ---- idle: the same leases, nothing to read, one hour -----------------------------------------------------
emulator.clearRequests();
const idleClock = new VirtualClock(Date.now() + HOUR);
const idle = processor(idleClock);
const subscription = idle.changes$.pipe(checkpointEvery({ count: 1_000, ms: 5_000, scheduler: idleClock })).subscribe();
await advance(idleClock, 5 * 60_000); // settle: acquire the leases
emulator.clearRequests();
listings = 0;
await advance(idleClock, HOUR);
const idleLog = emulator.requests();
const idleListings = listings;
if (process.env['BENCH_VERBOSE']) {
  const kinds = new Map<string, { n: number; ru: number }>();
  for (const r of idleLog) {
    const key = `${r.containerId ?? '-'} ${r.kind} ${r.method}`;
    const k = kinds.get(key) ?? { n: 0, ru: 0 };
    k.n++;
    k.ru += r.requestCharge ?? 0;
    kinds.set(key, k);
  }
  for (const [key, k] of kinds) console.log(`  idle hour: ${key}: ${k.n} requests, ${k.ru.toFixed(1)} RU`);
}
const owned = idle.health().leases.length;
let idleStopped = false;
void idle.stop().then(() => (idleStopped = true));
while (!idleStopped) await advance(idleClock, 100, 100);
subscription.unsubscribe();

// ---- the .NET request model, priced with the charges rxfeed's own requests got ----------------------------
const replaceRu = mean([...busyLog, ...idleLog], (r) => onLeases(r) && (r.kind === 'replace' || r.kind === 'batch'));
/** A whole listing: the query pages, and the query plan and range map the client asks for first. */
const listRu = ru(idleLog, (r) => onLeases(r) && (r.kind === 'query' || r.kind === 'queryPlan' || r.kind === 'pkranges')) / idleListings;
const emptyPollRu = mean(idleLog, onFeed);
const netIdleLeaseRu = (HOUR / NET.renewMs) * replaceRu + (HOUR / NET.acquireMs / owned) * listRu;
const netIdleFeedRu = (HOUR / NET.pollMs) * emptyPollRu;
const busyHours = busyMs / HOUR;
const netBusyLeaseRu =
  (CHANGES / NET.pageSize) * replaceRu + RANGES * busyHours * (HOUR / NET.renewMs) * replaceRu + busyHours * (HOUR / NET.acquireMs) * listRu;

const per1k = (x: number) => ((x / CHANGES) * 1_000).toFixed(1);
const startupRu = ru(startupLog, (r) => onLeases(r) || onFeed(r));
const stopRu = ru(stopLog, (r) => onLeases(r) || onFeed(r));
const busyLeaseRu = ru(busyLog, onLeases);
const busyFeedRu = ru(busyLog, onFeed);
const idleLeaseRu = ru(idleLog, onLeases) / owned;
const idleFeedRu = ru(idleLog, onFeed) / owned;
console.log(
  `request units (emulator charges), ${RANGES} ranges:\n` +
    `  start-up (bootstrap ${RANGES} leases, acquire them): ${startupRu.toFixed(0)} RU; graceful stop: ${stopRu.toFixed(0)} RU\n` +
    `  busy, per 1,000 changes (${CHANGES} changes in ${(busyMs / 1000).toFixed(1)} s of virtual time): change feed ${per1k(busyFeedRu)} RU; ` +
    `lease container ${per1k(busyLeaseRu)} RU (.NET model ${per1k(netBusyLeaseRu)} RU: ${(busyLeaseRu / netBusyLeaseRu).toFixed(2)}×)\n` +
    `  idle, per lease-hour (${owned} leases owned): lease container ${idleLeaseRu.toFixed(0)} RU (.NET model ${netIdleLeaseRu.toFixed(0)} RU: ` +
    `${(idleLeaseRu / netIdleLeaseRu).toFixed(2)}×); change feed polls ${idleFeedRu.toFixed(0)} RU (.NET model ${netIdleFeedRu.toFixed(0)} RU: ${(idleFeedRu / netIdleFeedRu).toFixed(2)}×)\n` +
    `  charges seen: lease write ${replaceRu.toFixed(2)} RU, lease listing ${listRu.toFixed(2)} RU, empty poll ${emptyPollRu.toFixed(2)} RU`,
);
client.dispose();
await emulator.stop();
