import { CosmosClient } from '@azure/cosmos';
import type { SchedulerLike } from 'rxjs';
import type { FeedMode, Partition } from '../../src/core/Partition.js';
import { CosmosEmulator, effectivePartitionKey, type EmulatorRange, type FaultAction, type RequestInfo } from '../../src/emulator/index.js';
import type { ContainerState, Store } from '../../src/emulator/store/Store.js';
import { CorruptLeaseError } from '../../src/errors/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import { fromDocument } from '../../src/leases/protocol/cosmosDocuments.js';
import type { Lease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import { limitIteratorCache } from '../../src/sources/cosmos/iteratorCache.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import type { ReadRequest, Source } from '../../src/sources/Source.js';
import type { FaultPlan, FaultRule, VirtualClock } from '../support/faults/index.js';
import type { Sim } from './context.js';
import type { FaultPlans } from './faultPlans.js';
import type { Doc } from './world.js';

/** Database and containers of the simulated account. */
const DATABASE = 'sim';
const ITEMS = 'items';
const LEASES = 'leases';

/**
 * The SDK's request timeout in the simulation (virtual ms): long against the sim's 1 s lease expiration, as
 * the SDK's 60 s default is against the default 60 s; a hung request ends here.
 */
export const SDK_REQUEST_TIMEOUT_MS = 2_000;

/**
 * Faults only the HTTP path has, on top of the seams' plans (per request): a 410 that is not a split
 * (1008: the range is migrating; the SDK returns it instead of throwing), a dropped connection (the SDK
 * retries reads after 1 s), and 449 RetryWith on lease writes (the service's answer to concurrent updates of
 * one document).
 */
type SdkFaultKind = 'migrating' | 'reset' | 'retryWith';

/** A write the writers made: its LSN and the range it landed in. */
export interface WriteResult {
  readonly lsn: number;
  readonly partition: string;
}

/**
 * Routes the process's timers (`setTimeout`, `setInterval` and their `clear…`) and `Date.now` to the
 * simulation's clock for one run: the SDK's own waits (retry-after, the 1 s connection-retry pause, request
 * timeouts, the endpoint refresher) then run on virtual time, in the order the clock gives them. `setImmediate`
 * and `queueMicrotask` stay real (the clock lets promises settle with them). Returns the restore function.
 */
export function installVirtualTimers(clock: VirtualClock): () => void {
  const saved = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
    setInterval: globalThis.setInterval,
    clearInterval: globalThis.clearInterval,
    now: Date.now,
  };
  const handle = (cancel: () => void): NodeJS.Timeout => {
    const timer = {
      cancel,
      ref: () => timer,
      unref: () => timer,
      hasRef: () => false,
      refresh: () => timer,
      close: () => {
        cancel();
        return timer;
      },
      [Symbol.toPrimitive]: () => 0,
      [Symbol.dispose]: cancel,
    };
    return timer as unknown as NodeJS.Timeout;
  };
  const clear = (timer: unknown): void => {
    (timer as { cancel?: () => void } | undefined)?.cancel?.();
  };
  const g = globalThis as unknown as Record<string, unknown>;
  g['setTimeout'] = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const task = clock.schedule(() => fn(...args), ms ?? 0);
    return handle(() => task.unsubscribe());
  };
  g['setInterval'] = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const period = Math.max(1, ms ?? 0);
    const task = clock.schedule(function (this: { schedule(state?: unknown, delay?: number): void }) {
      this.schedule(undefined, period);
      fn(...args);
    }, period);
    return handle(() => task.unsubscribe());
  };
  g['clearTimeout'] = clear;
  g['clearInterval'] = clear;
  Date.now = () => clock.now();
  return () => {
    Object.assign(globalThis, { setTimeout: saved.setTimeout, clearTimeout: saved.clearTimeout, setInterval: saved.setInterval, clearInterval: saved.clearInterval });
    Date.now = saved.now;
  };
}

/** What one simulated process uses in the SDK mode: its own client, source and lease store. */
export interface SdkConnection {
  readonly source: Source<Doc>;
  readonly leases: LeaseStore;
}

/**
 * The SDK mode of the simulation (`--source sdk`): the data lives in an rxfeed emulator in this process,
 * without a socket; each host reads it with `CosmosSource` and keeps its leases with `CosmosLeaseStore`,
 * through a `CosmosClient` of its own (its own routing-map cache, session tokens and retry policies) whose
 * HTTP client is `emulator.httpClient()`. The seams' fault plans strike at the emulator's fault layer, per
 * request, so the SDK's retries, routing-map refreshes and continuations meet them; the process's timers run
 * on the simulation's clock ({@link installVirtualTimers}).
 */
export class SdkWorld {
  readonly emulator: CosmosEmulator;
  readonly #store: Store;
  readonly #sim: Sim;
  #bulkRandom: (() => number) | undefined;
  readonly #clients: CosmosClient[] = [];
  readonly #restoreTimers: () => void;
  #items: ContainerState | undefined;
  #leases: ContainerState | undefined;
  #partitions = 1;
  mode: FeedMode = 'latestVersion';

  private constructor(sim: Sim, emulator: CosmosEmulator, restoreTimers: () => void) {
    this.#sim = sim;
    this.emulator = emulator;
    this.#store = emulator.internalStore;
    this.#restoreTimers = restoreTimers;
  }

  /** Starts the emulator (no socket) and routes the process's timers to the simulation's clock. */
  static async start(sim: Sim): Promise<SdkWorld> {
    const restore = installVirtualTimers(sim.clock);
    const ref: { world?: SdkWorld } = {};
    const emulator = await CosmosEmulator.start({
      listen: false,
      now: () => sim.clock.now(),
      randomSeed: sim.config.seed,
      requestLogSize: 1,
      sqlEngine: 'builtin',
      initialRangeCount: (_db, container) => (container === ITEMS ? ref.world!.#partitions : 1),
    });
    ref.world = new SdkWorld(sim, emulator, restore);
    return ref.world;
  }

  /** Creates the monitored container (`partitions` ranges) and the lease container, both partitioned on `/id`. */
  setup(partitions: number, mode: FeedMode): void {
    this.#partitions = partitions;
    this.mode = mode;
    this.#store.createDatabase({ id: DATABASE });
    this.#items = this.#store.createContainer(DATABASE, { id: ITEMS, partitionKey: { paths: ['/id'], kind: 'Hash', version: 2 } });
    this.#leases = this.#store.createContainer(DATABASE, { id: LEASES, partitionKey: { paths: ['/id'], kind: 'Hash', version: 2 } });
  }

  /** Writes a document version straight into the store (the writers are not under test). */
  upsert(doc: Doc): WriteResult {
    const c = this.#items!;
    this.#store.createDocument(c, { ...doc }, [doc.id], true);
    return this.#written(c, doc.id);
  }

  /** Deletes a document straight in the store. */
  delete(id: string): WriteResult {
    const c = this.#items!;
    this.#store.deleteDocument(c, id, [id]);
    return this.#written(c, id);
  }

  #written(c: ContainerState, id: string): WriteResult {
    const range = this.#store.rangeOf(c, effectivePartitionKey([id], c.partitionKey));
    return { lsn: range.lsn, partition: range.id };
  }

  /** Splits a live range, as the service does: the parent answers 410/1002 from now on. Returns the children. */
  split(partitionId: string): readonly Partition[] {
    return this.emulator.split(DATABASE, ITEMS, partitionId).map(asPartition);
  }

  /** The live ranges of the monitored container, with their key ranges (for the world's lineage). */
  partitions(): readonly Partition[] {
    return this.emulator.partitionKeyRanges(DATABASE, ITEMS).map(asPartition);
  }

  /** The stored leases, read synchronously from the emulator's store (markers and unreadable documents left out). */
  /** The ids of every document in the lease container, markers too (read synchronously). */
  leaseDocumentIds(): string[] {
    return [...this.#store.documents(this.#leases!)].map((doc) => String((doc as { id: unknown }).id));
  }

  leaseSnapshot(): Lease[] {
    const leases: Lease[] = [];
    for (const doc of this.#store.documents(this.#leases!)) {
      const lease = fromDocument(doc);
      if (!(lease instanceof CorruptLeaseError) && lease.leaseToken !== '') leases.push(lease);
    }
    return leases;
  }

  /**
   * A new process: a client of its own, with the SDK's default retry policies and a 2 s request timeout. Half the
   * processes keep at most 1–3 SDK iterators (see {@link iteratorBound}), and every process's reads are checked
   * (`read-went-back`, see {@link checkReads}).
   */
  connect(scheduler: SchedulerLike, name: string): SdkConnection {
    const client = new CosmosClient({
      endpoint: this.emulator.endpoint,
      key: this.emulator.key,
      httpClient: this.emulator.httpClient(),
      connectionPolicy: { requestTimeout: SDK_REQUEST_TIMEOUT_MS },
    });
    this.#clients.push(client);
    const database = client.database(DATABASE);
    const source = new CosmosSource<Doc>(database.container(ITEMS), { mode: this.mode });
    const evicted = new Set<string>();
    const bound = this.#iteratorBound(name);
    if (bound !== undefined) {
      limitIteratorCache(source, bound, (partitionId) => {
        this.#sim.tally('sdk.iteratorEvicted');
        evicted.add(partitionId);
      });
    }
    return {
      source: checkReads(source, this.#sim, name, evicted),
      leases: new CosmosLeaseStore({ container: database.container(LEASES), scheduler }),
    };
  }

  /**
   * The iterator bound of process `name`: in half the processes (a PRNG of its own per name,
   * `randomFor('iterators:<name>')`, so the rest of a seed draws as before) 1–3 iterators, fewer than the
   * partitions a host reads once it holds two or more leases (1–4 partitions, and their split children), so
   * its reads evict each other's iterators and rebuild them from their positions (tallied
   * `sdk.iteratorsLimited` per process, `sdk.iteratorEvicted` per eviction, `sdk.iteratorRebuilt` per read of
   * an evicted partition that answered); the others keep `CosmosSource`'s own bound (at least 1,024), which no
   * run reaches. `--iterators N|default` sets it for every process instead.
   */
  #iteratorBound(name: string): number | undefined {
    const given = this.#sim.config.iterators;
    if (given === 'default') return undefined;
    const random = this.#sim.randomFor(`iterators:${name}`);
    if (given === undefined && random() >= 0.5) return undefined;
    this.#sim.tally('sdk.iteratorsLimited');
    return given ?? 1 + Math.floor(random() * 3);
  }

  /**
   * Makes the emulator's fault layer strike as the run's plans say: change feed reads and range listings of
   * the monitored container as the source plan's `read` and `listPartitions`, requests on the lease
   * container as the lease plan's operations (a bulk request as a `replace`), plus the faults only the HTTP
   * path has ({@link SdkFaultKind}). Each request draws from the run's fault env, so storms, quiescence and
   * the tally work as at the seams.
   */
  injectFaults(plans: FaultPlans): void {
    const { faults } = this.#sim;
    const extra: FaultPlan<string, SdkFaultKind> = {
      read: faults.has('source')
        ? [
            { kind: 'migrating', probability: 0.003 },
            { kind: 'reset', probability: 0.005 },
          ]
        : [],
      write: faults.has('lease') ? [{ kind: 'retryWith', probability: 0.005 }] : [],
    };
    const env = this.#sim.env;
    this.emulator.injectFault({
      action: (r: RequestInfo): FaultAction | undefined => {
        if (r.containerId === ITEMS) {
          if (r.kind === 'changeFeed') return sourceAction(env.pick('source', plans.source, 'read', r.rangeId)) ?? sdkAction(env.pick('sdk', extra, 'read', r.rangeId));
          if (r.kind === 'pkranges') return sourceAction(env.pick('source', plans.source, 'listPartitions'));
          return undefined;
        }
        if (r.containerId !== LEASES) return undefined;
        const op = LEASE_OPS[r.kind];
        if (op === undefined) return undefined;
        const rule = env.pick('lease', plans.lease, op, r.path.split('/')[6]);
        if (rule) return leaseAction(rule, r.kind === 'batch');
        if (r.kind === 'batch' && faults.has('lease')) {
          const partly = this.#bulkLandingPartly();
          if (partly) return partly;
        }
        return op === 'list' || op === 'read' ? undefined : sdkAction(env.pick('sdk', extra, 'write'));
      },
    });
  }

  /**
   * A bulk request of lease writes that lands partly (15% of them): each of its operations is throttled (429
   * with a retry-after), times out (408) or is refused for now (503) with a chance of 1 in 3, and does not
   * land; the others do. Drawn from a PRNG of its own (`randomFor('bulk')`), so older seeds replay as before.
   */
  #bulkLandingPartly(): FaultAction | undefined {
    const sim = this.#sim;
    const random = (this.#bulkRandom ??= sim.randomFor('bulk'));
    if (!sim.env.enabled || random() >= 0.15) return undefined;
    sim.tally('sdk.bulkPartly');
    return {
      operations: () => {
        if (random() >= 1 / 3) return undefined;
        sim.tally('sdk.bulkOperationFailed');
        const kind = random();
        return kind < 0.5 ? { status: 429, substatus: 3200, retryAfterMs: 50 + Math.floor(random() * 450) } : kind < 0.75 ? { status: 408 } : { status: 503 };
      },
    };
  }

  /** Releases the clients and the emulator, and gives the process its real timers back. */
  async close(): Promise<void> {
    for (const client of this.#clients) client.dispose();
    try {
      await this.emulator.stop();
    } finally {
      this.#restoreTimers();
    }
  }
}

/**
 * `read-went-back`: a page read from a position (an etag `"N"`) holds a change at or below LSN N, so the
 * iterator that read it did not continue where the position stood (a rebuilt iterator, after an eviction or a
 * failed read, from the wrong place; `CosmosSource` itself refuses an answered position below N). Losses show
 * as `change-never-delivered`. A read of a partition whose iterator was evicted since its last read is tallied
 * `sdk.iteratorRebuilt` once it answers.
 */
function checkReads(source: CosmosSource<Doc>, sim: Sim, host: string, evicted: Set<string>): Source<Doc> {
  const read = async (request: ReadRequest) => {
    const { partition, from } = request;
    const rebuilt = evicted.delete(partition.id);
    const page = await source.read(request);
    if (rebuilt) sim.tally('sdk.iteratorRebuilt');
    const after = typeof from === 'object' && !(from instanceof Date) ? lsnOfEtag(from.position) : undefined;
    const back = after === undefined ? undefined : page.changes.find((c) => c.lsn <= after);
    if (back) {
      sim.violations.report(
        'read-went-back',
        `${host} read ${back.id}@${back.lsn} of ${partition.id} from position ${(from as { position: string }).position}${rebuilt ? ' (its iterator was evicted)' : ''}`,
        `back:${host}:${partition.id}:${back.id}@${back.lsn}`,
      );
    }
    return page;
  };
  return {
    description: source.description,
    destination: source.destination,
    mode: source.mode,
    concurrentReads: source.concurrentReads,
    checkStart: (from) => source.checkStart(from),
    positionAt: (partition, at, signal) => source.positionAt(partition, at, signal),
    currentTime: (signal) => source.currentTime(signal),
    checkReachable: (signal) => source.checkReachable(signal),
    listPartitions: (signal) => source.listPartitions(signal),
    read,
  };
}

/** The LSN of an etag position (`"42"`), or `undefined` for another shape. */
function lsnOfEtag(position: string): number | undefined {
  const match = /^"(\d+)"$/.exec(position);
  return match ? Number(match[1]) : undefined;
}

/** An emulator range as the partition the hosts see (the same id and key range `CosmosSource` lists). */
function asPartition(r: EmulatorRange): Partition {
  return { id: r.id, range: { minInclusive: r.minInclusive, maxExclusive: r.maxExclusive } };
}

/** Lease-store operations by the request kinds that carry them. */
const LEASE_OPS: Partial<Record<RequestInfo['kind'], string>> = {
  query: 'list',
  read: 'read',
  create: 'createIfAbsent',
  replace: 'replace',
  batch: 'replace',
  delete: 'delete',
};

function sourceAction(rule: FaultRule | undefined): FaultAction | undefined {
  switch (rule?.kind) {
    case undefined:
      return undefined;
    case 'throttle':
      return { status: 429, substatus: 3200, retryAfterMs: rule.retryAfterMs ?? 500 };
    case 'slow':
      return { delayMs: rule.ms ?? 1_000 };
    case 'hang':
      return { hang: true };
    default:
      return { status: 503 };
  }
}

function leaseAction(rule: FaultRule, bulk: boolean): FaultAction | undefined {
  switch (rule.kind) {
    case 'conflict':
      // A bulk request's conditions are answered per operation; the request as a whole is not refused with 412.
      return bulk ? undefined : { status: 412, message: 'injected: the If-Match etag does not match' };
    case 'timeout':
    case 'hang':
      return { hang: true };
    case 'slow':
      return { delayMs: rule.ms ?? 1_000 };
    case 'lostReply':
      return { lostReply: true };
    default:
      return { status: 503 };
  }
}

function sdkAction(rule: FaultRule | undefined): FaultAction | undefined {
  switch (rule?.kind) {
    case 'migrating':
      return { status: 410, substatus: 1008 };
    case 'reset':
      return { reset: true };
    case 'retryWith':
      return { status: 449, substatus: 0 };
    default:
      return undefined;
  }
}
