import { hashString, seededRandom } from '../../src/internal/random.js';
import { FaultEnv, VirtualClock } from '../support/faults/index.js';
import { AdminOps } from './admin.js';
import { runChaos } from './chaos.js';
import { EPOCH_MS, sdkLimits, type SimConfig, type SimResult, TICK_MS } from './config.js';
import { type Sim, Violations } from './context.js';
import { DeadLetterEvents } from './deadLetterEvents.js';
import { drawFaultPlans } from './faultPlans.js';
import { drawHostSettings, Hosts } from './hosts.js';
import { Throughout } from './invariants.js';
import { ObservedStores } from './observedStores.js';
import { SimRelay } from './relay.js';
import { checkQuiescence } from './quiescence.js';
import { SdkWorld } from './sdkWorld.js';
import { SimSse } from './sse.js';
import { SimTelemetry } from './telemetry.js';
import { World } from './world.js';

export * from './config.js';

/**
 * Runs one seeded simulation: 2–6 hosts in this process on virtual time, each running the real
 * `createChangeFeed` → `materializeToView` → `checkpointEvery` over shared `MemorySource`, `MemoryLeaseStore`
 * and `MemoryViewStore`, with faults at every seam; checks the invariants throughout and at quiescence.
 *
 * @example
 * ```ts
 * const { violations } = await runSimulation({ seed: 7, faults: ['lease', 'host'], hosts: { min: 2, max: 4 } });
 * ```
 */
export async function runSimulation(given: SimConfig): Promise<SimResult> {
  // The SDK mode leaves some fault sets and options out (see sdkLimits and the README's "SDK mode").
  const config = sdkLimits(given);
  const random = seededRandom(config.seed);
  const clock = new VirtualClock(EPOCH_MS);
  const events = new Map<string, number>();
  const sim: Sim = {
    config,
    faults: new Set(config.faults),
    random,
    int: (n) => Math.floor(random() * n),
    randomFor: (name) => seededRandom((config.seed ^ hashString(name)) >>> 0),
    clock,
    env: new FaultEnv({ seed: (config.seed ^ 0x5bd1e995) >>> 0, scheduler: clock }),
    violations: new Violations(clock),
    tally: (name, n = 1) => events.set(name, (events.get(name) ?? 0) + n),
    events,
  };
  // The SDK mode (`source: 'sdk'`) runs the process's timers on the virtual clock until `close()`.
  const sdk = config.source === 'sdk' ? await SdkWorld.start(sim) : undefined;
  try {
    return await run(sim, sdk);
  } finally {
    await sdk?.close();
  }
}

async function run(sim: Sim, sdk: SdkWorld | undefined): Promise<SimResult> {
  const { config, clock, events } = sim;
  // The order of construction is the order of the seed's draws: world, host settings, fault plans.
  const world = new World(sim, sdk);
  const settings = drawHostSettings(sim);
  const stores = new ObservedStores(sim, world);
  const plans = drawFaultPlans(sim);
  sdk?.injectFaults(plans);
  const everPaused = (name: string): boolean => hosts.all.some((h) => h.name === name && h.everPaused);
  const relay = config.relay === 'jetstream' || config.relay === 'amqp' ? new SimRelay(sim, world, config.relay, everPaused) : undefined;
  // Constructed after everything else draws: it draws only from its own PRNG (`sse`).
  const sse = config.sse === 'on' ? new SimSse(sim, world) : undefined;
  // Draws nothing: what the `deadLettered` events promise, checked against each host's dead-letter writes.
  const deadLetterEvents = new DeadLetterEvents(sim, world);
  const telemetry = SimTelemetry.draw(sim);
  const hosts: Hosts = new Hosts(sim, world, stores, plans, settings, relay, sse, deadLetterEvents, telemetry);
  const throughout = new Throughout(sim, world, stores, hosts);
  const advance = async (ms: number) => {
    for (let t = 0; t < ms; t += TICK_MS) {
      await clock.advance(TICK_MS);
      throughout.check();
      relay?.check();
      deadLetterEvents.check();
      sse?.tick();
    }
  };

  const admin = sim.faults.has('admin') ? new AdminOps(sim, world, stores) : undefined;
  await runChaos(sim, world, hosts, advance, () => admin?.tick());
  await admin?.finish(advance);
  await checkQuiescence(sim, world, stores, hosts, advance, sse && (() => sse.settle(advance)));
  relay?.finish();
  sse?.finish();
  deadLetterEvents.finish(await stores.deadLetterMemory.list({ limit: 1_000_000 }));
  await telemetry?.finish();

  return {
    config,
    violations: sim.violations.list,
    stats: {
      mode: world.mode,
      partitions: world.partitionCount,
      writes: world.written.size,
      deliveries: world.deliveries,
      virtualMs: clock.now() - EPOCH_MS,
      actions: clock.actions,
      faults: Object.fromEntries([...sim.env.counts(), ...events]),
    },
  };
}
