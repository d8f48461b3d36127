import type { RedisClientLike } from '../../../src/redis/RedisViewStore.js';
import { type FaultEnv, type FaultPlan } from './plan.js';

/**
 * Faults of a Redis client's scripts, `evalsha` and `eval` (key: the first key the script touches):
 * - `drop`: the connection is lost as the script is sent: it never runs; the call rejects as ioredis does
 *   when a connection closes under a command it does not re-send (`Connection is closed.`);
 * - `lostReply`: the script runs, the connection is lost before its reply: the same rejection, write landed;
 * - `timeout`: the script runs, its reply comes after the client's command timeout (`ms`, default 1 000):
 *   rejects with ioredis's `Command timed out`, write landed;
 * - `noscript` (`evalsha` only): the server's script cache was flushed just before (a restart, a failover, a
 *   `SCRIPT FLUSH`): with a client that has `script` (ioredis), a real `SCRIPT FLUSH` is sent first and the
 *   server answers `NOSCRIPT`; otherwise the wrapper answers it;
 * - `slow`: the reply comes `ms` late (default 1 000).
 */
export type RedisFaultKind = 'drop' | 'lostReply' | 'timeout' | 'noscript' | 'slow';

/** A fault plan of a Redis client: rules for `evalsha` and `eval`. */
export type RedisFaultPlan = FaultPlan<'evalsha' | 'eval', RedisFaultKind>;

/** A client that can flush the server's script cache (ioredis: `client.script('FLUSH')`). */
type Flushable = RedisClientLike & { script?(subcommand: 'FLUSH'): Promise<unknown> };

const closed = () => Object.assign(new Error('Connection is closed. (injected)'), { name: 'Error' });

/**
 * Wraps a Redis client so its scripts fail, stall or lose their reply as `plan` says; every other command
 * passes through. Delays run on `env`'s clock.
 *
 * @example
 * ```ts
 * const client = faultyRedis(new Redis(url), { evalsha: [{ kind: 'lostReply', probability: 0.1 }] }, env);
 * const view = new RedisViewStore({ name: 'orders', client });
 * ```
 */
export function faultyRedis(client: Flushable, plan: RedisFaultPlan, env: FaultEnv): RedisClientLike {
  const run = async (op: 'evalsha' | 'eval', call: () => Promise<unknown>, key: string | undefined): Promise<unknown> => {
    const rule = env.pick('redis', plan, op, key);
    switch (rule?.kind) {
      case undefined:
        return call();
      case 'drop':
        throw closed();
      case 'lostReply':
        await call();
        throw closed();
      case 'timeout': {
        const landed = call();
        await env.delay(rule.ms ?? 1_000);
        await landed.catch(() => undefined);
        throw new Error('Command timed out (injected)');
      }
      case 'noscript':
        if (op !== 'evalsha') return call();
        if (typeof client.script === 'function') {
          await client.script('FLUSH');
          return call();
        }
        throw new Error('NOSCRIPT No matching script. Please use EVAL. (injected)');
      case 'slow': {
        const reply = await call();
        await env.delay(rule.ms ?? 1_000);
        return reply;
      }
    }
  };
  return {
    evalsha: (sha, numKeys, ...args) => run('evalsha', () => client.evalsha(sha, numKeys, ...args), numKeys > 0 ? String(args[0]) : undefined),
    eval: (script, numKeys, ...args) => run('eval', () => client.eval(script, numKeys, ...args), numKeys > 0 ? String(args[0]) : undefined),
    hget: (key, field) => client.hget(key, field),
    hgetall: (key) => client.hgetall(key),
    del: (...keys) => client.del(...keys),
    quit: () => client.quit(),
  };
}
