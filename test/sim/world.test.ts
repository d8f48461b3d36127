import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../src/internal/random.js';
import { FaultEnv, VirtualClock } from '../support/faults/index.js';
import { type Sim, Violations } from './context.js';
import { EPOCH_MS, type SimConfig } from './simulation.js';
import { World } from './world.js';

/** A run's context as `runSimulation` builds it, for driving a World by hand (seed 2: two partitions). */
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

const LEFT = { minInclusive: '', maxExclusive: '7F800000' };
const LEFT_EPK = '-7F800000';

/** A world of two partitions merged into one whole partition, whose left half an EPK-range lease reads. */
function mergedWithEpk(): { world: World; write: (n: number) => void } {
  const sim = simFor({ seed: 2, faults: ['topology'], hosts: { min: 2, max: 2 } });
  const world = new World(sim);
  expect(world.partitions().map((p) => p.range)).toEqual([LEFT, { minInclusive: '7F800000', maxExclusive: 'FF' }]);
  world.merge(() => 0);
  expect(world.registerToken(LEFT_EPK, LEFT)).toBe(true);
  return { world, write: (n) => Array.from({ length: n }, () => world.write()) };
}

const idOf = (key: string) => key.slice(0, key.lastIndexOf('@'));
const lsnOf = (key: string) => Number(key.slice(key.lastIndexOf('@') + 1));
const inLeft = (world: World, key: string) => world.keyOf(idOf(key))! < LEFT.maxExclusive;
const writtenTo = (world: World, partitions: readonly string[]) => [...world.written].filter((k) => partitions.includes(world.writtenTo.get(k)!));

describe("simulation: the world's lineage and excuses", () => {
  it("an EPK range cut by a split and whole again after a merge, its lease never replaced, is no one's parent: its halt holds back its keys", () => {
    const { world, write } = mergedWithEpk();
    write(20);
    // The left half splits off, then splits again: the EPK range is cut in two ...
    world.split(() => 0);
    const [leftHalf] = world.partitions();
    expect(leftHalf!.range).toEqual(LEFT);
    world.split(() => 0);
    const cut = world.partitions().slice(0, 2).map((p) => p.id);
    write(40);
    // ... and merged again 200 ms later, before any host read the lease (the source reads it in the merged one).
    world.merge(() => 0);
    const healed = world.partitions()[0]!;
    expect(healed.range).toEqual(LEFT);
    write(40);
    expect(world.isAncestor(LEFT_EPK, cut[0]!)).toBe(false);
    expect(world.isAncestor(LEFT_EPK, healed.id)).toBe(false);
    world.halted.add(LEFT_EPK);
    const held = writtenTo(world, [...cut, healed.id]);
    expect(held.length).toBeGreaterThan(0);
    for (const key of held) expect(world.excused(key)).toBe(true);
    // Replaced once it was read cut (marked, then deleted): gone from its cut on, its children's parent.
    world.leaseEnded(LEFT_EPK);
    expect(world.isAncestor(LEFT_EPK, cut[0]!)).toBe(true);
    expect(world.isAncestor(LEFT_EPK, healed.id)).toBe(true);
    for (const key of held) expect(world.excused(key)).toBe(false);
  });

  it("a halt excuses only the keys in the halted lease's range, not those of a merged partition's other half", () => {
    const { world, write } = mergedWithEpk();
    write(60);
    world.halted.add(LEFT_EPK);
    const merged = writtenTo(world, [world.partitions()[0]!.id]);
    const right = merged.filter((k) => !inLeft(world, k));
    expect(right.length).toBeGreaterThan(0);
    for (const key of merged) expect(world.excused(key)).toBe(inLeft(world, key));
  });

  it("a rewind moving an EPK lease's checkpoint forward skips its keys' changes in the merged partition it reads, and only those", () => {
    const { world, write } = mergedWithEpk();
    write(60);
    const merged = writtenTo(world, [world.partitions()[0]!.id]).sort((a, b) => lsnOf(a) - lsnOf(b));
    const from = lsnOf(merged[10]!);
    const to = lsnOf(merged[40]!);
    world.skippedByOperator(LEFT_EPK, from, to);
    const between = merged.filter((k) => lsnOf(k) > from && lsnOf(k) <= to);
    expect(between.some((k) => inLeft(world, k))).toBe(true);
    expect(between.some((k) => !inLeft(world, k))).toBe(true);
    for (const key of merged) expect(world.isBeforeStart(key)).toBe(between.includes(key) && inLeft(world, key));
  });
});
