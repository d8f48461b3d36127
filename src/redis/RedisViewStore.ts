import { createHash } from 'node:crypto';
import { InvalidOptionsError } from '../errors/index.js';
import { ViewFencedError } from '../errors/ViewFencedError.js';
import { logger } from '../internal/log.js';
import { importOptional } from '../internal/importOptional.js';
import { LazyConnection } from '../internal/lazyConnection.js';
import type { ViewPartitionState, ViewRow, ViewStore, ViewWrite, ViewWriteResult } from '../sinks/ViewStore.js';
import { PRUNE_SCRIPT, WRITE_SCRIPT } from './writeScript.js';

/**
 * The part of a Redis client the store uses: ioredis (`new Redis(...)`) has it, and so has any client with
 * the same promise-returning command methods.
 */
export interface RedisClientLike {
  /** Runs a cached Lua script (`EVALSHA`). */
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  /** Runs a Lua script, caching it (`EVAL`). */
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  /** `HGET`. */
  hget(key: string, field: string): Promise<string | null>;
  /** `HGETALL`. */
  hgetall(key: string): Promise<Record<string, string>>;
  /** `DEL`. */
  del(...keys: string[]): Promise<number>;
  /** Closes the connection (only called on a client the store opened). */
  quit(): Promise<unknown>;
}

/** Options of {@link RedisViewStore}. */
export interface RedisViewStoreOptions {
  /** The view's name: its keys are `<keyPrefix>{<name>}:rows`, `…:tombstones`, `…:partitions`, `…:fences`. */
  readonly name: string;
  /** A connected client (ioredis). The store never closes it. Give this or `url`. */
  readonly client?: RedisClientLike;
  /** A Redis URL (`redis://host:6379/0`); the store opens an ioredis client and closes it on `close()`. */
  readonly url?: string;
  /** Prefix of every key. Default `'rxfeed:view:'`. */
  readonly keyPrefix?: string;
}

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
const WRITE_SHA = sha1(WRITE_SCRIPT);
const PRUNE_SHA = sha1(PRUNE_SCRIPT);

/**
 * A {@link ViewStore} in Redis, with the semantics of the PostgreSQL stores: per-row LSN guard, tombstones,
 * per-partition positions, `exactlyOnce` mode, and epoch fencing by key range along the lineage (a write
 * whose range overlaps a range written under a higher epoch is refused with `ViewFencedError`; every write
 * raises its range's epoch, also when it changes nothing). Each write is one Lua script: one atomic step on
 * the server, no read-modify-write from the client, so it is safe with any number of hosts and a retried
 * write (after a dropped connection) is harmless. Rows are stored as JSON in one hash per view.
 *
 * Needs the optional package `ioredis` only when given a `url`.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { RedisViewStore } from 'rxfeed/redis';
 * const view = new RedisViewStore<{ total: number }>({ name: 'order_totals', client: new Redis() });
 * feed$.pipe(materializeToView(view, { project: (c) => ({ total: c.document!.total }) }), checkpointEvery(500)).subscribe();
 * ```
 */
export class RedisViewStore<R> implements ViewStore<R> {
  /** What the store writes to, for logs and events (never a secret). */
  readonly description: string;
  readonly #keys: readonly [rows: string, tombstones: string, partitions: string, fences: string];
  readonly #owned: boolean;
  /** The client given, or one the store opens on first use. */
  readonly #client: LazyConnection<RedisClientLike>;

  constructor(options: RedisViewStoreOptions) {
    const { name, client, url, keyPrefix = 'rxfeed:view:' } = options ?? ({} as RedisViewStoreOptions);
    if (typeof name !== 'string' || name === '') throw new InvalidOptionsError('name', 'give the view a non-empty name (its Redis keys derive from it)');
    if ((client === undefined) === (url === undefined)) throw new InvalidOptionsError('client', 'give either a connected Redis client or a url, not both');
    if (client !== undefined && typeof client.evalsha !== 'function') throw new InvalidOptionsError('client', 'give an ioredis client (or one with evalsha/eval/hget/hgetall/del)');
    const base = `${keyPrefix}{${name}}`;
    this.#keys = [`${base}:rows`, `${base}:tombstones`, `${base}:partitions`, `${base}:fences`];
    this.description = `redis view ${name}`;
    this.#owned = client === undefined;
    this.#client = new LazyConnection(async () => {
      if (client) return client;
      const { Redis } = await importOptional('ioredis', () => import('ioredis'), 'RedisViewStore');
      const opened = new Redis(url!);
      // ioredis reconnects by itself (and re-sends unanswered scripts: each write is idempotent); say why it had to.
      opened.on('error', (error: Error) => logger('view')('%s: connection error: %s', this.description, error.message));
      return opened as unknown as RedisClientLike;
    });
  }

  #connect(): Promise<RedisClientLike> {
    return this.#client.get();
  }

  /** Runs a cached script, loading it on the first NOSCRIPT. */
  async #run(sha: string, script: string, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const client = await this.#connect();
    try {
      return await client.evalsha(sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!String((error as Error).message).startsWith('NOSCRIPT')) throw error;
      return client.eval(script, keys.length, ...keys, ...args);
    }
  }

  /** Writes one batch of rows for one partition, fenced by lease epoch along the lineage; see `ViewStore.write`. */
  async write(write: ViewWrite<R>): Promise<ViewWriteResult> {
    const args: (string | number)[] = [write.mode, write.partitions.length];
    for (const c of write.partitions) {
      args.push(c.partition, c.epoch, c.position, c.lsn ?? '', c.range?.minInclusive ?? '', c.range?.maxExclusive ?? '');
    }
    for (const c of write.changes) {
      const value = c.row === undefined ? '' : JSON.stringify([c.lsn, c.timestampMs, c.partition, c.row]);
      args.push(c.key, c.lsn, c.partition, c.timestampMs, value);
    }
    const reply = (await this.#run(WRITE_SHA, WRITE_SCRIPT, this.#keys, args)) as unknown[];
    if (reply[0] === 'FENCED') {
      const [, partition, epoch, current] = reply as string[];
      logger('view', { lease: partition })('%s: write under epoch %s refused, the view has seen epoch %s', this.description, epoch, current);
      throw new ViewFencedError(partition!, Number(epoch), Number(current));
    }
    const [written, deleted, skipped] = reply as [number, number, number];
    return { written, deleted, skipped };
  }

  /** The row of `key`, if there is one (tombstones are not rows). */
  async get(key: string): Promise<ViewRow<R> | undefined> {
    const value = await (await this.#connect()).hget(this.#keys[0], key);
    return value === null ? undefined : toRow<R>(key, value);
  }

  /** Every row of the view (not tombstones). */
  async rows(): Promise<ViewRow<R>[]> {
    const all = await (await this.#connect()).hgetall(this.#keys[0]);
    return Object.keys(all)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .map((key) => toRow<R>(key, all[key]!));
  }

  /** The position each partition wrote up to, with its epoch (what `alignLeasesWithView` copies into the leases). */
  async positions(): Promise<ReadonlyMap<string, ViewPartitionState>> {
    const all = await (await this.#connect()).hgetall(this.#keys[2]);
    const positions = new Map<string, ViewPartitionState>();
    for (const [partition, json] of Object.entries(all)) {
      const { p, e, l, mn, mx } = JSON.parse(json) as { p?: string; e: string; l?: string; mn?: string; mx?: string };
      if (p === undefined) continue; // only replays so far: an inherited mark, no position of its own
      positions.set(partition, {
        position: p,
        epoch: Number(e),
        lsn: l === undefined ? undefined : Number(l),
        ...(mx !== undefined ? { range: { minInclusive: mn ?? '', maxExclusive: mx } } : {}),
      });
    }
    return positions;
  }

  /** Removes tombstones of deletes committed before `beforeTimestampMs` (ms since the epoch); resolves to how many. Only safe for times no replay reaches back to. */
  async pruneTombstones(beforeTimestampMs: number): Promise<number> {
    return Number(await this.#run(PRUNE_SHA, PRUNE_SCRIPT, [this.#keys[1]], [beforeTimestampMs]));
  }

  /** Forgets every partition's position, epoch, range and LSN mark (rows and tombstones stay), after the lease container was recreated. */
  async clearPositions(): Promise<void> {
    await (await this.#connect()).del(this.#keys[2], this.#keys[3]);
  }

  /** Deletes the whole view: rows, tombstones, positions and fences. */
  async drop(): Promise<void> {
    await (await this.#connect()).del(...this.#keys);
  }

  /** Closes the Redis connection if the store opened it. */
  async close(): Promise<void> {
    const client = this.#client.take();
    if (this.#owned && client) await (await client).quit();
  }
}

function toRow<R>(key: string, value: string): ViewRow<R> {
  const [lsn, timestampMs, partition, row] = JSON.parse(value) as [number, number, string, R];
  return { key, row, lsn, timestampMs, partition };
}
