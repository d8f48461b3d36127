/**
 * `startFrom: 'now'` under a host clock that is off: "now" is the source's time when the processor started,
 * never the host's. Pinned from the host's clock, a host 30 s ahead started in the future (losing what was
 * written while its bootstrap ran) and a host 30 s behind started in the past (delivering what was written
 * before it started); the simulation's `clock` fault set found it with `--start now|function`.
 */
import { describe, expect, it } from 'vitest';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedEvent } from '../../src/core/events.js';
import type { FeedMode, Partition, StartFrom } from '../../src/core/Partition.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { checkpointEvery } from '../../src/operators/checkpointEvery.js';
import { MemorySource } from '../../src/sources/MemorySource.js';
import type { Source } from '../../src/sources/Source.js';
import { FaultEnv, faultyLeaseStore, faultySource, HostClock, type SourceFaultPlan, VirtualClock } from '../support/faults/index.js';
import { idsOf } from '../support/memory.js';

interface Doc {
  id: string;
}

/** A source and a host whose clock is `skewMs` off the source's; the lease creates of its bootstrap take 2 s. */
function world(mode: FeedMode, skewMs: number, sourceFaults: SourceFaultPlan = {}) {
  const clock = new VirtualClock(1_700_000_000_000);
  const env = new FaultEnv({ seed: 3, scheduler: clock });
  const memory = new MemorySource<Doc>({ partitions: 4, mode, now: () => clock.now(), scheduler: clock });
  const host = new HostClock(clock, { skewMs });
  const leases = faultyLeaseStore(new MemoryLeaseStore(), { createIfAbsent: [{ kind: 'slow', count: 5, ms: 2_000 }] }, env);
  let n = 0;
  const write = (prefix: string, count = 1): string[] => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const id = `${prefix}${n++}`;
      memory.write({ id });
      ids.push(id);
    }
    return ids;
  };
  const start = (startFrom: StartFrom | ((p: Partition) => StartFrom), source: Source<Doc> = faultySource(memory, sourceFaults, env)) => {
    const events: FeedEvent[] = [];
    const seen: ChangeBatch<Doc>[] = [];
    const feed = createChangeFeed<Doc>({
      source,
      leases,
      instanceName: 'a',
      leasePrefix: 'skew.',
      startFrom,
      scheduler: host,
      pollIntervalMs: 50,
      leaseAcquireIntervalMs: 200,
      leaseRenewIntervalMs: 1_000,
      leaseExpirationMs: 5_000,
      events: (e) => events.push(e),
      telemetry: false,
    });
    const subscription = feed.changes$.pipe(checkpointEvery({ count: 1, ms: 10 })).subscribe((b) => seen.push(b));
    const stop = async () => {
      await feed.stop();
      subscription.unsubscribe();
    };
    return { events, delivered: () => new Set(idsOf(seen)), stop };
  };
  /** Writes one change every 100 ms for `ms`. */
  const keepWriting = async (prefix: string, ms: number) => {
    const ids: string[] = [];
    for (let t = 0; t < ms; t += 100) {
      ids.push(...write(prefix));
      await clock.advance(100);
    }
    return ids;
  };
  return { clock, memory, write, start, keepWriting };
}

describe.each(['latestVersion', 'allVersionsAndDeletes'] as const)("startFrom: 'now' with a host clock that is off (%s)", (mode) => {
  it.each([
    ['30 s ahead', 30_000],
    ['30 s behind', -30_000],
  ])('host %s: delivers everything written from the moment it started, and nothing written before', async (_, skewMs) => {
    const w = world(mode, skewMs);
    const before = w.write('before-', 20);
    await w.clock.advance(1_000);
    const run = w.start('now');
    const afterSubscribe = w.write('after-subscribe-', 20);
    // The bootstrap's lease creates take 2 s: everything written meanwhile comes after the start too.
    const duringBootstrap = await w.keepWriting('during-bootstrap-', 3_000);
    await w.clock.advance(2_000);
    const delivered = run.delivered();
    expect([...afterSubscribe, ...duringBootstrap].filter((id) => !delivered.has(id))).toEqual([]);
    expect(before.filter((id) => delivered.has(id))).toEqual([]);
    await run.stop();
  });

  it.each([
    ["the function form gives 'now' the same meaning", { startFrom: () => 'now' as const, faults: {}, writingMs: 3_000, settleMs: 2_000 }],
    [
      "a slow, then failing answer of the source's time does not move the start later",
      // The first answer takes 3 s, the next two fail: the start is still when the processor started.
      {
        startFrom: 'now' as const,
        faults: {
          currentTime: [
            { kind: 'slow', count: 1, ms: 3_000 },
            { kind: 'transient', count: 2 },
          ],
        } satisfies SourceFaultPlan,
        writingMs: 6_000,
        settleMs: 3_000,
      },
    ],
  ] as const)('%s', async (_, { startFrom, faults, writingMs, settleMs }) => {
    const w = world(mode, 30_000, faults);
    const before = w.write('before-', 20);
    await w.clock.advance(1_000);
    const run = w.start(startFrom);
    const after = await w.keepWriting('after-', writingMs);
    await w.clock.advance(settleMs);
    const delivered = run.delivered();
    expect(after.filter((id) => !delivered.has(id))).toEqual([]);
    expect(before.filter((id) => delivered.has(id))).toEqual([]);
    await run.stop();
  });

  it("a source that cannot tell its time starts each lease where its source stood when the lease was made, never at the host's time", async () => {
    const w = world(mode, -30_000);
    // The same source without currentTime, as a third-party source may be.
    const { memory } = w;
    const source: Source<Doc> = {
      description: memory.description,
      mode: memory.mode,
      listPartitions: (signal) => memory.listPartitions(signal),
      read: (request) => memory.read(request),
      positionAt: (p, at) => memory.positionAt(p, at),
    };
    const before = w.write('before-', 20);
    await w.clock.advance(1_000);
    const run = w.start('now', source);
    await w.clock.advance(3_000); // the bootstrap (lease creates of 2 s) is done
    const after = await w.keepWriting('after-', 2_000);
    await w.clock.advance(2_000);
    const delivered = run.delivered();
    expect(after.filter((id) => !delivered.has(id))).toEqual([]);
    expect(before.filter((id) => delivered.has(id))).toEqual([]);
    await run.stop();
  });
});

describe('startFrom: <Date> with a host clock that is off', () => {
  it.each([
    ['30 s ahead', 30_000],
    ['30 s behind', -30_000],
  ])('host %s: the time is read on the source clock, as given', async (_, skewMs) => {
    const w = world('latestVersion', skewMs);
    const older = w.write('older-', 10);
    await w.clock.advance(1_000);
    const at = new Date(w.clock.now());
    const newer = w.write('newer-', 10);
    await w.clock.advance(1_000);
    const run = w.start(at);
    const after = await w.keepWriting('after-', 2_000);
    await w.clock.advance(3_000);
    const delivered = run.delivered();
    expect([...newer, ...after].filter((id) => !delivered.has(id))).toEqual([]);
    expect(older.filter((id) => delivered.has(id))).toEqual([]);
    await run.stop();
  });
});
