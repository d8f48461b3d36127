import type { Container } from '@azure/cosmos';
import { tap, type Subscription } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import type { Partition } from '../../src/core/Partition.js';
import { createChangeFeed, type ChangeFeedProcessor } from '../../src/feed/index.js';
import { HANDOFF_TO, LOAD_PROPERTY, publishedLoad } from '../../src/leases/protocol/index.js';
import { CosmosLeaseStore } from '../../src/leases/CosmosLeaseStore.js';
import type { Lease } from '../../src/leases/Lease.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { drainPartition, freshContainer, sleep, type Doc } from './helpers.js';

let cosmos: TestCosmos;
beforeAll(async () => {
  cosmos = await startTestCosmos({ initialRangeCount: 4 });
});
afterAll(async () => {
  await cosmos.stop();
});

const PREFIX = 'load.';
const TIMINGS = { leaseAcquireIntervalMs: 300, leaseRenewIntervalMs: 1_000, leaseExpirationMs: 3_000 };
/** Documents written per second to each hot partition key. */
const HOT_RATE = 50;

/** Resolves when `done()` holds, polling every 50 ms; rejects with `what()` after `timeoutMs` (real time: the emulator runs for real). */
async function until(done: () => boolean | Promise<boolean>, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what()}`);
    await sleep(50);
  }
}

/**
 * Two partition keys whose documents land in two different ranges, found by writing one probe document per
 * candidate key and reading every range's change feed (no assumption about the hash), then deleting the
 * probes. Returns the keys and their ranges.
 */
async function keysInTwoRanges(container: Container, source: CosmosSource<Doc>, partitions: readonly Partition[]) {
  const candidates = Array.from({ length: 8 }, (_, i) => `hot-${i}`);
  await Promise.all(candidates.map((pk, v) => container.items.create<Doc>({ id: `probe-${pk}`, pk, v })));
  const rangeOf = new Map<string, string>();
  for (const partition of partitions) {
    const { changes } = await drainPartition(source, partition, 'beginning');
    for (const change of changes) rangeOf.set(change.document!.pk, partition.id);
  }
  expect([...rangeOf.keys()].sort()).toEqual([...candidates].sort()); // each probe in exactly one range
  const first = candidates[0]!;
  const second = candidates.find((pk) => rangeOf.get(pk) !== rangeOf.get(first));
  if (second === undefined) throw new Error(`all ${candidates.length} candidate keys landed in range ${rangeOf.get(first)}`);
  // Gone from the LatestVersion feed, so no host reads them, however its 'now' start falls around them.
  await Promise.all(candidates.map((pk) => container.item(`probe-${pk}`, pk).delete()));
  return { keys: [first, second], ranges: [rangeOf.get(first)!, rangeOf.get(second)!] };
}

/**
 * One processor in this process, `balanceBy: 'load'`, recording every change id it processes. It starts from
 * 'now' and the probe documents are deleted (a LatestVersion feed leaves them out): the cold ranges then carry
 * no load at all.
 */
function startHost(name: string, container: Container, leases: CosmosLeaseStore, seen: Set<string>) {
  const events: FeedEvent[] = [];
  const feed: ChangeFeedProcessor<Doc> = createChangeFeed<Doc>({
    source: new CosmosSource<Doc>(container),
    leases,
    instanceName: name,
    leasePrefix: PREFIX,
    balanceBy: 'load',
    startFrom: 'now',
    pollIntervalMs: 100,
    ...TIMINGS,
    events: (e) => events.push(e),
  });
  const sub: Subscription = feed.changes$
    .pipe(
      tap((batch) => {
        for (const c of batch.changes) seen.add(c.id);
      }),
      checkpointEvery({ count: 50, ms: 100 }),
    )
    .subscribe();
  return { name, feed, sub, events };
}

/**
 * Writes to `pk` at `perSecond` documents a second until `signal` aborts, paced against the start (a slow
 * write is caught up on, not dropped); every id is added to `written` once its create returned.
 */
async function writeSteadily(container: Container, pk: string, perSecond: number, written: Set<string>, signal: AbortSignal): Promise<void> {
  const start = Date.now();
  for (let n = 0; !signal.aborted; n++) {
    const id = `${pk}.${n}`;
    await container.items.create<Doc>({ id, pk, v: n });
    written.add(id);
    const due = start + ((n + 1) * 1000) / perSecond;
    if (due > Date.now()) await sleep(due - Date.now());
  }
}

describe("balanceBy: 'load' end to end (CosmosSource, CosmosLeaseStore, four ranges)", () => {
  it('a host joining takes one of the two hot ranges, and the split holds', { timeout: 40_000 }, async (ctx) => {
    const container = await freshContainer(cosmos.client, 'load-feed');
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
    const { container: leaseContainer } = await database.containers.createIfNotExists({
      id: `load-leases-${process.pid}`,
      partitionKey: { paths: ['/id'] },
    });
    const store = new CosmosLeaseStore({ container: leaseContainer });
    const source = new CosmosSource<Doc>(container);
    const partitions = await source.listPartitions();
    if (partitions.length < 4) ctx.skip(`the container has ${partitions.length} ranges; the scenario needs 4 (run on the rxfeed emulator)`);

    const { keys, ranges: hotRanges } = await keysInTwoRanges(container, source, partitions);
    const written = new Set<string>();
    const seen = new Set<string>();
    const listLeases = async (): Promise<Lease[]> => (await store.list(PREFIX)).leases.filter((l) => !l.leaseToken.startsWith('.'));
    let leases: Lease[] = [];
    const snapshot = () =>
      leases
        .map((l) => `${l.leaseToken}:${l.owner}#${l.epoch}(${l.properties[LOAD_PROPERTY] ?? '-'}${l.properties[HANDOFF_TO] ? `→${l.properties[HANDOFF_TO]}` : ''})`)
        .join(' ');
    const hosts: ReturnType<typeof startHost>[] = [];
    /** The stored owner of `lease` acquired it under the stored epoch (a lease handed over names its new owner before that host acquires it). */
    const heldAsStored = (lease: Lease) => {
      let epoch: number | undefined;
      for (const e of hosts.find((h) => h.name === lease.owner)?.events ?? []) if (e.type === 'leaseAcquired' && e.lease === lease.leaseToken) epoch = e.epoch;
      return epoch === lease.epoch;
    };
    const hotOwners = () => hotRanges.map((r) => leases.find((l) => l.leaseToken === r)?.owner);
    /** Each host holds exactly one hot range, every lease is held by the host the store names, and no handoff is pending. */
    const split = () =>
      leases.length === partitions.length &&
      [...hotOwners()].sort().join() === 'host-a,host-b' &&
      leases.every((l) => heldAsStored(l) && l.properties[HANDOFF_TO] === undefined);

    const stopWriting = new AbortController();
    const writers: Promise<void>[] = [];
    try {
      const t0 = Date.now();
      hosts.push(startHost('host-a', container, store, seen));
      // host-a owns every lease and has pinned its 'now' start in each (so nothing written from here is skipped).
      await until(
        async () => (
          (leases = await listLeases()),
          leases.length === partitions.length && leases.every((l) => l.owner === 'host-a' && l.continuation !== null)
        ),
        10_000,
        () => `host-a did not take and pin all ${partitions.length} leases: ${snapshot()}`,
      );
      const tA = Date.now();

      // Both hot keys written at a steady rate; the two other ranges get nothing.
      for (const pk of keys) writers.push(writeSteadily(container, pk, HOT_RATE, written, stopWriting.signal));
      // host-a has measured and published the hot ranges' rates before host-b joins.
      await until(
        async () => ((leases = await listLeases()), hotRanges.every((r) => publishedLoad(leases.find((l) => l.leaseToken === r)!) > 0)),
        10_000,
        () => `host-a published no load for the hot ranges ${hotRanges.join(', ')}: ${snapshot()}`,
      );
      const tLoad = Date.now();

      hosts.push(startHost('host-b', container, store, seen));
      await until(async () => ((leases = await listLeases()), split()), 15_000, () => `the hot ranges ${hotRanges.join(', ')} are not split: ${snapshot()}`);
      const tSplit = Date.now();

      // Nothing moves any more, past the slowest scan of a settled host (half an expiration) and several
      // acquire intervals: the cold ranges weigh only the baseline, too little for a move to pay (minGain).
      const holdUntil = Date.now() + TIMINGS.leaseExpirationMs / 2 + 2 * TIMINGS.leaseAcquireIntervalMs;
      const settled = snapshot();
      const epochs = leases.map((l) => l.epoch).join();
      while (Date.now() < holdUntil) {
        leases = await listLeases();
        expect(split() && leases.map((l) => l.epoch).join() === epochs, `the split did not hold (settled as ${settled}, now ${snapshot()})`).toBe(true);
        await sleep(100);
      }

      // Every lease document carries a load; the hot ones more than the cold ones.
      const docs = (await leaseContainer.items.query<{ LeaseToken?: string; properties?: Record<string, string> }>('SELECT * FROM c').fetchAll()).resources;
      const leaseDocs = docs.filter((d) => d.LeaseToken !== undefined && !d.LeaseToken.startsWith('.'));
      expect(leaseDocs.length).toBe(partitions.length);
      for (const doc of leaseDocs) expect(doc.properties?.[LOAD_PROPERTY], `lease ${doc.LeaseToken}`).toMatch(/^\d+(\.\d+)?(e[+-]?\d+)?$/);
      // A cold range carries next to none: nothing is written to it but the probes, deleted before host-a started.
      const coolest = Math.min(...leases.filter((l) => hotRanges.includes(l.leaseToken)).map(publishedLoad));
      for (const l of leases) {
        if (hotRanges.includes(l.leaseToken)) expect(publishedLoad(l), `hot lease ${l.leaseToken}`).toBeGreaterThan(0);
        else expect(publishedLoad(l), `cold lease ${l.leaseToken}`).toBeLessThan(coolest / 4);
      }

      stopWriting.abort();
      await Promise.all(writers);
      await until(
        () => [...written].every((id) => seen.has(id)),
        10_000,
        () => `${[...written].filter((id) => !seen.has(id)).length} of ${written.size} written documents not processed; leases ${snapshot()}`,
      );
      const errors = hosts.flatMap((h) => h.events.flatMap((e) => (e.type === 'error' ? [`${h.name} ${e.lease ?? '*'}: ${e.error.message}`] : [])));
      expect(errors).toEqual([]);
      console.log(
        `load e2e: host-a owned all after ${tA - t0} ms, loads published ${tLoad - tA} ms later, split ${tSplit - tLoad} ms after host-b started; ` +
          `${written.size} documents; leases ${snapshot()}`,
      );
    } finally {
      stopWriting.abort();
      await Promise.allSettled(writers);
      await Promise.all(hosts.map((h) => h.feed.stop()));
      for (const h of hosts) h.sub.unsubscribe();
    }
  });
});
