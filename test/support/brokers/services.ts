import { Socket } from 'node:net';

/** Where the broker tests find their services (overridable for other machines). */
export const REDIS_URL = process.env.RXFEED_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
export const NATS_SERVERS = process.env.RXFEED_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
export const AMQP_URL = process.env.RXFEED_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/**
 * Why the tests of `service` cannot run here, or `undefined` when its port answers. Under `CI=true` every
 * service is required, so this throws instead of skipping; elsewhere it prints the reason once.
 */
export async function serviceUnavailable(service: string, url: string): Promise<string | undefined> {
  const { hostname, port } = new URL(url);
  const reachable = await new Promise<string | undefined>((resolve) => {
    const socket = new Socket();
    const done = (reason: string | undefined) => {
      socket.destroy();
      resolve(reason);
    };
    socket.setTimeout(2000, () => done('timed out'));
    socket.once('error', (error) => done(error.message));
    socket.connect(Number(port), hostname, () => done(undefined));
  });
  if (reachable === undefined) return undefined;
  const reason = `${service} at ${hostname}:${port} is unreachable (${reachable})`;
  if (process.env.CI === 'true') throw new Error(`${reason}; it is required under CI=true`);
  console.warn(`skipping ${service} tests: ${reason}`);
  return reason;
}

/** A name no other run uses (streams, exchanges, views). */
export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
}
