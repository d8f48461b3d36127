import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import {
  clearHaltOnProgress,
  HALT_BACKOFF_CAP_MS,
  haltBackoffMs,
  haltBackoffUntil,
  HALTED_AT_EPOCH,
  HALTS,
  haltsHeldBack,
  handBack,
  HANDOFF_TO,
  inheritedProperties,
  isHaltRelease,
  withHalt,
  withoutSignals,
} from '../../src/leases/protocol/index.js';

const ACQUIRE = 13_000;

/** A lease in local time: `timestampMs` is when this host first saw the version. */
function lease(fields: Partial<Lease> = {}): Lease {
  return {
    id: 'p.0',
    leaseToken: '0',
    feedRange: undefined,
    owner: null,
    continuation: 'c7',
    timestampMs: 1_000,
    epoch: 4,
    mode: 'latestVersion',
    properties: {},
    etag: '"1"',
    ...fields,
  };
}

const halted = (halts: number, fields: Partial<Lease> = {}) => lease({ properties: { [HALTED_AT_EPOCH]: '4', [HALTS]: String(halts) }, ...fields });

describe('the halt backoff rule', () => {
  it('grows as the acquire interval × 2^halts, up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => haltBackoffMs(n, ACQUIRE))).toEqual([26_000, 52_000, 104_000, 208_000, HALT_BACKOFF_CAP_MS, HALT_BACKOFF_CAP_MS]);
    expect(haltBackoffMs(1_000, ACQUIRE)).toBe(HALT_BACKOFF_CAP_MS);
    // A count that is not one (a hand-edited document) counts as one halt.
    expect(haltBackoffMs(0, 100)).toBe(200);
  });

  it('holds a halted release for the backoff from when this host first saw it, then lets it go', () => {
    const l = halted(2);
    expect(haltBackoffUntil(l, 1_000, ACQUIRE)).toBe(53_000);
    expect(haltBackoffUntil(l, 52_999, ACQUIRE)).toBe(53_000);
    expect(haltBackoffUntil(l, 53_000, ACQUIRE)).toBeUndefined();
  });

  it('holds only the version the halting owner released: not once taken (owned, or epoch raised), nor without the signal', () => {
    expect(isHaltRelease(halted(1))).toBe(true);
    expect(isHaltRelease(halted(1, { owner: 'b', epoch: 5 }))).toBe(false);
    expect(isHaltRelease(halted(1, { epoch: 5 }))).toBe(false); // an admin release, or its next owner crashed
    expect(isHaltRelease(lease())).toBe(false);
    expect(haltBackoffUntil(halted(1, { epoch: 5 }), 1_000, ACQUIRE)).toBeUndefined();
  });

  it('lists the leases held back and when the first backoff ends', () => {
    const a = halted(1, { id: 'p.a' });
    const b = halted(3, { id: 'p.b' });
    const free = lease({ id: 'p.c' });
    const held = haltsHeldBack([a, b, free], 2_000, ACQUIRE);
    expect([...held.ids]).toEqual(['p.a', 'p.b']);
    expect(held.untilMs).toBe(27_000);
    expect(haltsHeldBack([free], 2_000, ACQUIRE)).toEqual({ ids: new Set(), untilMs: undefined });
  });

  it('counts consecutive halts, keeps the signal through a change of hands, and never passes it to children', () => {
    const once = withHalt({ other: 'x' }, 4);
    expect(once).toEqual({ other: 'x', [HALTED_AT_EPOCH]: '4', [HALTS]: '1' });
    expect(withHalt(once, 5)).toMatchObject({ [HALTED_AT_EPOCH]: '5', [HALTS]: '2' });
    expect(withoutSignals({ ...once, [HANDOFF_TO]: 'b' })).toEqual(once);
    expect(inheritedProperties(once)).toEqual({ other: 'x' });
  });

  it('is cleared by a checkpoint past the halt position, not by one at it', () => {
    const taken = halted(2, { owner: 'b', epoch: 5 });
    expect(clearHaltOnProgress(taken, 'c7')).toBe(taken);
    expect(clearHaltOnProgress(taken, 'c9').properties).toEqual({});
    const plain = lease({ owner: 'b' });
    expect(clearHaltOnProgress(plain, 'c9')).toBe(plain);
  });

  it('a halting release writes the signal at the epoch of the halt; another release to nobody keeps a count without a backoff', async () => {
    const store = new MemoryLeaseStore();
    const owned = (await store.createIfAbsent({ ...lease({ owner: 'a' }), properties: { [HALTS]: '1', [HALTED_AT_EPOCH]: '3' } }))!;
    await handBack({ store, owner: 'a', epoch: 4, now: () => 5_000, requester: () => undefined, halted: true }, owned);
    const released = (await store.read('p.0'))!;
    expect(released).toMatchObject({ owner: null, epoch: 4, properties: { [HALTED_AT_EPOCH]: '4', [HALTS]: '2' } });
    expect(isHaltRelease(released)).toBe(true);
    // Taken by another host (epoch 5), which stops before it got past the change: the count stays, no backoff.
    const retaken = await store.replace({ ...released, owner: 'b', epoch: 5 });
    await handBack({ store, owner: 'b', epoch: 5, now: () => 6_000, requester: () => undefined }, retaken);
    const stopped = (await store.read('p.0'))!;
    expect(stopped).toMatchObject({ owner: null, epoch: 5, properties: { [HALTED_AT_EPOCH]: '4', [HALTS]: '2' } });
    expect(isHaltRelease(stopped)).toBe(false);
  });
});
