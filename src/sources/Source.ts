import type { Change } from '../core/Change.js';
import type { FeedMode, Partition, Position, StartFrom } from '../core/Partition.js';

/** One read of one partition. */
export interface ReadRequest {
  /** The partition to read. */
  readonly partition: Partition;
  /** Where to read from: the lease's stored position (`{ position }`) or the configured start. */
  readonly from: StartFrom;
  /** Upper bound on the number of changes to return (sources may exceed it only for one transaction). */
  readonly maxItemCount: number;
  /** Aborted when the reader is unsubscribed; an in-flight read must stop promptly. */
  readonly signal?: AbortSignal;
}

/** The result of one read. */
export interface Page<T> {
  /** The changes read, in partition order; empty when nothing is new. */
  readonly changes: readonly Change<T>[];
  /** Position to resume after this page (unchanged when nothing is new, except on the first 'now' read). */
  readonly position: Position;
  /** The partition's latest LSN when read, if the source knows it (used for lag estimates). */
  readonly latestLsn?: number;
  /** What the read cost, in request units, where the source charges for reads (Cosmos DB). */
  readonly requestCharge?: number;
}

/**
 * A partitioned change feed: lists partitions and reads pages of changes from a position.
 *
 * Errors a source throws from `read` tell the reader what to do:
 * {@link TransientError} → retry (honouring `retryAfterMs`); {@link PartitionGoneError} → the partition
 * was split or merged, list partitions again; {@link ResourceGoneError} / {@link CredentialsError} →
 * stop. Anything else is retried with backoff and reported.
 *
 * @example
 * ```ts
 * import { MemorySource } from 'rxfeed';
 * const source = new MemorySource<{ id: string }>({ partitions: 4 });
 * const [first] = await source.listPartitions();
 * const page = await source.read({ partition: first!, from: 'beginning', maxItemCount: 100 });
 * ```
 */
export interface Source<T = unknown> {
  /** Human-readable name of what is read (for logs), e.g. `dbs/shop/colls/orders`. Never a secret. */
  readonly description: string;
  /**
   * What telemetry calls this feed: the messaging system (`messaging.system`, e.g. `azure_cosmosdb`) and the
   * container (`messaging.destination.name`). Default: system `rxfeed`, name `description`.
   */
  readonly destination?: { readonly system: string; readonly name: string };
  /** Which changes the feed delivers. */
  readonly mode: FeedMode;
  /**
   * How many reads this source serves at once at no extra cost (e.g. without opening connections it then
   * closes): the default of a processor's `maxConcurrentReads`. Leave it out when any number will do.
   */
  readonly concurrentReads?: number;
  /** The live partitions, covering the whole key space without overlap. */
  listPartitions(signal?: AbortSignal): Promise<readonly Partition[]>;
  /** Reads one page of changes of one partition. */
  read(request: ReadRequest): Promise<Page<T>>;
  /**
   * Throws an `InvalidOptionsError` when this source cannot start from `from` (e.g. Cosmos DB's
   * AllVersionsAndDeletes mode only starts from `'now'` or a position). Called when a feed is constructed,
   * so a start that can never work fails at once instead of on every read.
   */
  checkStart?(from: StartFrom): void;
  /**
   * The position from which a read returns exactly the changes at or after `at`: `'beginning'` (everything
   * still in the log), `'now'` (nothing made before this call) or a point in time. Used to rewind or fast-forward
   * a lease (`rxfeed leases rewind`); sources that cannot compute it leave it out.
   *
   * @example
   * ```ts
   * const position = await source.positionAt?.(partition, new Date('2026-11-22T00:00:00Z'));
   * ```
   */
  positionAt?(partition: Partition, at: 'beginning' | 'now' | Date, signal?: AbortSignal): Promise<Position>;
  /**
   * The source's own current time: by the clock that stamps its changes (the one a `Date` start and
   * {@link Source.positionAt} compare with), never the host's; `undefined` when it cannot tell. Cosmos DB
   * answers with the service's time (the `Date` header of a container read, to the second).
   *
   * `startFrom: 'now'` asks it when a run starts, so that "now" does not depend on any host's clock. A source
   * that starts from times but leaves this out (or answers `undefined`) gets each partition's
   * `positionAt(partition, 'now')` when its lease is created instead: clock-free too, but later than the start.
   *
   * @example
   * ```ts
   * const now = await source.currentTime?.(); // e.g. 2026-11-22T10:15:42.000Z, by the service's clock
   * ```
   */
  currentTime?(signal?: AbortSignal): Promise<Date | undefined>;
  /**
   * Rejects quickly (with a {@link TransientError} naming what cannot be reached) when the feed is plainly
   * unreachable, e.g. an account host name that does not resolve. The change feed calls it when a run
   * starts and reports a failure as an `error` event at once, while its own requests keep retrying.
   *
   * @example
   * ```ts
   * await source.checkReachable?.();
   * ```
   */
  checkReachable?(signal?: AbortSignal): Promise<void>;
}
