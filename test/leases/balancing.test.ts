import { describe, expect, it } from 'vitest';
import { planBalance } from '../../src/leases/balancing.js';
import { HANDOFF_AT, HANDOFF_TO, handoffRequest, isLeaseExpired, UNTAKEN_AT_EPOCH, withoutSignals } from '../../src/leases/protocol/index.js';
import type { Lease } from '../../src/leases/Lease.js';

const NOW = 1_000_000;
const EXP = 60_000;

/** Leases from a compact spec: one letter per lease = its owner ('-' free, lowercase live, uppercase expired). */
function leases(spec: string): Lease[] {
  return [...spec].map((c, i) => ({
    id: `p.${String(i).padStart(3, '0')}`,
    leaseToken: String(i),
    feedRange: undefined,
    owner: c === '-' ? null : c.toLowerCase(),
    continuation: null,
    timestampMs: c === c.toUpperCase() && c !== '-' ? NOW - EXP - 1 : NOW - 1_000,
    epoch: 1,
    mode: 'latestVersion',
    properties: {},
    etag: '"1"',
  }));
}

function counts(all: Lease[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of all) if (l.owner && !isLeaseExpired(l, NOW, EXP)) out[l.owner] = (out[l.owner] ?? 0) + 1;
  return out;
}

describe('planBalance', () => {
  it.each([
    // spec, owner, options, take, steal, release, target
    ['----', 'a', {}, 4, 0, 0, 4],
    ['bb--', 'a', {}, 2, 0, 0, 2],
    ['bbbb', 'a', {}, 0, 2, 0, 2],
    ['bbbbb', 'a', {}, 0, 2, 0, 3], // ceil: b keeps 3
    ['bbbc', 'a', {}, 0, 1, 0, 2], // steal from the most loaded only
    ['bbcc', 'a', {}, 0, 1, 0, 2], // 2,2,0 → one move only (a would be 1, others ≥ 1 … then 2,1,1)
    ['aab', 'a', {}, 0, 0, 0, 2], // 2 vs 1: no move (would bounce)
    ['aabb', 'a', {}, 0, 0, 0, 2],
    ['BBBB', 'a', {}, 4, 0, 0, 4], // all expired: b is not a live owner
    ['BBbb', 'a', {}, 2, 0, 0, 2], // expired first, nothing stolen
    ['--bb', 'a', { maxLeases: 1 }, 1, 0, 0, 1],
    ['aaaa', 'a', { maxLeases: 2 }, 0, 0, 2, 2], // over the cap: hand two back
    ['bbbbbbbb', 'a', { minLeases: 6 }, 0, 4, 0, 6], // min raises the target; steals only while 2 apart
    ['bbbbcccc', 'a', {}, 0, 2, 0, 3],
  ])('%s for %s %j → take %d, steal %d, release %d (target %d)', (spec, owner, options, take, steal, release, target) => {
    const plan = planBalance(leases(spec), owner, NOW, { expirationMs: EXP, ...options });
    expect([plan.take.length, plan.steal.length, plan.release.length, plan.target]).toEqual([take, steal, release, target]);
  });

  it('takes free leases (unowned or expired) before stealing, and never more than its share', () => {
    const plan = planBalance(leases('B-B-bb'), 'a', NOW, { expirationMs: EXP });
    expect(plan.take).toHaveLength(3); // 6 leases, live owners a and b: target 3
    expect(plan.take.every((l) => l.owner === null || isLeaseExpired(l, NOW, EXP))).toBe(true);
    expect(plan.steal).toEqual([]);
  });

  it('two survivors noticing the same expired leases prefer different ones', () => {
    const all = leases('C'.repeat(8) + 'a'.repeat(8) + 'b'.repeat(8));
    const a = planBalance(all, 'a', NOW, { expirationMs: EXP, maxLeases: 9 }).take.map((l) => l.id);
    const b = planBalance(all, 'b', NOW, { expirationMs: EXP, maxLeases: 9 }).take.map((l) => l.id);
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(1);
    const overlapInFour = ['a', 'b'].map((h) => planBalance(all, h, NOW, { expirationMs: EXP, minLeases: 12 }).take.slice(0, 4).map((l) => l.id));
    expect(overlapInFour[0]!.filter((id) => overlapInFour[1]!.includes(id)).length).toBeLessThan(4);
  });

  it('takes a lease handed to it (not taken since) first, and leaves a live one under its name that it does not hold alone', () => {
    const all = leases('aaa--');
    all[1] = { ...all[1]!, properties: { [UNTAKEN_AT_EPOCH]: String(all[1]!.epoch) } }; // handed to a by its owner
    const plan = planBalance(all, 'a', NOW, { expirationMs: EXP, owned: new Set([all[0]!.id]), maxLeases: 2 });
    expect(plan.take.map((l) => l.id)).toEqual([all[1]!.id]);
    // all[2]: under a's name, live, not held by this run: another process may read it (a twin, or a previous
    // run that crashed): taken only once it expires.
    const wide = planBalance(all, 'a', NOW, { expirationMs: EXP, owned: new Set([all[0]!.id]) });
    expect(wide.take.map((l) => l.id)).not.toContain(all[2]!.id);
    expect(wide.nextExpiryMs).toBe(all[2]!.timestampMs + EXP);
    const later = planBalance(all, 'a', all[2]!.timestampMs + EXP, { expirationMs: EXP, owned: new Set([all[0]!.id]) });
    expect(later.take.map((l) => l.id)).toContain(all[2]!.id);
  });

  it('keeps a held lease the listing shows overdue instead of re-taking it (which would fence itself off)', () => {
    const all = leases('AA--');
    const plan = planBalance(all, 'a', NOW, { expirationMs: EXP, owned: new Set([all[0]!.id, all[1]!.id]) });
    expect(plan.take).toHaveLength(2);
    expect(plan.take.every((l) => l.owner === null)).toBe(true);
  });

  describe('handoff requests', () => {
    const ask = (l: Lease, to: string, atMs = NOW - 1_000): Lease => ({
      ...l,
      properties: { ...l.properties, [HANDOFF_TO]: to, [HANDOFF_AT]: String(atMs) },
    });

    it('the owner hands over what another host asked for, and counts it as that host\'s', () => {
      const all = leases('aaaa');
      all[3] = ask(all[3]!, 'b');
      const plan = planBalance(all, 'a', NOW, { expirationMs: EXP });
      expect(plan.handoff.map((l) => l.id)).toEqual([all[3]!.id]);
      expect(plan.liveOwners).toBe(2);
      expect(plan.settled).toBe(false);
    });

    it('a pending request counts for the asker: it neither asks again nor takes more than its share', () => {
      const all = leases('aaaa').map((l, i) => (i >= 2 ? ask(l, 'b') : l));
      const plan = planBalance(all, 'b', NOW, { expirationMs: EXP });
      expect([plan.steal.length, plan.take.length, plan.target]).toEqual([0, 0, 2]);
      expect(plan.settled).toBe(false); // still waiting to adopt them
    });

    it('a newcomer sees other newcomers through their requests', () => {
      const all = leases('a'.repeat(12)).map((l, i) => (i < 4 ? ask(l, 'b') : l));
      const plan = planBalance(all, 'c', NOW, { expirationMs: EXP });
      expect(plan.liveOwners).toBe(3);
      expect(plan.steal).toHaveLength(4);
      expect(plan.steal.every((l) => handoffRequest(l, NOW, EXP) === undefined)).toBe(true);
    });

    it('a request older than an expiration is void (the asker may then force it)', () => {
      const [first, second] = leases('aa');
      const stale = ask(second!, 'b', NOW - EXP);
      expect(handoffRequest(stale, NOW, EXP)).toBeUndefined();
      const plan = planBalance([first!, stale], 'b', NOW, { expirationMs: EXP });
      expect(plan.steal.map((l) => l.properties[HANDOFF_TO])).toEqual(['b']);
      expect(withoutSignals(stale.properties)).toEqual({});
    });
  });

  it('spreads first grabs: two new hosts prefer different free leases', () => {
    const all = leases('-'.repeat(64));
    const a = planBalance(all, 'host-a', NOW, { expirationMs: EXP, maxLeases: 32 }).take.map((l) => l.id);
    const b = planBalance(all, 'host-b', NOW, { expirationMs: EXP, maxLeases: 32 }).take.map((l) => l.id);
    const overlap = a.filter((id) => b.includes(id)).length;
    expect(overlap).toBeLessThan(24); // independent halves overlap by ~16; identical orders would give 32
  });

  it('hosts seeing the same snapshot agree on the moves: no lease is planned for two hosts', () => {
    // Every host is visible (holds a lease); a host holding nothing is invisible to the others, and
    // those races are settled by the etag (see the multi-host simulation).
    const all = leases('a'.repeat(32) + 'b'.repeat(6) + 'c'.repeat(10) + 'de');
    const planned = ['a', 'b', 'c', 'd', 'e'].flatMap((h) => planBalance(all, h, NOW, { expirationMs: EXP }).steal.map((l) => l.id));
    expect(planned.length).toBeGreaterThan(0);
    expect(new Set(planned).size).toBe(planned.length);
  });

  it('converges in one round when every host acts on the same snapshot, then stays put', () => {
    let all = leases('a'.repeat(40) + 'b'.repeat(3) + 'cde');
    const hosts = ['a', 'b', 'c', 'd', 'e'];
    for (let round = 0; round < 4; round++) {
      const moves = hosts.flatMap((h) => planBalance(all, h, NOW, { expirationMs: EXP }).steal.map((l) => [l.id, h] as const));
      if (round > 0) expect(moves).toEqual([]); // nothing moves after the first round
      const to = new Map(moves);
      all = all.map((l) => (to.has(l.id) ? { ...l, owner: to.get(l.id)! } : l));
    }
    const values = Object.values(counts(all));
    expect(values).toHaveLength(5);
    expect(Math.max(...values) - Math.min(...values)).toBeLessThanOrEqual(1);
  });

  it('never bounces: in random snapshots, a move always goes from a host ≥ 2 above the receiver', () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (let trial = 0; trial < 200; trial++) {
      const owners = 'abcdef'.slice(0, 2 + Math.floor(rand() * 5));
      const spec = Array.from({ length: 1 + Math.floor(rand() * 40) }, () => owners[Math.floor(rand() * owners.length)]).join('');
      const all = leases(spec);
      const before = counts(all);
      for (const h of owners) {
        for (const l of planBalance(all, h, NOW, { expirationMs: EXP }).steal) {
          expect((before[l.owner!] ?? 0) - (before[h] ?? 0)).toBeGreaterThanOrEqual(2);
        }
      }
    }
  });

  it('reports when the next lease held elsewhere expires, and whether the share is settled', () => {
    const all = leases('aabb');
    const plan = planBalance(all, 'a', NOW, { expirationMs: EXP });
    expect(plan.settled).toBe(true);
    expect(plan.nextExpiryMs).toBe(NOW - 1_000 + EXP);
    expect(planBalance(leases('aab-'), 'a', NOW, { expirationMs: EXP }).settled).toBe(false);
  });
});
