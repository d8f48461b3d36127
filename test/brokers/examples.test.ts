import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AMQP_URL, NATS_SERVERS, REDIS_URL, serviceUnavailable } from '../support/brokers/services.js';

// The broker examples import `rxfeed/redis`, `rxfeed/nats`, `rxfeed/amqp` by package name, so they run on the
// build (`npm test` builds before the unit tests; elsewhere run `npm run build` first).
const root = fileURLToPath(new URL('../..', import.meta.url));
const built = ['redis', 'nats', 'amqp'].every((entry) => existsSync(`${root}dist/esm/${entry}/index.js`));
if (!built) {
  const reason = 'the package is not built (dist/esm/{redis,nats,amqp}); run `npm run build`';
  if (process.env.CI === 'true') throw new Error(`${reason}: required under CI=true`);
  console.warn(`skipping the broker examples: ${reason}`);
}

function run(example: string, env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [`examples/${example}`], { cwd: root, env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
    );
  });
}

const cases = [
  ['redis-view.mjs', 'Redis', REDIS_URL, { REDIS_URL }],
  ['nats-relay.mjs', 'NATS JetStream', NATS_SERVERS, { NATS_URL: NATS_SERVERS }],
  ['amqp-relay.mjs', 'RabbitMQ', AMQP_URL, { AMQP_URL }],
] as const;

for (const [example, service, url, env] of cases) {
  const down = built ? await serviceUnavailable(service, url) : 'not built';
  describe.skipIf(down !== undefined)(`examples/${example}`, () => {
    it('runs on the built package and its final check passes', { timeout: 90_000 }, async () => {
      const { code, output } = await run(example, env);
      expect(output).toMatch(/^check: OK/m);
      expect(code, output).toBe(0);
    });
  });
}
