import { InvalidOptionsError } from '../errors/InvalidOptionsError.js';
import type { CrossPartitionQueries } from './handlers/context.js';
import type { SqlEngineChoice } from './QueryEngine.js';

/** Options of {@link CosmosEmulator.start}. */
export interface CosmosEmulatorOptions {
  /** TCP port to listen on; 0 picks a free one. Default `0`. */
  port?: number;
  /**
   * Listen on a socket. `false`: no socket at all; clients reach the emulator only through
   * {@link CosmosEmulator.httpClient} (fast in-process tests), and `endpoint` is `http://127.0.0.1:0/`, an
   * address nothing answers on. Default `true`.
   */
  listen?: boolean;
  /** Interface to listen on. Default `'127.0.0.1'`. */
  host?: string;
  /**
   * Physical partition key ranges a new container starts with, as a number or per container (the function
   * also gets the throughput the create asked for, in RU/s, or `undefined`). Default: as the service does,
   * about one range per 10,000 RU/s of requested throughput (manual, or the autoscale maximum), at least 1;
   * so 400 RU/s gives 1 range, 21,000 or 25,100 RU/s give 3. Ranges cut the hash domain evenly;
   * {@link CosmosEmulator.split} adds more later.
   */
  initialRangeCount?: number | ((databaseId: string, containerId: string, throughput: number | undefined) => number);
  /** Hash version (1 or 2) for containers created without `partitionKey.version`. Default `2`. */
  defaultPartitionKeyVersion?: 1 | 2;
  /** Changes per change feed page when the client sends no `maxItemCount`. Default `100` (changes). */
  changeFeedPageSize?: number;
  /** Results per query page when the client sends no `maxItemCount`. Default `100` (items). */
  queryPageSize?: number;
  /**
   * Answer AllVersionsAndDeletes reads that start from the beginning or a time with 400, as the service
   * does (it only supports "now" and continuations). Default `true`.
   */
  strictAllVersionsStart?: boolean;
  /**
   * Who runs a query over the whole of a container with more than one range. `'gateway'`: the emulator,
   * as the service's gateway runs queries whose ranges' results can be concatenated (no ORDER BY, TOP or
   * aggregate), with a continuation that survives splits and merges. `'client'`: the SDK, range by range:
   * every query the emulator can plan is refused with 400 and its plan, as the service refuses ORDER BY or
   * aggregates, so that tests can drive the SDK's own cross-partition path. Default `'gateway'`.
   */
  crossPartitionQueries?: CrossPartitionQueries;
  /** Clock (epoch ms) for `_ts`, change timestamps, `If-Modified-Since` and TTL. Default `Date.now`. */
  now?: () => number;
  /** Seed of the random source behind probabilistic faults, so a run can be repeated. Default `1`. */
  randomSeed?: number;
  /** Requests kept in the request log (oldest dropped first). Default `1000` (requests). */
  requestLogSize?: number;
  /**
   * The base64 master key clients must sign with, checked as the service checks it: unsigned or wrongly
   * signed requests get 401. Default: {@link EMULATOR_KEY}, the official emulator's well-known key.
   */
  masterKey?: string;
  /** Verify request signatures against `masterKey`. `false` accepts any key (or none). Default `true`. */
  checkAuth?: boolean;
  /**
   * Which SQL engine answers queries. `'auto'`: the built-in evaluator for the simple shapes (what lease
   * stores send), the optional package `@zeit/cosmosdb-query` for the rest when it is installed. `'builtin'`:
   * never load the optional package. Queries neither can run answer 400 saying what to install or change.
   * Default `'auto'`.
   */
  sqlEngine?: SqlEngineChoice;
  /** Where the emulator reports a problem the user must act on (said once, e.g. a missing query package). Default `console.warn`. */
  onWarning?: (message: string) => void;
}

/** `masterKey` checked: a non-empty base64 string, or `undefined`. */
export function validKey(key: string | undefined): string | undefined {
  if (key !== undefined && (key === '' || Buffer.from(key, 'base64').length === 0)) {
    throw new InvalidOptionsError('masterKey', 'must be a non-empty base64 string');
  }
  return key;
}

/** `crossPartitionQueries` checked, `'gateway'` by default. */
export function crossPartitionQueries(value: CrossPartitionQueries | undefined): CrossPartitionQueries {
  if (value === undefined || value === 'gateway' || value === 'client') return value ?? 'gateway';
  throw new InvalidOptionsError('crossPartitionQueries', `must be 'gateway' or 'client', got ${String(value)}`);
}

/** A positive integer option checked, `fallback` when unset. */
export function positiveInt(option: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) throw new InvalidOptionsError(option, `must be a positive integer, got ${value}`);
  return value;
}
