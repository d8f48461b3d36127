import { describe, expect, it } from 'vitest';
import { drawVariant, replayLine, runSimulation, type SimConfig } from './simulation.js';

async function expectNoViolations(config: SimConfig) {
  const result = await runSimulation(config);
  if (result.violations.length > 0) {
    const lines = result.violations.slice(0, 5).map((v) => `  ${v.invariant} at ${v.atMs} ms: ${v.detail}`);
    throw new Error(`${result.violations.length} invariant violations:\n${lines.join('\n')}\nreplay: ${replayLine(config)}`);
  }
  return result.stats;
}

/**
 * The `--relay` variant: hosts relay every batch through the real `publishToJetStream` / `publishToAmqp` to a
 * broker model with the `broker` fault set (drops mid-batch, refusals, slow and lost acks, flow control), while
 * hosts crash, pause and stop and partitions split. Nothing checkpointed the broker does not hold, per-key LSN
 * order at the broker, duplicates only where the broker cannot de-duplicate.
 */
describe('simulation: relays to brokers', () => {
  for (const relay of ['jetstream', 'amqp'] as const) {
    for (const seed of [1, 2, 3]) {
      const config: SimConfig = { seed, faults: ['host', 'source', 'broker'], hosts: { min: 2, max: 4 }, chaosMs: 5_000, relay };
      it(`${replayLine(config)}`, async () => {
        const stats = await expectNoViolations(config);
        expect(stats.faults[`relay.${relay}.messages`]).toBeGreaterThan(0);
        expect(Object.keys(stats.faults).filter((k) => k.startsWith('broker.')).length).toBeGreaterThan(0);
      });
    }
    // Found broker-key-order before the relay sent one change per document per round: a message refused
    // (a full stream, a nack, here one refused for good) while the document's next change was stored.
    const found: SimConfig = { seed: 5, faults: ['host', 'source', 'broker'], hosts: { min: 2, max: 4 }, chaosMs: 10_000, relay };
    it(`broker-key-order (a refused message overtaken by its document's next change): ${replayLine(found)}`, () => expectNoViolations(found));
  }

  it('AMQP cannot de-duplicate: a crash between publish and checkpoint leaves duplicates, counted; JetStream stores none within its window', async () => {
    const base = { faults: ['host', 'source', 'broker'], hosts: { min: 2, max: 4 }, chaosMs: 10_000 } as const;
    const amqp = await expectNoViolations({ ...base, seed: 2, relay: 'amqp' });
    const jetstream = await expectNoViolations({ ...base, seed: 2, relay: 'jetstream' });
    expect(amqp.faults['relay.amqp.duplicates']).toBeGreaterThan(0);
    expect(jetstream.faults['relay.jetstream.dedupedByBroker']).toBeGreaterThan(0);
    expect(jetstream.faults['relay.jetstream.duplicates'] ?? 0).toBe(0);
  });

  it('--faults all draws the relay from a PRNG of its own: the other options of a seed are what they were', () => {
    const drawn = [1, 2, 3, 4, 5, 6, 7, 8].map(drawVariant);
    expect(new Set(drawn.map((v) => v.relay))).toEqual(new Set(['jetstream', 'amqp', 'off']));
    for (const v of drawn) if (v.form === 'handler') expect(v.relay).toBe('off');
    // Seeds 1 and 3 as drawn before the relay existed (positions and source drawn after the others), plus the relay.
    expect(drawVariant(1)).toEqual({ view: 'exactlyOnce', groups: false, balanceBy: 'count', form: 'rx', policy: 'deadLetter', start: 'beginning', leaseScheme: 'rxfeed', positions: 'opaque', source: 'memory', relay: 'jetstream', sse: 'off' });
    expect(drawVariant(3)).toEqual({ view: 'guarded', groups: false, balanceBy: 'count', form: 'rx', policy: 'deadLetter', start: 'now', leaseScheme: 'dotnet', positions: 'opaque', source: 'memory', relay: 'amqp', sse: 'off' });
  });
});
