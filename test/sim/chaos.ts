import { TICK_MS, TIMINGS } from './config.js';
import type { Sim } from './context.js';
import type { Hosts } from './hosts.js';
import type { World } from './world.js';

/**
 * The chaos script: writers keep writing while hosts crash, pause past expiry and come back as zombies,
 * stop, join, restart under a crashed host's name or start as a twin, and the source splits and throttles
 * in storms, each tick of {@link TICK_MS}, for `chaosMs`. `advance` moves virtual time and checks the
 * invariants that hold throughout.
 */
export async function runChaos(sim: Sim, world: World, hosts: Hosts, advance: (ms: number) => Promise<void>, tick: () => void = () => undefined): Promise<void> {
  const { config, faults, random, int, clock, env } = sim;
  const chaosMs = config.chaosMs ?? 30_000;
  await world.writeBeforeStart(advance);
  const initial = config.hosts.min + int(config.hosts.max - config.hosts.min + 1);
  for (let i = 0; i < initial; i++) hosts.join();
  const bootstrap = faults.has('bootstrap') ? sim.randomFor('bootstrap') : undefined;
  if (bootstrap) interruptBootstraps(sim, hosts, bootstrap);
  for (let i = 0; i < 50 + int(150); i++) world.write();
  let storm = false;
  const topology = faults.has('topology') ? sim.randomFor('topology') : undefined;
  for (let t = 0; t < chaosMs; t += TICK_MS) {
    for (let n = int(4); n > 0; n--) world.write();
    if (faults.has('host') && random() < 0.03) {
      const r = random();
      const candidates = hosts.running();
      const victim = candidates.length > 0 ? candidates[int(candidates.length)] : undefined;
      if (r < 0.25 && victim) {
        victim.clock.kill();
        sim.tally('host.crash');
      } else if (r < 0.5 && victim) {
        sim.tally('host.pause');
        victim.clock.pause();
        victim.everPaused = true;
        const pauseMs = TIMINGS.leaseExpirationMs * (1.5 + random() * 3);
        clock.schedule(() => victim.clock.resume(), pauseMs);
      } else if (r < 0.7 && victim) {
        hosts.stop(victim);
        sim.tally('host.stop');
      } else if (hosts.alive().length < config.hosts.max) {
        sim.tally('host.join');
        // A restart under a dead host's name now and then: it finds leases it "owns" from before the crash.
        const dead = hosts.all.filter((h) => h.clock.state === 'dead' && !hosts.all.some((o) => o.name === h.name && o.clock.state !== 'dead'));
        hosts.join(dead.length > 0 && random() < 0.3 ? dead[int(dead.length)]!.name : undefined);
      }
    }
    if (faults.has('host') && hosts.alive().length < config.hosts.min && random() < 0.1) hosts.join();
    if (faults.has('twin') && random() < 0.003) {
      const live = hosts.running();
      if (live.length > 0 && hosts.alive().length < config.hosts.max) {
        sim.tally('host.twin');
        hosts.join(live[int(live.length)]!.name);
      }
    }
    if (faults.has('source')) {
      if (random() < 0.005) world.split();
      if (!storm && random() < 0.005) {
        storm = true;
        sim.tally('source.storm');
        env.turnOn('storm');
        clock.schedule(() => {
          storm = false;
          env.turnOff('storm');
        }, 1_000 + int(3_000));
      }
    }
    if (topology) {
      // Merges (and splits, so that merged partitions split and split ones merge), from a PRNG of their own.
      const r = topology();
      if (r < 0.006) world.merge(topology);
      else if (r < 0.01) world.split(topology);
    }
    if (bootstrap && bootstrap() < 0.01 && hosts.alive().length < config.hosts.max) {
      // A host that joins and is stopped or crashes before its first leases are settled.
      interruptBootstraps(sim, hosts, bootstrap, hosts.join());
    }
    hosts.clocks.tick(hosts.running());
    tick(); // the fault sets with a chaos of their own (admin operations)
    await advance(TICK_MS);
  }
}

/**
 * The `bootstrap` fault set: a host (the first to start, or `host`) is stopped or crashes 0–200 ms after it
 * started, while it creates the leases under the bootstrap lock (a crash leaves the lock behind: the next
 * bootstrap waits for it to go stale). A fault like any other: one due after the chaos, once the faults are off
 * (`bootstrap.afterChaos`), strikes no more, or it could stop the only host the quiescence checks rely on.
 */
function interruptBootstraps(sim: Sim, hosts: Hosts, random: () => number, host = hosts.all[0]): void {
  if (!host || random() >= 0.5) return;
  const crash = random() < 0.5;
  sim.clock.schedule(() => {
    if (host.clock.state !== 'running' || host.stopCalledAt !== undefined) return;
    if (!sim.env.enabled) return sim.tally('bootstrap.afterChaos');
    sim.tally(crash ? 'bootstrap.crash' : 'bootstrap.stop');
    if (crash) host.clock.kill();
    else hosts.stop(host);
  }, Math.floor(random() * 200));
}
