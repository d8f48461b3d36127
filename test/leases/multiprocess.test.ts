import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestCosmos } from '../support/cosmos.js';
import { startTestCosmos } from '../support/cosmos.js';
import { runSigkillScenario } from './fixtures/sigkillScenario.js';

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos?.stop();
});

describe('three processes, one lease container over HTTP', () => {
  it('one host is killed with SIGKILL mid-stream: survivors take over its ranges and every change is processed', { timeout: 120_000 }, async () => {
    const result = await runSigkillScenario(cosmos, `t${Date.now().toString(36)}`);
    expect(result.fatal).toEqual([]);
    expect(result.victimLeases.length).toBeGreaterThanOrEqual(1);
    expect(result.written.length).toBeGreaterThan(300);
    for (const id of result.written) expect(result.processed.has(id), id).toBe(true);
    const again = [...result.processed.values()].filter((n) => n > 1).length;
    // Figures only (wall-clock durations are never asserted): see bench/failover.ts --processes.
    console.log(
      `SIGKILL failover: ${result.failoverMs} ms for leases ${result.victimLeases.join(',')} ` +
        `(${(result.failoverMs / result.expirationMs).toFixed(2)} × expiration); ` +
        `${result.written.length} changes, ${again} processed more than once`,
    );
  });
});
