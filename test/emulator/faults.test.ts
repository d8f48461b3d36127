import { describe, expect, it } from 'vitest';
import { FaultSet, faults, seededRandom, type RequestInfo } from '../../src/emulator/faults.js';

const feedRead: RequestInfo = { method: 'GET', path: '/dbs/db/colls/c/docs', kind: 'changeFeed', databaseId: 'db', containerId: 'c', rangeId: '1' };
const write: RequestInfo = { method: 'POST', path: '/dbs/db/colls/c/docs', kind: 'create', databaseId: 'db', containerId: 'c' };

describe('emulator faults', () => {
  it('hits only matching requests, and retires after `times` hits', () => {
    const set = new FaultSet(seededRandom(1));
    const handle = set.add(faults.throttle(25, { kind: ['changeFeed', 'query'], rangeId: '1' }, 2));
    expect(set.pick(write)).toBeUndefined();
    expect(set.pick({ ...feedRead, rangeId: '2' })).toBeUndefined();
    expect(set.pick(feedRead)).toEqual({ status: 429, substatus: 3200, retryAfterMs: 25 });
    expect(set.pick(feedRead)).toBeDefined();
    expect(set.pick(feedRead)).toBeUndefined();
    expect(handle.hits).toBe(2);
  });

  it('matches paths by substring or pattern, and methods case-insensitively', () => {
    const set = new FaultSet(seededRandom(1));
    set.add({ match: { path: /\/colls\/c\/docs$/, method: 'post' }, action: { status: 503 } });
    expect(set.pick(write)).toEqual({ status: 503 });
    expect(set.pick(feedRead)).toBeUndefined();
  });

  it('draws probabilistic hits from the seeded source, so a run repeats exactly', () => {
    const run = () => {
      const set = new FaultSet(seededRandom(7));
      set.add({ action: { status: 500 }, probability: 0.3 });
      return Array.from({ length: 200 }, () => (set.pick(write) ? 1 : 0));
    };
    const a = run();
    expect(run()).toEqual(a);
    const hits = a.reduce<number>((n, x) => n + x, 0);
    expect(hits).toBeGreaterThan(30);
    expect(hits).toBeLessThan(90);
  });

  it('lets the first matching rule decide, and remove() and clear() retire rules', () => {
    const set = new FaultSet(seededRandom(1));
    const slow = set.add(faults.latency(50));
    set.add(faults.hang());
    expect(set.pick(write)).toEqual({ delayMs: 50 });
    slow.remove();
    expect(set.pick(write)).toEqual({ hang: true });
    set.clear();
    expect(set.pick(write)).toBeUndefined();
  });

  it('rejects rules it cannot apply, saying what to fix', () => {
    const set = new FaultSet(seededRandom(1));
    expect(() => set.add({ action: {} as never })).toThrow(/status, delayMs, hang, reset/);
    expect(() => set.add({ action: { status: 200 } })).toThrow(/400–599/);
    expect(() => set.add({ action: { status: 503 }, times: 0 })).toThrow(/times/);
    expect(() => set.add({ action: { status: 503 }, probability: 2 })).toThrow(/probability/);
  });
});
