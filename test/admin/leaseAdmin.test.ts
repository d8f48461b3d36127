import { concatMap, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { listLeases, releaseLeases, resetLeases, rewindLeases } from '../../src/admin/index.js';
import type { Change } from '../../src/core/Change.js';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { InvalidOptionsError, LeaseConflictError, LeaseInUseError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import type { Lease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { eachChange } from '../../src/operators/eachChange.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import { advanceUntil, idsOf, lsnOfPosition, memoryFeed } from '../support/memory.js';
import { withReplace } from '../support/replacing.js';

interface Doc {
  id: string;
  n: number;
}

const PREFIX = 'admin.';
const T0 = Date.UTC(2026, 10, 23, 12, 0, 0);

function lease(token: string, fields: Partial<Lease> = {}): Omit<Lease, 'etag'> {
  return {
    id: PREFIX + token,
    leaseToken: token,
    feedRange: { minInclusive: '', maxExclusive: 'FF' },
    owner: null,
    continuation: null,
    timestampMs: T0,
    epoch: 1,
    mode: 'latestVersion',
    properties: {},
    ...fields,
  };
}

async function storeWith(...leases: Omit<Lease, 'etag'>[]): Promise<MemoryLeaseStore> {
  const store = new MemoryLeaseStore();
  for (const l of leases) await store.createIfAbsent(l);
  await store.createIfAbsent(lease('.info', { feedRange: undefined }));
  return store;
}

describe('lease administration on a lease store', () => {
  const now = () => T0 + 5_000;

  it('lists leases in token order with owner, state and age, leaving the bootstrap markers out', async () => {
    const store = await storeWith(
      lease('10', { owner: 'host-a', timestampMs: T0 }),
      lease('2', { owner: 'host-b', timestampMs: T0 - 120_000 }),
      lease('1', { continuation: 'p' }),
    );
    const { leases } = await listLeases({ leases: store, leasePrefix: PREFIX, now });
    expect(leases.map((l) => [l.leaseToken, l.owner, l.state, l.ageMs])).toEqual([
      ['1', null, 'free', 5_000],
      ['2', 'host-b', 'expired', 125_000],
      ['10', 'host-a', 'owned', 5_000],
    ]);
  });

  it('refuses to rewind, release or reset while a live host owns a lease, and writes nothing', async () => {
    const store = await storeWith(lease('0', { owner: 'host-a', continuation: 'old' }), lease('1', { continuation: 'old' }));
    const before = JSON.stringify(store.snapshot());
    const common = { leases: store, leasePrefix: PREFIX, now };
    await expect(rewindLeases({ ...common, to: { position: 'x' }, leaseTokens: ['0'] })).rejects.toThrow(LeaseInUseError);
    await expect(releaseLeases(common)).rejects.toThrow(/owned by a live host: 0 \(owner host-a\)/);
    await expect(resetLeases(common)).rejects.toThrow(LeaseInUseError);
    expect(JSON.stringify(store.snapshot())).toBe(before);
  });

  it('with force, fences the owner: owner cleared, epoch raised, so its etag-conditioned write is refused', async () => {
    const store = await storeWith(lease('0', { owner: 'host-a', continuation: 'old', epoch: 4 }));
    const held = (await store.read(`${PREFIX}0`))!;
    const [change] = await rewindLeases({ leases: store, leasePrefix: PREFIX, now, to: { position: 'new' }, leaseTokens: ['0'], force: true });
    expect(change).toMatchObject({ leaseToken: '0', previousOwner: 'host-a', fenced: true, previousContinuation: 'old', continuation: 'new' });
    const after = (await store.read(`${PREFIX}0`))!;
    expect(after).toMatchObject({ owner: null, epoch: 5, continuation: 'new' });
    // The deposed owner writes its old position back with the etag it had: refused.
    await expect(store.replace({ ...held, continuation: 'old' })).rejects.toThrow(/changed by someone else/);
  });

  it('release and rewind clear the halt signal of a halted partition\'s lease, unowned as it is (an operator acts on purpose)', async () => {
    const signal = { 'rxfeed.haltedAtEpoch': '3', 'rxfeed.halts': '2', other: 'kept' };
    const store = await storeWith(lease('0', { epoch: 3, properties: signal }), lease('1', { epoch: 3, properties: signal }), lease('2', { epoch: 2 }));
    const released = await releaseLeases({ leases: store, leasePrefix: PREFIX, now });
    expect(released.map((c) => c.leaseToken)).toEqual(['0', '1']);
    expect((await store.read(`${PREFIX}0`))!).toMatchObject({ owner: null, epoch: 4, properties: { other: 'kept' } });
    expect((await store.read(`${PREFIX}0`))!.properties).not.toHaveProperty('rxfeed.halts');
    // A plain unowned lease is still left alone.
    expect((await store.read(`${PREFIX}2`))!.epoch).toBe(2);
    await store.replace({ ...(await store.read(`${PREFIX}1`))!, properties: signal });
    await rewindLeases({ leases: store, leasePrefix: PREFIX, now, to: { position: 'p' }, leaseTokens: ['1'] });
    expect((await store.read(`${PREFIX}1`))!.properties).toEqual({ other: 'kept' });
  });

  it('re-checks a lease whose etag changed under it and refuses when a host acquired it meanwhile', async () => {
    const store = await storeWith(lease('0', { timestampMs: T0 - 600_000 }));
    let raced = false;
    const racing = withReplace(store, async (l, replace) => {
      if (!raced) {
        // Another host takes the lease between our read and our write.
        raced = true;
        const current = (await store.read(l.id))!;
        await store.replace({ ...current, owner: 'host-z', timestampMs: now(), epoch: current.epoch + 1 });
      }
      return replace(l);
    });
    await expect(rewindLeases({ leases: racing, leasePrefix: PREFIX, now, to: { position: 'p' }, leaseTokens: ['0'] })).rejects.toThrow(
      /0 \(owner host-z\)/,
    );
    expect((await store.read(`${PREFIX}0`))!.owner).toBe('host-z');
  });

  it("never touches the leases of a processor whose prefix begins with this one's ('admin.v2.' under 'admin.')", async () => {
    const store = await storeWith(lease('0'), lease('1', { continuation: 'mine' }));
    const neighbour = { ...lease('1', { continuation: 'theirs' }), id: `${PREFIX}v2.1` };
    await store.createIfAbsent(neighbour);
    const common = { leases: store, leasePrefix: PREFIX, now };
    expect((await listLeases(common)).leases.map((l) => l.leaseToken)).toEqual(['0', '1']);
    expect((await rewindLeases({ ...common, to: { position: 'x' }, leaseTokens: ['1'] })).map((c) => c.leaseToken)).toEqual(['1']);
    await resetLeases(common);
    expect(store.snapshot().map((l) => [l.id, l.continuation]).sort()).toEqual([[`${PREFIX}.floor`, null], [`${PREFIX}v2.1`, 'theirs']]);
  });

  it('reset deletes every lease and the markers, so the next start bootstraps again, and keeps the highest epoch as the floor', async () => {
    const store = await storeWith(lease('0', { epoch: 7 }), lease('1', { owner: 'dead', timestampMs: T0 - 600_000, epoch: 12 }));
    const changes = await resetLeases({ leases: store, leasePrefix: PREFIX, now });
    expect(changes.map((c) => c.leaseToken)).toEqual(['0', '1']);
    expect((await store.list(PREFIX)).leases.map((l) => [l.id, l.epoch])).toEqual([[`${PREFIX}.floor`, 12]]);
    expect((await listLeases({ leases: store, leasePrefix: PREFIX, now })).leases).toEqual([]); // the floor is no lease
    // A second reset never lowers it.
    await store.createIfAbsent(lease('0', { epoch: 3 }));
    await resetLeases({ leases: store, leasePrefix: PREFIX, now });
    expect((await store.read(`${PREFIX}.floor`))!.epoch).toBe(12);
  });

  it('a reset that fails part way has raised the floor above every epoch it deleted (run again, epochs never go back)', async () => {
    const store = await storeWith(lease('0', { epoch: 20 }), lease('1', { epoch: 3 }));
    // Lease 1 keeps changing under the reset (a halted partition's lease, taken and given back again and again).
    const busy = new Proxy(store, {
      get(target, key) {
        if (key === 'delete' || key === 'tombstone') {
          return (l: Lease) => (l.leaseToken === '1' ? Promise.reject(new LeaseConflictError(l.id, 'changed')) : target[key](l));
        }
        const value = Reflect.get(target, key) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    await expect(resetLeases({ leases: busy, leasePrefix: PREFIX, now, force: true })).rejects.toThrow(LeaseConflictError);
    expect(await store.read(`${PREFIX}0`)).toBeUndefined();
    expect((await store.read(`${PREFIX}.floor`))!.epoch).toBe(20);
    // Run again once lease 1 settles: it is deleted, the floor stays at 20 for the next bootstrap.
    await resetLeases({ leases: store, leasePrefix: PREFIX, now, force: true });
    expect((await store.list(PREFIX)).leases.map((l) => [l.id, l.epoch])).toEqual([[`${PREFIX}.floor`, 20]]);
  });

  it('reset leaves a tombstone per lease: a create sent before it that lands after it is refused below the epoch; list never shows one; the bootstrap above the floor takes its place', async () => {
    const store = await storeWith(lease('0', { epoch: 7 }), lease('1', { epoch: 12 }));
    await resetLeases({ leases: store, leasePrefix: PREFIX, now });
    // A bootstrap's create (or a split child's) sent before the reset by a host that paused, landing now.
    expect(await store.createIfAbsent(lease('0', { epoch: 1, owner: 'zombie' }))).toBeUndefined();
    expect(await store.read(`${PREFIX}0`)).toBeUndefined();
    expect((await listLeases({ leases: store, leasePrefix: PREFIX, now })).leases).toEqual([]);
    // The next bootstrap creates above the floor (12): free at the floor, claimed one above it.
    expect(await store.createIfAbsent(lease('0', { epoch: 12 }))).toMatchObject({ epoch: 12 });
    expect(await store.createIfAbsent(lease('1', { epoch: 13, owner: 'a' }))).toMatchObject({ epoch: 13 });
    expect((await listLeases({ leases: store, leasePrefix: PREFIX, now })).leases.map((l) => [l.leaseToken, l.epoch])).toEqual([
      ['0', 12],
      ['1', 13],
    ]);
    // Reset again: the tombstones move up with the epochs deleted.
    await resetLeases({ leases: store, leasePrefix: PREFIX, now, force: true });
    expect(await store.createIfAbsent(lease('1', { epoch: 12 }))).toBeUndefined();
  });

  it('a refused reset (a live owner, no force) writes nothing, not even the floor', async () => {
    const store = await storeWith(lease('0', { epoch: 9, owner: 'live', timestampMs: T0 + 4_000 }));
    await expect(resetLeases({ leases: store, leasePrefix: PREFIX, now })).rejects.toThrow(LeaseInUseError);
    expect(await store.read(`${PREFIX}.floor`)).toBeUndefined();
  });

  it('explains bad input: empty prefix, unknown token, a position for many leases, a time without a source', async () => {
    const store = await storeWith(lease('0'), lease('1'));
    await expect(listLeases({ leases: store, leasePrefix: '' })).rejects.toThrow(InvalidOptionsError);
    await expect(releaseLeases({ leases: store, leasePrefix: PREFIX, leaseTokens: ['7'] })).rejects.toThrow(/no lease under prefix 'admin.' for 7/);
    await expect(rewindLeases({ leases: store, leasePrefix: PREFIX, to: { position: 'p' } })).rejects.toThrow(/exactly one lease/);
    await expect(rewindLeases({ leases: store, leasePrefix: PREFIX, to: new Date() })).rejects.toThrow(/needs the monitored source/);
  });
});

describe('lease administration in the .NET lease layout (leaseScheme: dotnet)', () => {
  const now = () => T0 + 5_000;
  // A .NET prefix: processor name, account host, database and container _rid (dotnetLeasePrefix).
  const NET = 'orders-viewshop.documents.azure.com_AbCdAA==_AbCdAKl9dQA=';
  const naming = { leasePrefix: NET, leaseScheme: 'dotnet' as const };
  const dotnetLease = (token: string, fields: Partial<Lease> = {}) => lease(token, { id: `${NET}..${token}`, epoch: 0, ...fields });
  // .NET's `{ id }` store marker and `{ id, ttl }` lock read as leases with an empty token; rxfeed's have an owner.
  const marker = (id: string, fields: Partial<Lease> = {}) => lease('', { id, feedRange: undefined, epoch: 0, ...fields });

  async function dotnetStore(...leases: Omit<Lease, 'etag'>[]): Promise<MemoryLeaseStore> {
    const store = new MemoryLeaseStore();
    for (const l of [
      ...leases,
      marker(`${NET}.info`),
      marker(`${NET}.lock`, { owner: 'host-x' }),
      // neighbours that must stay untouched: another .NET processor, and an rxfeed processor
      lease('0', { id: `other${NET.slice(11)}..0` }),
      marker(`other${NET.slice(11)}.info`),
      lease('0'),
    ]) {
      await store.createIfAbsent(l);
    }
    return store;
  }
  const idsIn = (store: MemoryLeaseStore) => store.snapshot().map((l) => l.id).sort();

  it('lists exactly the leases under <prefix>.., with owners and checkpoints, never the .info / .lock markers', async () => {
    const store = await dotnetStore(
      dotnetLease('0', { owner: 'dotnet-host', continuation: '"12"' }),
      dotnetLease('1', { owner: 'dead', timestampMs: T0 - 600_000, continuation: '"40"' }),
      dotnetLease('2'),
    );
    const { leases, corrupt } = await listLeases({ leases: store, ...naming, now });
    expect(leases.map((l) => [l.id, l.leaseToken, l.owner, l.state, l.continuation])).toEqual([
      [`${NET}..0`, '0', 'dotnet-host', 'owned', '"12"'],
      [`${NET}..1`, '1', 'dead', 'expired', '"40"'],
      [`${NET}..2`, '2', null, 'free', null],
    ]);
    expect(corrupt).toEqual([]);
  });

  it('rewinds and releases only the selected .NET leases, refusing while a live host owns one unless forced', async () => {
    const store = await dotnetStore(dotnetLease('0', { owner: 'dotnet-host', continuation: '"12"' }), dotnetLease('1', { owner: 'dead', timestampMs: T0 - 600_000 }));
    const before = JSON.stringify(store.snapshot());
    const etags = new Map(store.snapshot().map((l) => [l.id, l.etag]));
    await expect(releaseLeases({ leases: store, ...naming, now })).rejects.toThrow(/owned by a live host: 0 \(owner dotnet-host\)/);
    await expect(rewindLeases({ leases: store, ...naming, now, to: { position: '"1"' }, leaseTokens: ['0'] })).rejects.toThrow(LeaseInUseError);
    expect(JSON.stringify(store.snapshot())).toBe(before);

    const [rewound] = await rewindLeases({ leases: store, ...naming, now, to: { position: '"1"' }, leaseTokens: ['1'] });
    expect(rewound).toMatchObject({ leaseToken: '1', previousOwner: 'dead', fenced: false, continuation: '"1"' });
    const released = await releaseLeases({ leases: store, ...naming, now, force: true });
    expect(released.map((c) => [c.leaseToken, c.fenced])).toEqual([['0', true]]);
    const changed = store.snapshot().filter((l) => etags.get(l.id) !== l.etag);
    expect(changed.map((l) => l.id).sort()).toEqual([`${NET}..0`, `${NET}..1`]);
  });

  it('reset deletes the .NET leases and both markers (not under <prefix>..) and nothing of the neighbours', async () => {
    const store = await dotnetStore(dotnetLease('0', { owner: 'dotnet-host' }), dotnetLease('1'));
    await expect(resetLeases({ leases: store, ...naming, now })).rejects.toThrow(LeaseInUseError);
    expect(idsIn(store)).toContain(`${NET}.info`);
    const deleted = await resetLeases({ leases: store, ...naming, now, force: true });
    expect(deleted.map((c) => [c.leaseToken, c.fenced, c.continuation])).toEqual([
      ['0', true, undefined],
      ['1', false, undefined],
    ]);
    expect(idsIn(store)).toEqual([`${PREFIX}0`, `other${NET.slice(11)}..0`, `other${NET.slice(11)}.info`].sort()); // epochs were 0: no floor
  });

  it('reset leaves no tombstone in the .NET scheme: the .NET processor reads every document under <prefix>.. as a lease', async () => {
    const store = await dotnetStore(dotnetLease('0', { epoch: 5 }));
    await resetLeases({ leases: store, ...naming, now, force: true });
    expect(await store.createIfAbsent(dotnetLease('0', { epoch: 0 }))).toBeDefined(); // as a .NET host's bootstrap would
    // The epoch is kept outside <prefix>.. instead, where .NET does not list: rxfeed hosts never own the lease below it.
    expect((await store.read(`${NET}.gone.0`))?.epoch).toBe(5);
  });

  it('explains a .NET scheme without its prefix, with the separator in it, or an unknown scheme', async () => {
    const store = await dotnetStore();
    await expect(listLeases({ leases: store, leaseScheme: 'dotnet' })).rejects.toThrow(/leaseScheme: 'dotnet' needs the prefix .* pass leasePrefix: await dotnetLeasePrefix/);
    await expect(resetLeases({ leases: store, leasePrefix: `${NET}..`, leaseScheme: 'dotnet', force: true })).rejects.toThrow(/without the '\.\.' separator/);
    await expect(releaseLeases({ leases: store, leasePrefix: NET, leaseScheme: 'java' as never })).rejects.toThrow(/must be 'rxfeed' or 'dotnet'/);
    expect(store.snapshot()).toHaveLength(5);
  });
});

describe('MemorySource.positionAt', () => {
  it('gives positions from which a read returns exactly the changes at or after the target', async () => {
    let clock = T0;
    const source = new MemorySource<Doc>({ partitions: 1, now: () => clock });
    const [partition] = await source.listPartitions();
    for (let i = 0; i < 6; i++) {
      clock = T0 + i * 1_000;
      source.write({ id: `d${i}`, n: i });
    }
    const readFrom = async (position: string) =>
      (await source.read({ partition: partition!, from: { position }, maxItemCount: 100 })).changes.map((c) => c.id);
    expect(await readFrom(await source.positionAt(partition!, 'beginning'))).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(await readFrom(await source.positionAt(partition!, new Date(T0 + 3_000)))).toEqual(['d3', 'd4', 'd5']);
    expect(await readFrom(await source.positionAt(partition!, new Date(T0 + 60_000)))).toEqual([]);
    expect(await readFrom(await source.positionAt(partition!, 'now'))).toEqual([]);
  });
});

describe('rewinding a running processor', () => {
  let subscription: Subscription | undefined;
  beforeEach(() => vi.useFakeTimers({ now: T0 }));
  afterEach(() => {
    subscription?.unsubscribe();
    vi.useRealTimers();
  });

  it('with force, replays from the beginning on the running host and no old position is written back', async () => {
    const { source, leases, feed } = memoryFeed<Doc>({ partitions: 2, prefix: PREFIX, options: { leaseRenewIntervalMs: 1_000, leaseExpirationMs: 5_000 } });
    for (let i = 0; i < 40; i++) source.write({ id: `d${i}`, n: i });
    const seen: ChangeBatch<Doc>[] = [];
    subscription = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 100 })).subscribe((b) => seen.push(b as ChangeBatch<Doc>));
    const checkpointed = async () => (await leases.list(PREFIX)).leases.filter((l) => !l.leaseToken.startsWith('.'));
    let done = false;
    const caughtUp = async () => {
      const all = await checkpointed();
      done = all.length === 2 && all.every((l) => lsnOfPosition(l.continuation) === source.latestLsn(l.leaseToken));
    };
    await advanceUntil(() => (void caughtUp(), done));
    expect(new Set(idsOf(seen)).size).toBe(40);

    await expect(rewindLeases({ leases, source, leasePrefix: PREFIX, to: 'beginning', leaseExpirationMs: 5_000 })).rejects.toThrow(LeaseInUseError);
    const changes = await rewindLeases({ leases, source, leasePrefix: PREFIX, to: 'beginning', leaseExpirationMs: 5_000, force: true });
    expect(changes.every((c) => c.fenced)).toBe(true);

    const before = seen.length;
    done = false;
    await advanceUntil(() => (void caughtUp(), done && idsOf(seen.slice(before)).length >= 40));
    // Every change is delivered again, and the checkpoints only moved forward from the rewound position.
    expect(new Set(idsOf(seen.slice(before)))).toEqual(new Set(idsOf(seen.slice(0, before))));
  });
});

describe('resetting a running processor (reset --force)', () => {
  let subscription: Subscription | undefined;
  beforeEach(() => vi.useFakeTimers({ now: T0 }));
  afterEach(() => {
    subscription?.unsubscribe();
    vi.useRealTimers();
  });

  it('its host loses the lease, bootstraps again above the epoch floor, and dead-letter fences of the old epochs stay consistent', async () => {
    const source = new MemorySource<Doc>({ partitions: 1 });
    const range = source.partitions()[0]!.range;
    const leases = await storeWith(lease('0', { feedRange: range, epoch: 200 }));
    // Dead letters written by an earlier owner of the partition, at epoch 200: the store fences the range at 200.
    const deadLetters = new MemoryDeadLetterStore<Doc>();
    await deadLetters.write([], { leaseToken: '0', range, epoch: 200 });
    const events: FeedEvent[] = [];
    const done: string[] = [];
    const feed = createChangeFeed<Doc>({ source, leases, instanceName: 'host-a', leasePrefix: PREFIX, pollIntervalMs: 1_000, maxItemCount: 1, events: (e) => events.push(e) });
    subscription = feed.changes$
      .pipe(
        eachChange(
          concatMap(async (c: Change<Doc>) => {
            if (c.id === 'poison') throw new Error('cannot process (injected)');
            done.push(c.id);
            return c;
          }),
          { onFailure: { retry: { attempts: 1 }, deadLetter: deadLetters } },
        ),
        checkpointEvery({ count: 1, ms: 10 }),
      )
      .subscribe();
    await vi.advanceTimersByTimeAsync(2_000);
    expect((await leases.read(`${PREFIX}0`))!.epoch).toBe(201);

    await resetLeases({ leases, leasePrefix: PREFIX, force: true });
    expect((await leases.read(`${PREFIX}.floor`))!.epoch).toBe(201);
    source.upsert({ id: 'poison', n: 0 });
    source.upsert({ id: 'after', n: 1 });
    await vi.advanceTimersByTimeAsync(60_000);

    expect(events.filter((e) => e.type === 'leaseLost').map((e) => e.lease)).toEqual(['0']);
    const retaken = (await leases.read(`${PREFIX}0`))!;
    expect(retaken).toMatchObject({ owner: 'host-a', epoch: 202 });
    expect((await deadLetters.list()).map((l) => l.documentId)).toEqual(['poison']);
    expect(done).toContain('after');
    expect(events.filter((e) => e.type === 'error' && e.error.name === 'DeadLetterFencedError')).toEqual([]);
  });
});
