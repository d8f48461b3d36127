/**
 * A bootstrap that takes the lock a moment after another host's bootstrap finished (between its `.info` read
 * and its lock) must see the leases that one created: listed before its lock, it created leases for its own
 * listing of the partitions beside them (seed 43 of `--faults all --policy halt`: a gone parent beside its
 * children, the parent then read above their epoch).
 */
import { describe, expect, it } from 'vitest';
import type { Partition } from '../../src/core/Partition.js';
import { bootstrapLeases, type BootstrapContext } from '../../src/leases/coordinator/bootstrap.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { infoId, leaseDocument, lockId, markerDocument, namingOf } from '../../src/leases/protocol/index.js';
import { sleep } from '../../src/internal/wait.js';
import { laggingLeaseStore, VirtualClock } from '../support/faults/index.js';

const WHOLE = { minInclusive: '', maxExclusive: 'FF' };
const parent: Partition = { id: '2', range: WHOLE };
const children: Partition[] = [
  { id: '3', range: { minInclusive: '', maxExclusive: '7F' }, parents: ['2'] },
  { id: '4', range: { minInclusive: '7F', maxExclusive: 'FF' }, parents: ['2'] },
];
const quietLog = Object.assign(() => undefined, { enabled: false }) as unknown as BootstrapContext['log'];

/** A bootstrap context with this file's settings (a 1 s expiration, claim 1, no log, no waits); `fields` set the rest. */
function bootstrapContext(fields: Pick<BootstrapContext, 'store' | 'naming' | 'retryMs' | 'listPartitions'> & Partial<BootstrapContext>): BootstrapContext {
  return {
    expirationMs: 1_000,
    stopped: () => false,
    delay: async () => undefined,
    log: quietLog,
    warn: () => undefined,
    claim: 1,
    clock: () => 0,
    background: () => undefined,
    ...fields,
  };
}

/** A store that hands each call to `inner` (its five methods only), but for the methods `overrides` gives. */
function passThrough(inner: LeaseStore, overrides: Partial<LeaseStore>): LeaseStore {
  return {
    list: (prefix) => inner.list(prefix),
    read: (id) => inner.read(id),
    replace: (lease) => inner.replace(lease),
    delete: (lease) => inner.delete(lease),
    createIfAbsent: (lease: NewLease) => inner.createIfAbsent(lease),
    ...overrides,
  };
}

/**
 * Hosts on one virtual clock whose reads lag the store's writes by 300 ms: `context` makes a host's bootstrap
 * context (its store a lagging session by default, its listing the parent only by default), `finish` stops
 * their background work and answers the partitions left with leases.
 */
function laggingHosts() {
  const clock = new VirtualClock(0);
  const inner = new MemoryLeaseStore();
  const lagging = laggingLeaseStore(inner, clock, 300);
  const stop = new AbortController();
  const never = new AbortController().signal;
  const background: Promise<unknown>[] = [];
  const context = (owner: string, store: LeaseStore = lagging.session(owner), partitions: readonly Partition[] = [parent]): BootstrapContext =>
    bootstrapContext({
      store,
      naming: namingOf('p.', 'rxfeed', owner, 'latestVersion', () => clock.now()),
      retryMs: 100,
      listPartitions: async () => partitions,
      stopped: () => stop.signal.aborted,
      delay: (ms) => sleep(ms, clock, stop.signal),
      clock: () => clock.now(),
      background: (work) => background.push(work),
    });
  const finish = async (): Promise<string[]> => {
    stop.abort();
    await Promise.all(background);
    return inner.snapshot().map((l) => l.leaseToken).filter((t) => !t.startsWith('.')).sort();
  };
  return { clock, inner, lagging, never, context, finish };
}

describe('bootstrap after another host just finished one', () => {
  it('lists the leases once its lock is taken: the other host\'s leases cover its partitions, it creates none', async () => {
    const inner = new MemoryLeaseStore();
    const naming = (owner: string) => namingOf('p.', 'rxfeed', owner, 'latestVersion', () => 1_000);
    const a = naming('a');
    let finished = false;
    /** Host a's bootstrap (a stale listing: the parent only) lands while host b's lock create is on its way. */
    const finishA = async () => {
      if (finished) return;
      finished = true;
      await inner.createIfAbsent(markerDocument(a, lockId(a.markerPrefix)));
      await inner.createIfAbsent(leaseDocument(a, parent.id, parent.range, null, {}, 1, 'a'));
      await inner.createIfAbsent(markerDocument(a, infoId(a.markerPrefix)));
      await inner.delete((await inner.read(lockId(a.markerPrefix)))!);
    };
    const store = passThrough(inner, {
      createIfAbsent: async (lease: NewLease) => {
        if (lease.id === lockId(a.markerPrefix)) await finishA();
        return inner.createIfAbsent(lease);
      },
    });
    const ctx = bootstrapContext({ store, naming: naming('b'), retryMs: 10, listPartitions: async () => children });
    const result = await bootstrapLeases(ctx);
    expect(result.created).toEqual([]);
    const tokens = (await inner.list('p.')).leases.map((l) => l.leaseToken).filter((t) => !t.startsWith('.'));
    expect(tokens).toEqual(['2']);
  });
});

describe('a bootstrap lock judged by a host whose wall clock runs ahead', () => {
  it('is waited on for an expiration of this host\'s monotonic clock, not removed because its timestamp looks old (seed 338 of --faults all)', async () => {
    const inner = new MemoryLeaseStore();
    // Host a's wall clock reads 0, host b's 10 s ahead: a's lock, just created, looks 10 s old to b.
    const a = namingOf('p.', 'rxfeed', 'a', 'latestVersion', () => 0);
    const b = namingOf('p.', 'rxfeed', 'b', 'latestVersion', () => 10_000);
    await inner.createIfAbsent(markerDocument(a, lockId(a.markerPrefix)));
    let local = 0; // b's monotonic clock
    let aFinished = false;
    /** Host a's bootstrap finishes half an expiration later (on b's clock): its lease, `.info`, its lock removed. */
    const advance = async (ms: number) => {
      local += ms;
      if (local >= 500 && !aFinished) {
        aFinished = true;
        await inner.createIfAbsent(leaseDocument(a, parent.id, parent.range, null, {}, 1, 'a'));
        await inner.createIfAbsent(markerDocument(a, infoId(a.markerPrefix)));
        await inner.delete((await inner.read(lockId(a.markerPrefix)))!);
      }
    };
    const deletedByB: string[] = [];
    const store = passThrough(inner, {
      delete: async (lease) => {
        deletedByB.push(lease.id);
        await inner.delete(lease);
      },
    });
    const ctx = bootstrapContext({
      store,
      naming: b,
      retryMs: 100,
      // b's listing lags a split a's bootstrap saw: a lease of its own would be a gone parent's beside children.
      listPartitions: async () => [parent],
      delay: advance,
      clock: () => local,
    });
    const result = await bootstrapLeases(ctx);
    expect(result.created).toEqual([]);
    expect(deletedByB).toEqual([]);
    expect(aFinished).toBe(true);
  });
});

describe('a bootstrap that finished, and a host whose reads lag it', () => {
  /**
   * Host a bootstraps (claiming the lease of partition 2), its reader finds 2 gone and replaces it by leases for
   * children 3 and 4 (2 deleted), then `.info` lands. Host b starts right then; its reads lag a's writes by
   * 300 ms (under an expiration, as the protocol assumes) and its listing of the partitions predates the split.
   * With a's lock removed as `.info` landed, b read `.info` absent, took the lock, listed the leases as they
   * stood 300 ms ago, and created lease 2 again, at epoch 1, beside children at epoch 2: the parent was read
   * again, fenced, retaken until its epoch passed its children's, and its writes accepted after theirs
   * (`deposed-view-write-accepted`, seeds 433, 866, 1091 of `--faults all`).
   */
  it('keeps its lock for an expiration after .info landed: the host that lags sees .info and creates nothing', async () => {
    const { clock, inner, context, finish } = laggingHosts();
    const a = context('a');
    const { created } = await bootstrapLeases(a);
    expect(created.map((l) => [l.leaseToken, l.owner, l.epoch])).toEqual([['2', 'a', 1]]);
    // a's reader found 2 gone at once: the children, one epoch above, then the parent deleted (the mark is left
    // out: it changes nothing here).
    for (const c of children) await a.store.createIfAbsent(leaseDocument(a.naming, c.id, c.range, null, {}, 2));
    await a.store.delete(created[0]!);
    await clock.advance(0); // a's `.info` lands
    expect(await inner.read(infoId(a.naming.markerPrefix))).toBeDefined();
    // b starts now, its listing of the partitions from before the split.
    let settled = false;
    const b = bootstrapLeases(context('b')).finally(() => (settled = true));
    await clock.advanceUntil(() => settled, 5_000, 50);
    const result = await b;
    expect(result.created).toEqual([]);
    // a removes its lock once the expiration passed.
    await clock.advance(1_000);
    expect(inner.snapshot().map((l) => l.id)).not.toContain(lockId(a.naming.markerPrefix));
    expect(await finish()).toEqual(['3', '4']);
  });
  it('reads .info again once the lock is its own: a lock create that lands after the hold finds .info, not a listing that lags a replacement', async () => {
    const { clock, lagging, never, context, finish } = laggingHosts();
    const a = context('a', lagging.session('a'));
    let claimed: Lease | undefined;
    // b read `.info` before a's bootstrap; its lock create is slow, and lands 1.5 s later, after a's hold.
    const bSession = lagging.session('b');
    const b = context('b', {
      ...bSession,
      createIfAbsent: async (lease: NewLease) => {
        if (lease.id === lockId(a.naming.markerPrefix) && !claimed) {
          [claimed] = (await bootstrapLeases(a)).created;
          await sleep(1_500, clock, never);
        }
        return bSession.createIfAbsent(lease);
      },
    });
    let settled = false;
    const result = bootstrapLeases(b).finally(() => (settled = true));
    await clock.advance(1_350);
    // a's reader finds 2 gone now (an expiration after its `.info`): children, then the parent deleted, 150 ms
    // before b's lock lands; b's listing, 300 ms behind, still shows the parent.
    for (const c of children) await a.store.createIfAbsent(leaseDocument(a.naming, c.id, c.range, null, {}, 2));
    await a.store.delete(claimed!);
    await clock.advanceUntil(() => settled, 5_000, 50);
    expect((await result).created).toEqual([]);
    expect(await finish()).toEqual(['3', '4']);
  });
  it('touches its lock as .info lands: a host that waited on it since its create counts its expiration from then, not from the create', async () => {
    const { clock, inner, lagging, never, context, finish } = laggingHosts();
    // a's lease creates are slow: its bootstrap takes 900 ms of a 1 000 ms expiration.
    const aSession = lagging.session('a');
    const a = context('a', {
      ...aSession,
      createIfAbsent: async (lease: NewLease) => {
        if (lease.id !== lockId(a.naming.markerPrefix) && lease.id !== infoId(a.naming.markerPrefix)) await sleep(900, clock, never);
        return aSession.createIfAbsent(lease);
      },
    });
    const first = bootstrapLeases(a);
    await clock.advance(0);
    // b's reads lag a's writes by 300 ms, but not its reads of the lock: a lag is per document (in Cosmos DB
    // each lease document may sit in a partition of its own), so b may see the lock at once and `.info` late.
    const bSession = lagging.session('b');
    const b = context('b', { ...bSession, read: (id) => (id === lockId(a.naming.markerPrefix) ? inner.read(id) : bSession.read(id)) });
    let settled = false;
    const result = bootstrapLeases(b).finally(() => (settled = true));
    await clock.advance(950);
    const [claimed] = (await first).created;
    // a's reader finds 2 gone: children, then the parent deleted.
    for (const c of children) await aSession.createIfAbsent(leaseDocument(a.naming, c.id, c.range, null, {}, 2));
    await aSession.delete(claimed!);
    await clock.advanceUntil(() => settled, 5_000, 50);
    expect((await result).created).toEqual([]);
    expect(await finish()).toEqual(['3', '4']);
  });
});

describe('a stale bootstrap lock whose delete does not land', () => {
  /**
   * Host b's reads of the lock lag: they answer a version another host has replaced since (the lock is live, or
   * was removed and taken again). b judges that version stale (seen unchanged for an expiration); its delete,
   * conditional on it, conflicts. b tried again at once, its reads answered the same version, and it looped
   * without a delay (sim seed 948 with the listing beside the first `.info` read: h6 made more than 200
   * lease-store calls within 1 virtual ms, removing h1's lock).
   */
  it('waits its retry delay before it looks again: it retries at once only after a delete that landed', async () => {
    const naming = (owner: string) => namingOf('p.', 'rxfeed', owner, 'latestVersion', () => 1_000);
    const inner = new MemoryLeaseStore();
    const lock = lockId(naming('a').markerPrefix);
    const seen = (await inner.createIfAbsent(markerDocument(naming('a'), lock)))!;
    await inner.replace({ ...seen, timestampMs: 2_000 }); // the lock as it stands now: a newer version
    let deletes = 0;
    let delays = 0;
    let calls = 0;
    const counted = <T>(call: () => Promise<T>): Promise<T> => {
      calls++;
      return call();
    };
    const store = passThrough(inner, {
      read: (id) => counted(() => (id === lock ? Promise.resolve(seen) : inner.read(id))),
      createIfAbsent: (lease) => counted(() => inner.createIfAbsent(lease)),
      delete: (lease) => {
        deletes++;
        return counted(() => inner.delete(lease));
      },
    });
    let now = 0;
    const ctx = bootstrapContext({
      store,
      naming: naming('b'),
      retryMs: 10,
      listPartitions: async () => [parent],
      clock: () => (now += 600), // every look at the lock is more than an expiration after the one before
      delay: async () => {
        delays++;
      },
      stopped: () => calls > 100,
    });
    await bootstrapLeases(ctx);
    expect(deletes).toBeGreaterThan(1);
    // Each delete that conflicted is followed by the retry delay, not by the next look at once.
    expect(deletes).toBeLessThanOrEqual(delays);
    expect(await inner.read(lock)).toBeDefined();
  });
});

describe('a bootstrap that failed, and a host whose reads lag it', () => {
  /** Host a's lagging session, its `.info` create failing (`.info` never lands). */
  function infoFailing(lagging: ReturnType<typeof laggingLeaseStore>): LeaseStore {
    const aSession = lagging.session('a');
    return passThrough(aSession, {
      createIfAbsent: async (lease: NewLease) => {
        if (lease.id === infoId('p.')) throw new Error('lease store unavailable (injected)');
        return aSession.createIfAbsent(lease);
      },
    });
  }

  /**
   * Host a creates (and claims) the lease of partition 2; its `.info` create fails. Partition 2 splits, and host
   * b, whose reads lag a's writes by 300 ms, starts with a listing of the children. With a's lock removed as
   * `.info` failed, b took it at once, listed the leases as they stood before a's create, found no parent
   * lease covering 3 and 4, and created them from `startFrom` beside lease 2 and below its checkpoint
   * (seed 532 of `--faults lease,source,hang,view,host,sink,clock,late,bootstrap,poison,topology,admin,broker
   * --start now` with FirstPages: checkpoint-moved-backwards, deposed-view-write-accepted).
   */
  it('keeps its lock for an expiration after a failed .info create: the host that lags lists lease 2 under it and creates no child', async () => {
    const { clock, inner, lagging, context, finish } = laggingHosts();
    const markings: Promise<unknown>[] = [];
    const a = { ...context('a', infoFailing(lagging)), background: (work: Promise<unknown>) => void markings.push(work.catch(() => undefined)) };
    const { created } = await bootstrapLeases(a);
    expect(created.map((l) => [l.leaseToken, l.owner, l.epoch])).toEqual([['2', 'a', 1]]);
    await clock.advance(0); // a's `.info` create fails
    expect(await inner.read(infoId('p.'))).toBeUndefined();
    // b starts now, its listing of the partitions from after the split.
    let settled = false;
    const b = bootstrapLeases(context('b', lagging.session('b'), children)).finally(() => (settled = true));
    await clock.advanceUntil(() => settled, 5_000, 50);
    expect((await b).created).toEqual([]);
    expect(await finish()).toEqual(['2']);
    await Promise.all(markings);
  });

  it('keeps its lock for an expiration after a failed lease create: the host that lags lists the lease that landed under it', async () => {
    const { clock, lagging, context, finish } = laggingHosts();
    const left: Partition = { id: '2', range: { minInclusive: '', maxExclusive: '7F' } };
    const right: Partition = { id: '5', range: { minInclusive: '7F', maxExclusive: 'FF' } };
    const leftChildren: Partition[] = [
      { id: '3', range: { minInclusive: '', maxExclusive: '3F' }, parents: ['2'] },
      { id: '4', range: { minInclusive: '3F', maxExclusive: '7F' }, parents: ['2'] },
    ];
    const aSession = lagging.session('a');
    const rightFails = passThrough(aSession, {
      createIfAbsent: async (lease: NewLease) => {
        if (lease.leaseToken === right.id) throw new Error('lease store unavailable (injected)');
        return aSession.createIfAbsent(lease);
      },
    });
    const first = await bootstrapLeases(context('a', rightFails, [left, right]));
    expect(first.failure).toBeDefined();
    expect(first.created.map((l) => l.leaseToken)).toEqual(['2']);
    // b starts now: partition 2 split meanwhile.
    let settled = false;
    const b = bootstrapLeases(context('b', lagging.session('b'), [...leftChildren, right])).finally(() => (settled = true));
    await clock.advanceUntil(() => settled, 5_000, 50);
    expect((await b).created.map((l) => l.leaseToken)).toEqual(['5']);
    expect(await finish()).toEqual(['2', '5']);
  });

  /**
   * As above, but host a stops right after its `.info` create failed. Its lock must not be left owned by a
   * host that stopped, nor keep the next host waiting an expiration (test/feed/startNow.test.ts, "unfinished
   * bootstrap"), nor be removed (b, lagging, would list no lease under it): a hands it over, released with the
   * leases its bootstrap knew of, and b takes it over at once and counts them as listed.
   */
  it('hands its lock over as its host stops: the next host takes it over at once and counts the leases named in it', async () => {
    const { clock, inner, lagging, context, finish } = laggingHosts();
    const aStop = new AbortController();
    const markings: Promise<unknown>[] = [];
    const a = {
      ...context('a', infoFailing(lagging)),
      stopped: () => aStop.signal.aborted,
      delay: (ms: number) => sleep(ms, clock, aStop.signal),
      background: (work: Promise<unknown>) => void markings.push(work.catch(() => undefined)),
    };
    expect((await bootstrapLeases(a)).created.map((l) => l.leaseToken)).toEqual(['2']);
    await clock.advance(0); // a's `.info` create fails
    aStop.abort();
    await Promise.all(markings);
    const lock = lockId('p.');
    expect((await inner.read(lock))?.owner).toBeNull();
    // b's reads of the lock are current, its listing lags a's writes by 300 ms (a lag is per document).
    const bSession = lagging.session('b');
    const b = context('b', { ...bSession, read: (id) => (id === lock ? inner.read(id) : bSession.read(id)) }, children);
    let settled = false;
    const result = bootstrapLeases(b).finally(() => (settled = true));
    await clock.advanceUntil(() => settled, 100, 10);
    expect(settled).toBe(true);
    expect((await result).created).toEqual([]);
    await clock.advance(0); // b's `.info` lands
    expect(await inner.read(infoId('p.'))).toBeDefined();
    expect(await finish()).toEqual(['2']);
  });
});
