import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../src/internal/random.js';
import { FaultEnv, VirtualClock } from '../support/faults/index.js';
import { type Sim, Violations } from './context.js';
import { SdkWorld } from './sdkWorld.js';
import { drawVariant, EPOCH_MS, runSimulation, sdkLimits, type SimConfig } from './simulation.js';
import { World } from './world.js';

/** A run's context as `runSimulation` builds it, for driving a World by hand. */
function simFor(config: SimConfig): Sim {
  const random = seededRandom(config.seed);
  const clock = new VirtualClock(EPOCH_MS);
  const events = new Map<string, number>();
  return {
    config,
    faults: new Set(config.faults),
    random,
    int: (n) => Math.floor(random() * n),
    randomFor: (name) => seededRandom((config.seed ^ name.length) >>> 0),
    clock,
    env: new FaultEnv({ seed: config.seed, scheduler: clock }),
    violations: new Violations(clock),
    tally: (name) => events.set(name, (events.get(name) ?? 0) + 1),
    events,
  };
}

describe('simulation: what the SDK mode leaves out, and its lineage', () => {
  it('sdkLimits leaves out admin and opaque positions in the SDK mode only; drawVariant never pairs sdk with opaque', () => {
    const config: SimConfig = { seed: 1, faults: ['admin', 'topology', 'late'], hosts: { min: 2, max: 2 }, positions: 'opaque', source: 'sdk' };
    expect(sdkLimits(config)).toEqual({ ...config, faults: ['topology', 'late'], positions: 'lsn' });
    const memory: SimConfig = { ...config, source: 'memory' };
    expect(sdkLimits(memory)).toBe(memory);
    const drawn = Array.from({ length: 400 }, (_, i) => drawVariant(i + 1)).filter((v) => v.source === 'sdk');
    expect(drawn.length).toBeGreaterThan(0);
    for (const v of drawn) expect(v.positions).toBe('lsn');
  });

  it("the lineage follows the emulator's ranges and splits; merges do not happen", async () => {
    const sim = simFor({ seed: 3, faults: ['topology'], hosts: { min: 2, max: 2 }, source: 'sdk' });
    const sdk = await SdkWorld.start(sim);
    try {
      const world = new World(sim, sdk);
      const [first] = world.partitions();
      expect(first!.range.maxExclusive > first!.range.minInclusive).toBe(true);
      world.split(() => 0);
      const children = world.partitions().filter((p) => world.parentsOf.get(p.id)?.[0] === first!.id);
      expect(children).toHaveLength(2);
      for (const child of children) expect(world.isAncestor(first!.id, child.id)).toBe(true);
      expect(world.isAncestor(children[0]!.id, first!.id)).toBe(false);
      expect(world.isAncestor(children[0]!.id, children[1]!.id)).toBe(false);
      // A grandchild: the first child splits again.
      const live = world.partitions();
      const at = live.findIndex((p) => p.id === children[0]!.id);
      world.split(() => (at + 0.5) / live.length);
      const grandchildren = world.partitions().filter((p) => world.parentsOf.get(p.id)?.[0] === children[0]!.id);
      expect(grandchildren).toHaveLength(2);
      for (const g of grandchildren) {
        expect(world.isAncestor(first!.id, g.id)).toBe(true);
        expect(world.isAncestor(children[0]!.id, g.id)).toBe(true);
        expect(world.isAncestor(children[1]!.id, g.id)).toBe(false);
      }
      const before = world.partitions().length;
      world.merge(() => 0);
      expect(world.partitions()).toHaveLength(before);
    } finally {
      await sdk.close();
    }
  });

  it('an SDK seed under topology, admin and opaque positions runs as the limits say, without violations', async () => {
    const result = await runSimulation({ seed: 4, faults: ['host', 'source', 'topology', 'admin'], hosts: { min: 2, max: 3 }, chaosMs: 4_000, positions: 'opaque', source: 'sdk' });
    expect(result.violations).toEqual([]);
    expect(result.config.faults).not.toContain('admin');
    expect(result.config.positions).toBe('lsn');
    expect(Object.keys(result.stats.faults).filter((k) => k.startsWith('admin.') || k === 'source.merge' || k.startsWith('source.listing.'))).toEqual([]);
  });
});

describe('simulation: the lineage of an EPK token used again', () => {
  /** A `random` that makes `World.split` pick partition `id`. */
  const splitting = (world: World, id: string) => () => (world.partitions().findIndex((p) => p.id === id) + 0.5) / world.partitions().length;
  /** A `random` that makes `World.merge` pick partition `id` and the one after it. */
  const merging = (world: World, id: string) => () => (world.partitions().findIndex((p) => p.id === id) + 0.5) / (world.partitions().length - 1);
  const idOf = (world: World, range: { minInclusive: string; maxExclusive: string }) => world.partitions().find((p) => p.range.minInclusive === range.minInclusive && p.range.maxExclusive === range.maxExclusive)!.id;

  it('a descendant that replaces itself by a lease of the same range starts a new lineage of the token (seed 1404 of --faults all)', () => {
    const world = new World(simFor({ seed: 1, faults: ['topology'], hosts: { min: 2, max: 2 } }));
    const [first] = world.partitions();
    world.split(splitting(world, first!.id));
    const [left, right] = world.partitions().filter((p) => world.parentsOf.get(p.id)?.[0] === first!.id);
    world.merge(merging(world, left!.id));
    // The right part of the merged partition gets an EPK lease, created by the replacement of `right`'s lease.
    const token = `${right!.range.minInclusive}-${right!.range.maxExclusive}`;
    expect(world.registerToken(token, right!.range, 6, right!.id)).toBe(true);
    const merged = world.partitions().find((p) => world.parentsOf.get(p.id)?.includes(left!.id))!;
    world.split(splitting(world, merged.id)); // the token's range is a partition of its own
    const whole = idOf(world, right!.range);
    world.split(splitting(world, whole)); // cut: the token is gone
    const [cutLeft] = world.partitions().filter((p) => world.parentsOf.get(p.id)?.[0] === whole);
    world.merge(merging(world, cutLeft!.id)); // held whole again, as partition `again`
    const again = idOf(world, right!.range);
    expect(world.isAncestor(token, again)).toBe(true);
    world.merge(merging(world, world.partitions()[0]!.id)); // `again` merged with its left neighbour: gone
    // Created again by an ancestor (a stale replacement), the token stays the lineage it was.
    expect(world.registerToken(token, right!.range, 16, right!.id)).toBe(false);
    expect(world.isAncestor(token, again, { ancestor: 17, partition: 15 })).toBe(true);
    // Created by `again`'s replacement, one epoch above it: a child of `again`, for writes from epoch 16 on.
    expect(world.registerToken(token, right!.range, 16, again)).toBe(true);
    expect(world.isAncestor(token, again, { ancestor: 17, partition: 15 })).toBe(false);
    expect(world.isAncestor(again, token, { ancestor: 15, partition: 17 })).toBe(true);
    // Writes of the earlier lineage (epochs below 16) are still its: an ancestor of `again`.
    expect(world.isAncestor(token, again, { ancestor: 10, partition: 15 })).toBe(true);
    expect(world.incarnation(token, 10)).toBe(0);
    expect(world.incarnation(token, 17)).toBe(16);
  });
});
