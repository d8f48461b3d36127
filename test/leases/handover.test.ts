import { describe, expect, it } from 'vitest';
import { TransientError } from '../../src/errors/index.js';
import { announceRelease, onlyNoticeChanged, RELEASED_AT, RELEASED_BY, releaseNotice, withoutNotice, withoutSignals } from '../../src/leases/protocol/index.js';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';

const NOW = 1_700_000_000_000;
const EXPIRY = 60_000;

/** Stores one lease per `[owner, ms since last write]` and returns them as listed. */
async function seed(store: MemoryLeaseStore, spec: readonly [string | null, number][]): Promise<readonly Lease[]> {
  for (const [i, [owner, age]] of spec.entries()) {
    await store.createIfAbsent({
      id: `p.${i}`,
      leaseToken: String(i),
      feedRange: undefined,
      owner,
      continuation: null,
      timestampMs: NOW - age,
      epoch: 1,
      mode: undefined,
      properties: {},
    });
  }
  return (await store.list('p.')).leases;
}

const noticed = (leases: readonly Lease[]) => leases.filter((l) => releaseNotice(l) !== undefined).map((l) => l.id).sort();

describe('announceRelease', () => {
  it('writes a notice into the two least and the two most recently written leases of each live host, nothing else', async () => {
    const store = new MemoryLeaseStore();
    const listed = await seed(store, [
      ['a', 1_000], ['a', 5_000], ['a', 9_000], ['a', 20_000], ['a', 30_000], ['a', 39_000], // p.0 … p.5
      ['b', 2_000], // p.6: a host with one lease gets one notice
      [null, 0], // p.7: free
      ['c', 3_000], // p.8: the host that released
      ['d', EXPIRY + 1], // p.9: expired, its host is gone
    ]);
    expect(await announceRelease(store, listed, 'c', NOW, EXPIRY)).toBe(5);
    const after = (await store.list('p.')).leases;
    expect(noticed(after)).toEqual(['p.0', 'p.1', 'p.4', 'p.5', 'p.6']);
    const lease = after.find((l) => l.id === 'p.5')!;
    expect(lease.properties).toEqual({ [RELEASED_BY]: 'c', [RELEASED_AT]: String(NOW) });
    // Only properties change: the owner's fencing state is untouched.
    expect(lease).toMatchObject({ owner: 'a', epoch: 1, continuation: null, timestampMs: NOW - 39_000 });
  });

  it('drops a notice that meets a concurrent write (that owner is writing now) and fails on other errors', async () => {
    const store = new MemoryLeaseStore();
    const listed = await seed(store, [['a', 1_000], ['b', 1_000]]);
    await store.replace({ ...listed[0]!, continuation: 'moved' }); // a wrote after the listing
    expect(await announceRelease(store, listed, 'c', NOW, EXPIRY)).toBe(1);
    expect(noticed((await store.list('p.')).leases)).toEqual(['p.1']);

    const failing = new MemoryLeaseStore();
    const seeded = await seed(failing, [['a', 1_000]]);
    failing.replace = () => Promise.reject(new TransientError('service unavailable (injected)'));
    await expect(announceRelease(failing, seeded, 'c', NOW, EXPIRY)).rejects.toBeInstanceOf(TransientError);
  });

  it('a notice is a signal like a handoff request: read once, never copied to a new owner or a child', () => {
    const properties = { keep: 'x', [RELEASED_BY]: 'c', [RELEASED_AT]: '1' };
    expect(withoutNotice(properties)).toEqual({ keep: 'x' });
    expect(withoutSignals(properties)).toEqual({ keep: 'x' });
  });
});

describe('onlyNoticeChanged', () => {
  const listed: Lease = {
    id: 'p.0',
    leaseToken: '0',
    feedRange: undefined,
    owner: 'a',
    continuation: '"5"',
    timestampMs: NOW,
    epoch: 3,
    mode: undefined,
    properties: { 'rxfeed.load': '2' },
    etag: '"1"',
  };
  const notice = { [RELEASED_BY]: 'c', [RELEASED_AT]: String(NOW) };

  it('is true when only a release notice was added or changed', () => {
    expect(onlyNoticeChanged(listed, { ...listed, etag: '"2"', properties: { ...listed.properties, ...notice } })).toBe(true);
    const noticed = { ...listed, properties: { ...listed.properties, ...notice } };
    expect(onlyNoticeChanged(noticed, { ...noticed, etag: '"3"', properties: { ...listed.properties, [RELEASED_BY]: 'd', [RELEASED_AT]: '1' } })).toBe(true);
  });

  it.each([
    ['renewed', { timestampMs: NOW + 1 }],
    ['taken (new owner and epoch)', { owner: 'b', epoch: 4 }],
    ['released', { owner: null }],
    ['checkpointed', { continuation: '"6"' }],
    ['asked for (a handoff request)', { properties: { ...listed.properties, 'rxfeed.handoffTo': 'b', 'rxfeed.handoffAt': String(NOW) } }],
    ['with its load changed', { properties: { 'rxfeed.load': '9' } }],
  ])('is false when the lease was %s', (_what, change) => {
    expect(onlyNoticeChanged(listed, { ...listed, etag: '"2"', ...change })).toBe(false);
  });
});
