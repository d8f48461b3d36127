/**
 * `rxfeed/redis`: materialized views in Redis. Install `ioredis` (or pass any client with the same command
 * methods); the `rxfeed` entry point never loads it.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { RedisViewStore } from 'rxfeed/redis';
 * const view = new RedisViewStore<{ total: number }>({ name: 'order_totals', client: new Redis() });
 * ```
 *
 * @packageDocumentation
 */
export { RedisViewStore, type RedisViewStoreOptions, type RedisClientLike } from './RedisViewStore.js';
