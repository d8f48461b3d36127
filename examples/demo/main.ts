/**
 * @summary `npm run demo`: an embedded Cosmos DB emulator, a steady stream of orders, two processor processes
 * sharing one lease container, an order-summary view in embedded PostgreSQL (PGlite), a crash halfway with
 * the survivor taking over, and a final check that the view equals the source.
 *
 * Run: `npm run demo` (Ctrl-C to stop early), or with flags:
 * `npm run demo -- --duration-ms 20000 --ranges 4 --rate 200 --mode allVersionsAndDeletes`.
 * Nothing but Node is needed: no Docker, no cloud account.
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CosmosLeaseStore, CosmosSource, estimateLag } from 'rxfeed';
import { PGliteViewStore } from 'rxfeed/postgres';
import type { FeedMode, LeaseLag } from 'rxfeed';
import { CosmosEmulator } from 'rxfeed/emulator';
import { serveViewStore } from './IpcViewStore.js';
import { compareView, DEMO, DEMO_LEASE_TIMINGS, OrderWriter, readAllOrders, type OrderSummary, type ViewComparison, type WorkerMessage } from './orders.js';

/** Settings of {@link runDemo}. */
export interface DemoOptions {
  /** How long orders are written, in ms; one instance is killed halfway. Default 30 000. */
  readonly durationMs?: number;
  /** Partition key ranges of the orders container. Default 4. */
  readonly ranges?: number;
  /** Order writes per second (creates, updates, cancellations, deletes). Default 200. */
  readonly rate?: number;
  /**
   * Change feed mode. `'allVersionsAndDeletes'` (default) sees every version and real deletes, and starts
   * from now; `'latestVersion'` reads from the beginning, folds quick updates, and has no deletes (the demo
   * then only cancels orders, which the view treats as soft deletes).
   */
  readonly mode?: FeedMode;
  /** Where progress lines go. Default `console.log`. */
  readonly print?: (line: string) => void;
  /** Stops the demo early (as Ctrl-C does): writing stops, the instances shut down cleanly, no check runs. */
  readonly signal?: AbortSignal;
}

/** What a demo run found. */
export interface DemoResult {
  /** The view equals the source's open orders and every range's checkpoint reached the end. */
  readonly pass: boolean;
  /** Stopped early (Ctrl-C or `signal`): no check was made. */
  readonly interrupted: boolean;
  readonly written: number;
  /** Changes written into the view (a change replayed after the crash counts again). */
  readonly processed: number;
  /** Ranges the surviving instance took over from the killed one. */
  readonly takenOver: readonly string[];
  readonly comparison?: ViewComparison;
}

const HOSTS = ['host-a', 'host-b'] as const;
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

interface Instance {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  ready: boolean;
  killed: boolean;
}

function positiveNumber(flag: string, value: string | undefined, fallback: number, integer = false): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new Error(`--${flag} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(value)}`);
  }
  return n;
}

function feedMode(value: string | undefined): FeedMode {
  if (value === undefined) return 'allVersionsAndDeletes';
  if (value !== 'allVersionsAndDeletes' && value !== 'latestVersion') {
    throw new Error(`--mode must be allVersionsAndDeletes or latestVersion, got ${JSON.stringify(value)}`);
  }
  return value;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;
const rangeList = (ids: Iterable<string>): string => [...ids].sort((a, b) => Number(a) - Number(b) || a.localeCompare(b)).join(',');

async function createContainers(client: CosmosClient): Promise<{ orders: Container; leases: Container }> {
  const { database } = await client.databases.createIfNotExists({ id: DEMO.database });
  const { container: orders } = await database.containers.createIfNotExists({ id: DEMO.orders, partitionKey: { paths: ['/customerId'], version: 2 } });
  const { container: leases } = await database.containers.createIfNotExists({ id: DEMO.leases, partitionKey: { paths: ['/id'] } });
  return { orders, leases };
}

/**
 * Runs the demo end to end and resolves with its result (it never calls `process.exit`).
 *
 * @example
 * ```ts
 * const result = await runDemo({ durationMs: 15_000, ranges: 4, rate: 200 });
 * if (!result.pass) process.exitCode = 1;
 * ```
 */
export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const durationMs = options.durationMs ?? 30_000;
  const ranges = options.ranges ?? 4;
  const rate = options.rate ?? 200;
  const mode = options.mode ?? 'allVersionsAndDeletes';
  const print = options.print ?? ((line: string) => console.log(line));
  const signal = options.signal;
  const started = Date.now();
  const elapsed = (): string => seconds(Date.now() - started).padStart(6);
  const say = (line: string): void => print(`${elapsed()}  ${line}`);

  say(`starting the Cosmos DB emulator (${ranges} ranges)`);
  const emulator = await CosmosEmulator.start({ initialRangeCount: (_db, container) => (container === DEMO.orders ? ranges : 1) });
  // PGlite takes seconds to start: let it boot while the instances start (their view calls wait for it).
  const view = new PGliteViewStore<OrderSummary>({
    table: DEMO.viewTable,
    columns: { customer: 'text', status: 'text', line_count: 'integer', total_cents: 'bigint' },
  });
  const viewReady = view.ready();
  viewReady.catch(() => undefined); // awaited below; this only keeps an early failure from going unhandled
  const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
  const instances = new Map<string, Instance>();
  let writerTimer: NodeJS.Timeout | undefined;
  let progressTimer: NodeJS.Timeout | undefined;
  const aborted = new Promise<void>((resolve) => {
    if (signal?.aborted) resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  const wait = async (ms: number): Promise<boolean> => {
    await Promise.race([sleep(ms), aborted]);
    return signal?.aborted !== true;
  };
  const interruptedEarly = async (): Promise<DemoResult> => {
    await stopInstances(instances);
    say('interrupted: stopped cleanly, no check made');
    return { pass: false, interrupted: true, written: 0, processed: 0, takenOver: [] };
  };
  try {
    const { orders, leases } = await createContainers(client);
    say(`emulator at ${emulator.endpoint}: database ${DEMO.database}, containers ${DEMO.orders} (${ranges} ranges) and ${DEMO.leases}`);

    // The view's calls from both instances arrive here; count what reaches it.
    let processed = 0;
    const processedBy = new Map<string, number>();
    const onWrite = (host: string) => (write: { changes: readonly unknown[] }): void => {
      processed += write.changes.length;
      processedBy.set(host, (processedBy.get(host) ?? 0) + write.changes.length);
    };

    // Takeover bookkeeping: the ranges of the killed instance and who took them.
    let victim: { name: string; ranges: Set<string>; killedAt: number } | undefined;
    let survivor: string = HOSTS[1];
    const takenOver = new Set<string>();

    const stolenFrom = new Map<string, string>();
    const onMessage = (from: Instance, message: WorkerMessage): void => {
      if (message.kind === 'ready') from.ready = true;
      else if (message.kind === 'problem') say(`[${from.name}] ${message.text}`);
      else if (message.kind === 'lease' && message.type === 'leaseTakenOver') {
        // Rebalancing: a leaseAcquired for the same range follows; say it there.
        stolenFrom.set(`${from.name}/${message.lease}`, message.detail);
      } else if (message.kind === 'lease') {
        const took = message.type === 'leaseAcquired';
        const stolen = stolenFrom.get(`${from.name}/${message.lease}`);
        stolenFrom.delete(`${from.name}/${message.lease}`);
        if (stolen) message = { ...message, detail: `${message.detail}, ${stolen} to balance the load` };
        if (took && victim && victim.ranges.has(message.lease) && from.name !== victim.name) {
          takenOver.add(message.lease);
          say(`>>> ${from.name} took over range ${message.lease} from ${victim.name} (${message.detail}, ${seconds(Date.now() - victim.killedAt)} after the kill)`);
          if (takenOver.size === victim.ranges.size) say(`>>> takeover complete: ${from.name} now reads every range ${victim.name} had`);
        } else if (took) {
          say(`[${from.name}] acquired range ${message.lease} (${message.detail})`);
        } else if (message.type === 'leaseReleased' || message.type === 'leaseLost') {
          say(`[${from.name}] ${message.type === 'leaseLost' ? 'lost' : 'released'} range ${message.lease}${message.detail ? ` (${message.detail})` : ''}`);
        }
      }
    };

    for (const name of HOSTS) {
      const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
        cwd: REPO_ROOT,
        env: { ...process.env, COSMOS_ENDPOINT: emulator.endpoint, COSMOS_KEY: emulator.key, DEMO_HOST: name, DEMO_MODE: mode },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const instance: Instance = { name, child, exited, ready: false, killed: false };
      instances.set(name, instance);
      for (const stream of [child.stdout, child.stderr]) {
        if (stream) createInterface({ input: stream }).on('line', (line) => say(`[${name}] ${line}`));
      }
      child.on('message', (message: WorkerMessage) => onMessage(instance, message));
      serveViewStore(child, DEMO.viewChannel, view, { onWrite: onWrite(name) });
      say(`started ${name} (pid ${child.pid})`);
    }

    say(`starting PGlite for the view ${DEMO.viewTable}`);
    await Promise.race([viewReady, aborted]);
    if (signal?.aborted) return await interruptedEarly();
    say('PGlite ready');

    // Live progress: rates from the writer and the view, lag and ownership from the lease container.
    const lagSource = new CosmosSource(orders, { mode }); // the mode the leases' positions were read in
    const leaseStore = new CosmosLeaseStore({ container: leases });
    let lags: LeaseLag[] = [];
    const writer = new OrderWriter(orders, { deletes: mode === 'allVersionsAndDeletes' });
    let last = { at: Date.now(), written: 0, processed: 0, by: new Map<string, number>() };
    let measuring = false;
    const measure = async (): Promise<void> => {
      lags = await estimateLag({ source: lagSource, leases: leaseStore, leasePrefix: DEMO.leasePrefix });
    };
    const progress = async (): Promise<void> => {
      if (measuring) return;
      measuring = true;
      const lagText = await measure().then(
        () => String(lags.reduce((sum, l) => sum + l.estimatedLag, 0)),
        () => '?',
      );
      measuring = false;
      if (progressTimer === undefined) return; // stopped while measuring
      const now = Date.now();
      const per = (n: number): number => Math.round((n * 1000) / Math.max(1, now - last.at));
      const owners = new Map<string, string[]>();
      for (const l of lags) {
        const owner = l.owner === null ? 'free' : instances.get(l.owner)?.killed ? `${l.owner}(dead)` : l.owner;
        owners.set(owner, [...(owners.get(owner) ?? []), l.leaseToken]);
      }
      // Per host: the ranges it holds in the lease container and the changes/s it wrote into the view.
      const rateOf = (host: string): string =>
        instances.has(host) ? ` ${per((processedBy.get(host) ?? 0) - (last.by.get(host) ?? 0))}/s` : '';
      const ownership = [...owners]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([o, ids]) => `${o}[${rangeList(ids)}]${rateOf(o)}`)
        .join('  ');
      say(
        `written ${writer.written} (${per(writer.written - last.written)}/s)  processed ${processed} (${per(processed - last.processed)}/s)  ` +
          `lag ${lagText}  ranges ${ownership || '(no leases yet)'}`,
      );
      last = { at: now, written: writer.written, processed, by: new Map(processedBy) };
    };
    progressTimer = setInterval(() => void progress(), 1_000);

    if (mode === 'allVersionsAndDeletes') {
      // The feed starts from "now" here: a write before a lease's first checkpoint could be skipped by a host
      // that takes the lease over, so let every lease record where "now" is first.
      say(`${mode} feed: waiting until every range has its first checkpoint (it starts from now)`);
      const deadline = Date.now() + 60_000;
      const started = (): boolean => lags.length >= ranges && lags.every((l) => l.lastCheckpoint !== null);
      while (!started() && Date.now() < deadline && (await wait(250)));
      if (signal?.aborted) return await interruptedEarly();
      if (!started()) say('WARNING: not every range has a checkpoint yet; writes made now may be missed after the kill');
    }
    say(`writing ~${rate} order changes/s for ${seconds(durationMs)}; one instance gets SIGKILL halfway`);
    // A steady stream of writes, in ticks of 100 ms.
    last = { at: Date.now(), written: 0, processed: 0, by: new Map() };
    let writing = Promise.resolve();
    const perTick = Math.max(1, Math.round(rate / 10));
    writerTimer = setInterval(() => {
      writing = writing.then(() => writer.tick(perTick));
    }, 100);

    // Halfway: kill the instance that owns ranges (SIGKILL: no release, no last checkpoint).
    const writeStart = Date.now();
    let writeEnd = writeStart + durationMs;
    const killAt = writeStart + durationMs / 2;
    let carryOn = await wait(Math.max(0, killAt - Date.now()));
    if (carryOn) {
      // Every range must be owned, and by both hosts when there are ranges enough; on a slow machine that may
      // take past halfway.
      const owned = (name: string): Set<string> => new Set(lags.filter((l) => l.owner === name).map((l) => l.leaseToken));
      const settled = (): boolean =>
        lags.length > 0 && lags.every((l) => l.owner !== null) && (ranges < HOSTS.length || HOSTS.every((h) => owned(h).size > 0));
      while (carryOn && !settled() && Date.now() < killAt + 20_000) carryOn = await wait(250);
      // Kill the host holding the most ranges (host-a on a tie); the other one has to take them over.
      const name = owned(HOSTS[1]).size > owned(HOSTS[0]).size ? HOSTS[1] : HOSTS[0];
      survivor = HOSTS.find((h) => h !== name)!;
      const target = instances.get(name)!;
      victim = { name, ranges: owned(name), killedAt: Date.now() };
      // When the instances were slow to start, keep writing for a while after the kill all the same.
      writeEnd = Math.max(writeEnd, victim.killedAt + durationMs / 4);
      target.killed = true;
      target.child.kill('SIGKILL');
      say(
        `>>> SIGKILL ${name} (pid ${target.child.pid}), owner of range${victim.ranges.size === 1 ? '' : 's'} ${rangeList(victim.ranges) || '(none)'}: ` +
          `its leases expire after ${DEMO_LEASE_TIMINGS.leaseExpirationMs} ms and ${survivor} takes them over from their last checkpoints`,
      );
    }
    if (carryOn) carryOn = await wait(Math.max(0, writeEnd - Date.now()));

    clearInterval(writerTimer);
    await writing;
    say(
      `${carryOn ? 'writer stopped' : 'interrupted: writer stopped'}: ${writer.written} writes (${writer.stats.creates} creates, ` +
        `${writer.stats.updates} updates, ${writer.stats.cancels} cancellations, ${writer.stats.deletes} deletes` +
        `${writer.stats.failures ? `, ${writer.stats.failures} failed` : ''})`,
    );

    let comparison: ViewComparison | undefined;
    let caughtUp = false;
    if (carryOn) {
      say('waiting for the view and the checkpoints to catch up');
      const deadline = Date.now() + 60_000;
      while (carryOn && Date.now() < deadline) {
        comparison = compareView(await view.rows(), await readAllOrders(orders));
        caughtUp = comparison.equal && (await measure().then(() => lags.length > 0 && lags.every((l) => l.estimatedLag === 0), () => false));
        if (caughtUp) break;
        carryOn = await wait(500);
      }
    }
    if (carryOn) await progress();
    clearInterval(progressTimer);
    progressTimer = undefined;

    say('stopping the instances (each releases its leases after its last checkpoint)');
    await stopInstances(instances);

    if (!carryOn) {
      say('interrupted: stopped cleanly, no check made');
      return { pass: false, interrupted: true, written: writer.written, processed, takenOver: [...takenOver] };
    }
    // The check, after everything stopped: the view against the container itself.
    comparison = compareView(await view.rows(), await readAllOrders(orders));
    await measure().catch(() => undefined);
    const atEnd = lags.length > 0 && lags.every((l) => l.estimatedLag === 0);
    const pass = comparison.equal && atEnd;
    const details =
      `view ${DEMO.viewTable} has ${comparison.rows} rows for ${comparison.orders - comparison.cancelled} open orders ` +
      `(${comparison.orders} orders in the source, ${comparison.cancelled} of them cancelled; ${writer.stats.deletes} deleted)` +
      (comparison.equal ? ', every row equal to its order' : `; missing ${comparison.missing.length}, extra ${comparison.extra.length}, stale ${comparison.stale.length} (e.g. ${[...comparison.missing, ...comparison.extra, ...comparison.stale].slice(0, 5).join(', ')})`) +
      `; checkpoints ${atEnd ? 'at the end of every range' : `behind: ${lags.map((l) => `${l.leaseToken}:${l.estimatedLag}`).join(' ')}`}` +
      `; ${processed} changes reached the view for ${writer.written} writes (` +
      (mode === 'latestVersion'
        ? 'the latest-version feed folds quick updates of an order into one, and the crash may replay some); '
        : `${Math.max(0, processed - writer.written)} replayed after the crash, from the last checkpoints); `) +
      (victim ? `${takenOver.size}/${victim.ranges.size} ranges of ${victim.name} taken over by ${survivor}` : 'no instance killed');
    say(`${pass ? 'PASS' : 'FAIL'}: ${details}`);
    return { pass, interrupted: false, written: writer.written, processed, takenOver: [...takenOver], comparison };
  } finally {
    clearInterval(writerTimer);
    clearInterval(progressTimer);
    for (const instance of instances.values()) if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGKILL');
    await view.close();
    client.dispose();
    await emulator.stop();
  }
}

/** Asks every live instance to stop, and kills the ones that do not exit within 20 s. */
async function stopInstances(instances: ReadonlyMap<string, Instance>): Promise<void> {
  await Promise.all(
    [...instances.values()].map(async (instance) => {
      if (instance.child.exitCode !== null || instance.child.signalCode !== null) return;
      if (instance.child.connected) instance.child.send('stop', () => undefined);
      const timeout = sleep(20_000).then(() => 'timeout' as const);
      if ((await Promise.race([instance.exited, timeout])) === 'timeout') instance.child.kill('SIGKILL');
      await instance.exited;
    }),
  );
}

/**
 * The command line: parses `--duration-ms`, `--ranges`, `--rate`, runs the demo, stops cleanly on Ctrl-C.
 *
 * @example
 * ```ts
 * process.exitCode = await main(['--duration-ms', '15000']);
 * ```
 * @returns the exit code: 0 on PASS, 1 on FAIL or error, 130 when interrupted.
 */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      'duration-ms': { type: 'string' },
      ranges: { type: 'string' },
      rate: { type: 'string' },
      mode: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log('usage: npm run demo -- [--duration-ms 30000] [--ranges 4] [--rate 200] [--mode allVersionsAndDeletes|latestVersion]');
    return 0;
  }
  const options = {
    durationMs: positiveNumber('duration-ms', values['duration-ms'], 30_000),
    ranges: positiveNumber('ranges', values.ranges, 4, true),
    rate: positiveNumber('rate', values.rate, 200),
    mode: feedMode(values.mode),
  };
  const controller = new AbortController();
  let interrupts = 0;
  const onSigint = (): void => {
    if (++interrupts > 1) process.exit(130);
    console.log('\nCtrl-C: stopping cleanly (press again to quit at once)');
    controller.abort();
  };
  process.on('SIGINT', onSigint);
  try {
    const result = await runDemo({ ...options, signal: controller.signal });
    return result.interrupted ? 130 : result.pass ? 0 : 1;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
