import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidOptionsError } from '../errors/InvalidOptionsError.js';
import { logger } from '../internal/log.js';
import { adminRequest } from './admin.js';
import { FaultSet, seededRandom, type FaultHandle, type FaultRule } from './faults.js';
import { crossPartitionQueries, positiveInt, validKey, type CosmosEmulatorOptions } from './options.js';
import { QueryEngine } from './QueryEngine.js';
import { RequestHandler, type LoggedRequest, type ServerContext } from './server.js';
import { inProcessClient, type EmulatorHttpClient } from './inProcess.js';
import { Store, type Doc, type RangeState } from './store/Store.js';
import { partitionsForThroughput } from './store/ranges.js';

export type { CosmosEmulatorOptions } from './options.js';

/** A partition key range as the emulator reports it. */
export interface EmulatorRange {
  /** The range's id (`x-ms-documentdb-partitionkeyrangeid`). */
  id: string;
  /** The lowest effective partition key of the range (hex). */
  minInclusive: string;
  /** The effective partition key just past the range (hex; `'FF'` is the end). */
  maxExclusive: string;
  /** The range's current LSN: its last write, or its parent's when it has none of its own yet. */
  lsn: number;
  /** Ids of the ranges it was split or merged from, oldest first. */
  parents: string[];
}

/** A snapshot of the emulator's state, for inspection and debugging. */
export interface EmulatorDump {
  /** Each database with its containers: partition key, ranges, documents and the length of its change log. */
  databases: {
    id: string;
    containers: { id: string; partitionKey: unknown; ranges: EmulatorRange[]; documents: Doc[]; logLength: number }[];
  }[];
}

/**
 * The master key of the public Azure Cosmos DB emulator, and this emulator's default: requests must be
 * signed with it unless `masterKey` or `checkAuth: false` says otherwise. `rxfeed emulator` prints it.
 *
 * @example
 * ```ts
 * const client = new CosmosClient({ endpoint: 'http://127.0.0.1:8081/', key: EMULATOR_KEY });
 * ```
 */
export const EMULATOR_KEY = 'C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==';

function rangeInfo(r: RangeState): EmulatorRange {
  return { id: r.id, minInclusive: r.min, maxExclusive: r.max, lsn: r.lsn, parents: [...r.parents] };
}

/**
 * A local HTTP server that speaks enough of the Cosmos DB REST protocol for the unmodified `@azure/cosmos`
 * client: databases, containers, documents with optimistic concurrency, SQL queries, partition key ranges,
 * the change feed in LatestVersion and AllVersionsAndDeletes modes, splits, merges and fault injection.
 *
 * In short: point a `CosmosClient` at `emulator.endpoint` and test change-feed code without Azure.
 *
 * @example
 * ```ts
 * import { CosmosEmulator } from 'rxfeed/emulator';
 * const emulator = await CosmosEmulator.start({ initialRangeCount: 4 });
 * const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key });
 * // … emulator.split('db', 'items', '0'); emulator.injectFault(faults.throttle()); …
 * await emulator.stop();
 * ```
 */
export class CosmosEmulator {
  /** The key to hand to the client: `masterKey` when set, else {@link EMULATOR_KEY}. */
  readonly key: string;

  readonly #log = logger('emulator');
  readonly #requestLog: LoggedRequest[] = [];
  readonly #handler: RequestHandler;
  readonly #server: Server;
  readonly #store: Store;
  readonly #faultSet: FaultSet;
  readonly #requestLogSize: number;
  /** Releases of in-process requests a `hang` fault holds. */
  readonly #hanging = new Set<() => void>();
  #baseUrl = '';

  private constructor(
    store: Store,
    faultSet: FaultSet,
    requestLogSize: number,
    settings: Pick<ServerContext, 'changeFeedPageSize' | 'queryPageSize' | 'strictAllVersionsStart' | 'crossPartitionQueries' | 'queries'> & {
      masterKey: string;
      checkAuth: boolean;
    },
  ) {
    this.#store = store;
    this.#faultSet = faultSet;
    this.#requestLogSize = requestLogSize;
    this.key = settings.masterKey;
    const { checkAuth, masterKey, ...serving } = settings;
    this.#handler = new RequestHandler({
      ...serving,
      masterKey: checkAuth ? masterKey : undefined,
      store,
      faults: faultSet,
      record: (entry) => this.#record(entry),
      admin: (method, segments, body) => adminRequest(this, method, segments, body),
      log: (message) => this.#log(message),
    });
    this.#server = createServer((req, res) => {
      // handle() answers its own errors; this only keeps a bug in it from taking the host process down.
      this.#handler.handle(req, res).catch((err: unknown) => {
        this.#log(`request failed: ${String(err)}`);
        res.destroy();
      });
    });
    // The SDK keeps connections alive and so does the service, for minutes. Node's 5 s default equals the
    // default poll interval: the server closed sockets just as a poll reused them (ECONNRESET, then the SDK's
    // 1 s retry). stop() closes every connection, so none lingers after a test.
    this.#server.keepAliveTimeout = 120_000;
    this.#server.headersTimeout = 130_000;
  }

  /** Base URL the client should use, e.g. `http://127.0.0.1:8081/`. */
  get endpoint(): string {
    return this.#baseUrl;
  }

  /**
   * Starts an emulator and resolves once it listens.
   *
   * @example
   * ```ts
   * const emulator = await CosmosEmulator.start({ port: 8081 });
   * ```
   * @param options - see {@link CosmosEmulatorOptions}; invalid values throw an `InvalidOptionsError`.
   * @returns the running emulator.
   */
  static async start(options: CosmosEmulatorOptions = {}): Promise<CosmosEmulator> {
    const port = options.port ?? 0;
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidOptionsError('port', `must be 0–65535, got ${port}`);
    const rangeCount = options.initialRangeCount ?? ((_db: string, _coll: string, throughput: number | undefined) => partitionsForThroughput(throughput));
    if (typeof rangeCount === 'number') positiveInt('initialRangeCount', rangeCount, 1);
    const engine = options.sqlEngine ?? 'auto';
    if (engine !== 'auto' && engine !== 'builtin') throw new InvalidOptionsError('sqlEngine', `must be 'auto' or 'builtin', got ${String(engine)}`);
    const version = options.defaultPartitionKeyVersion ?? 2;
    if (version !== 1 && version !== 2) throw new InvalidOptionsError('defaultPartitionKeyVersion', `must be 1 or 2, got ${String(version)}`);
    const store = new Store({
      now: options.now ?? Date.now,
      defaultPartitionKeyVersion: version,
      initialRangeCount: (db, coll, throughput) =>
        positiveInt('initialRangeCount', typeof rangeCount === 'number' ? rangeCount : rangeCount(db, coll, throughput), 1),
    });
    const emulator = new CosmosEmulator(
      store,
      new FaultSet(seededRandom(options.randomSeed ?? 1)),
      positiveInt('requestLogSize', options.requestLogSize, 1000),
      {
        changeFeedPageSize: positiveInt('changeFeedPageSize', options.changeFeedPageSize, 100),
        queryPageSize: positiveInt('queryPageSize', options.queryPageSize, 100),
        strictAllVersionsStart: options.strictAllVersionsStart ?? true,
        crossPartitionQueries: crossPartitionQueries(options.crossPartitionQueries),
        masterKey: validKey(options.masterKey) ?? EMULATOR_KEY,
        checkAuth: options.checkAuth ?? true,
        queries: new QueryEngine({ engine, warn: options.onWarning ?? ((message) => console.warn(message)) }),
      },
    );
    if (options.listen ?? true) await emulator.#listen(port, options.host ?? '127.0.0.1');
    else emulator.#baseUrl = 'http://127.0.0.1:0/';
    return emulator;
  }

  async #listen(port: number, host: string): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address() as AddressInfo;
    const shownHost = address.address.includes(':') ? `[${address.address}]` : address.address;
    this.#baseUrl = `http://${shownHost}:${address.port}/`;
    this.#log(`listening on ${this.#baseUrl}`);
  }

  /**
   * Stops listening, drops open connections (including ones a `hang` fault holds) and resolves when closed.
   *
   * @example
   * ```ts
   * afterAll(() => emulator.stop());
   * ```
   */
  async stop(): Promise<void> {
    for (const res of this.#handler.hanging) res.destroy();
    this.#handler.hanging.clear();
    for (const release of [...this.#hanging]) release();
    if (this.#server.listening) {
      await new Promise<void>((resolve) => {
        this.#server.close(() => resolve());
        this.#server.closeAllConnections();
      });
    }
    this.#log('stopped');
  }

  /**
   * An HTTP client for `CosmosClient`'s `httpClient` option that hands every request to this emulator in
   * this process, without a socket: the same protocol, faults and request log, a fraction of the cost.
   * Works whether or not the emulator listens (see the `listen` option). Requests a `hang` fault holds
   * answer when the SDK's request timeout aborts them; `reset` and `lostReply` faults fail them with
   * `ECONNRESET`, as a dropped connection does.
   *
   * @example
   * ```ts
   * const emulator = await CosmosEmulator.start({ listen: false });
   * const client = new CosmosClient({ endpoint: emulator.endpoint, key: emulator.key, httpClient: emulator.httpClient() });
   * ```
   */
  httpClient(): EmulatorHttpClient {
    return inProcessClient(this.#handler, this.#hanging);
  }

  /**
   * The store behind the emulator, for tests that write without a client (the simulation's writers).
   *
   * @internal
   */
  get internalStore(): Store {
    return this.#store;
  }

  /**
   * The live partition key ranges of a container, in EPK order.
   *
   * @example
   * ```ts
   * const [first] = emulator.partitionKeyRanges('db', 'items');
   * ```
   */
  partitionKeyRanges(databaseId: string, containerId: string): EmulatorRange[] {
    return this.#store.container(databaseId, containerId).ranges.map(rangeInfo);
  }

  /**
   * Splits a live range in two, as the service does when a partition grows. In one step the parent leaves
   * `/pkranges` and starts answering 410/1002, and the children continue its LSN sequence, so clients that
   * follow the split lose and repeat nothing.
   *
   * @example
   * ```ts
   * const [left, right] = emulator.split('db', 'items', '0');
   * ```
   * @param options.boundary - EPK where the right child starts. Default: the median EPK of the range's
   *   documents, or the middle of its hash interval when it holds fewer than two keys.
   * @returns the two children.
   */
  split(databaseId: string, containerId: string, rangeId: string, options: { boundary?: string } = {}): [EmulatorRange, EmulatorRange] {
    const c = this.#store.container(databaseId, containerId);
    const [left, right] = this.#store.split(c, rangeId, options.boundary);
    this.#log(`split range ${rangeId} of ${databaseId}/${containerId} into ${left.id} [${left.min}, ${left.max}) and ${right.id} [${right.min}, ${right.max})`);
    return [rangeInfo(left), rangeInfo(right)];
  }

  /**
   * Merges two neighbouring ranges into one; both start answering 410/1002.
   *
   * @example
   * ```ts
   * const merged = emulator.merge('db', 'items', '1', '2');
   * ```
   * @returns the merged range.
   */
  merge(databaseId: string, containerId: string, leftRangeId: string, rightRangeId: string): EmulatorRange {
    const merged = this.#store.merge(this.#store.container(databaseId, containerId), leftRangeId, rightRangeId);
    this.#log(`merged ranges ${leftRangeId} and ${rightRangeId} of ${databaseId}/${containerId} into ${merged.id}`);
    return rangeInfo(merged);
  }

  /**
   * Registers a fault: matching requests get an error status, extra latency, no answer, or a reset socket.
   * Rules are checked in the order added; the first that hits decides.
   *
   * @example
   * ```ts
   * const fault = emulator.injectFault({ match: { kind: 'changeFeed' }, action: { status: 503 }, times: 2 });
   * ```
   * @returns a handle with the hit count and `remove()`.
   */
  injectFault(rule: FaultRule): FaultHandle {
    return this.#faultSet.add(rule);
  }

  /**
   * Removes every registered fault.
   *
   * @example
   * ```ts
   * afterEach(() => emulator.clearFaults());
   * ```
   */
  clearFaults(): void {
    this.#faultSet.clear();
  }

  /**
   * The most recent requests (up to `requestLogSize`), oldest first.
   *
   * @example
   * ```ts
   * const polls = emulator.requests().filter((r) => r.kind === 'changeFeed').length;
   * ```
   */
  requests(): readonly LoggedRequest[] {
    return [...this.#requestLog];
  }

  /**
   * Empties the request log.
   *
   * @example
   * ```ts
   * emulator.clearRequests(); await work(); expect(emulator.requests()).toHaveLength(3);
   * ```
   */
  clearRequests(): void {
    this.#requestLog.length = 0;
  }

  /**
   * Drops every database, fault and logged request; resource ids keep counting, so nothing is reused.
   *
   * @example
   * ```ts
   * beforeEach(() => emulator.reset());
   * ```
   */
  reset(): void {
    this.#store.reset();
    this.#faultSet.clear();
    this.clearRequests();
  }

  /**
   * A JSON-ready snapshot of every database, container, range and document.
   *
   * @example
   * ```ts
   * console.log(JSON.stringify(emulator.dump(), null, 2));
   * ```
   */
  dump(): EmulatorDump {
    return {
      databases: [...this.#store.databases.values()].map((db) => ({
        id: db.id,
        containers: [...db.containers.values()].map((c) => ({
          id: c.id,
          partitionKey: c.partitionKey,
          ranges: c.ranges.map(rangeInfo),
          documents: this.#store.documents(c),
          logLength: c.ranges.reduce((n, r) => n + r.log.length, 0),
        })),
      })),
    };
  }

  #record(entry: LoggedRequest): void {
    this.#requestLog.push(entry);
    if (this.#requestLog.length > this.#requestLogSize) this.#requestLog.shift();
  }
}

/**
 * Starts a local Cosmos DB emulator: the same as {@link CosmosEmulator.start}.
 *
 * @example
 * ```ts
 * import { startEmulator } from 'rxfeed/emulator';
 * const emulator = await startEmulator({ port: 0, initialRangeCount: 4 });
 * ```
 */
export function startEmulator(options: CosmosEmulatorOptions = {}): Promise<CosmosEmulator> {
  return CosmosEmulator.start(options);
}
