/**
 * Failures are isolated by LSN group, never by single change. Changes that share an LSN (a Cosmos DB
 * transactional batch; a merged partition read whole holds both parents' changes with equal LSNs) stay
 * together when a failed batch is run again piece by piece: an `exactlyOnce` view marks by LSN, so the
 * second change of an LSN run alone was skipped as already written (the simulation's `topology` fault set
 * found it: `npm run sim -- --seed 7 --faults host,poison,lease,source,topology --hosts 2-4 --chaos-ms 20000
 * --view exactlyOnce --groups off --form handler`). A poison change takes its LSN group with it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Change } from '../../src/core/Change.js';
import { type ChangeProcessorHandle, MemoryDeadLetterStore, MemoryLeaseStore, MemorySource, MemoryViewStore, type OnFailure, type PartitionContext, processChanges } from '../../src/index.js';
import { VirtualClock } from '../support/faults/index.js';
import { FAST_TIMINGS } from '../support/memory.js';

interface Doc {
  id: string;
  poison?: true;
}

const FAST = { ...FAST_TIMINGS, leasePrefix: 'g.', startFrom: 'beginning', telemetry: false } as const;
const RETRY = { attempts: 2, initialBackoffMs: 10, maxBackoffMs: 10, jitter: 0 } as const;

let clock: VirtualClock;
const handles: ChangeProcessorHandle[] = [];
afterEach(async () => {
  const closing = Promise.allSettled(handles.splice(0).map((h) => h.close()));
  await clock.advance(5_000);
  await closing;
});

/**
 * A merged partition whose log is `[x@1, y@1, z@2]`: x and z written to one parent, y to the other, then
 * the two merged (so the processor, started after, reads the child whole from the beginning).
 */
function mergedSource(docs: { y?: Doc } = {}) {
  const source = new MemorySource<Doc>({ partitions: 2, now: () => clock.now(), scheduler: clock });
  const ids: Record<string, string[]> = { '0': [], '1': [] };
  for (let i = 0; ids['0']!.length < 2 || ids['1']!.length < 1; i++) {
    const id = `d${i}`;
    const p = source.partitionFor(id);
    if (ids[p]!.length < (p === '0' ? 2 : 1)) {
      source.write(p === '1' && docs.y ? { ...docs.y, id } : { id });
      ids[p]!.push(id);
    }
  }
  source.merge('0', '1');
  const [x, z] = ids['0']!;
  const [y] = ids['1']!;
  return { source, x: x!, y: y!, z: z! };
}

/** A handler writing its call's changes to an exactlyOnce view, marked with the call's last LSN. */
function viewWriter(view: MemoryViewStore<{ id: string }>, fail: (changes: readonly Change<Doc>[]) => boolean, calls: string[][]) {
  return async (changes: readonly Change<Doc>[], context: PartitionContext) => {
    calls.push(changes.map((c) => `${c.id}@${c.lsn}`));
    if (fail(changes)) throw new Error('handler failed (injected)');
    if (changes.length === 0) return;
    const last = changes[changes.length - 1]!.lsn;
    await view.write({
      mode: 'exactlyOnce',
      changes: changes.map((c) => ({ key: c.id, row: { id: c.id }, lsn: c.lsn, timestampMs: c.timestampMs, partition: context.leaseToken })),
      partitions: [{ partition: context.leaseToken, epoch: context.epoch, position: `mem:${last}`, lsn: last }],
    });
  };
}

function start(source: MemorySource<Doc>, onFailure: OnFailure<Doc>, processChangesFn: ReturnType<typeof viewWriter>) {
  handles.push(
    processChanges<Doc>(
      { source, leases: new MemoryLeaseStore(), instanceName: 'a', scheduler: clock, checkpoint: { count: 1, ms: 10 }, onFailure, ...FAST },
      { processChanges: processChangesFn },
    ),
  );
}

describe('processChanges: a failed batch is run again by LSN group', () => {
  it('a batch failing once: the changes sharing an LSN are run again together, and both land in an exactlyOnce view', async () => {
    clock = new VirtualClock();
    const { source, x, y, z } = mergedSource();
    const view = new MemoryViewStore<{ id: string }>();
    const calls: string[][] = [];
    let failures = 0;
    start(source, { retry: RETRY, halt: true, scheduler: clock }, viewWriter(view, (changes) => changes.length > 0 && failures++ === 0, calls));
    await clock.advance(2_000);

    expect((await view.rows()).map((r) => r.key).sort()).toEqual([x, y, z].sort());
    expect(calls.slice(0, 3)).toEqual([[`${x}@1`, `${y}@1`, `${z}@2`], [`${x}@1`, `${y}@1`], [`${z}@2`]]);
  });

  it('a poison change takes its LSN group with it: dead-lettered together, the next LSN lands', async () => {
    clock = new VirtualClock();
    const { source, x, y, z } = mergedSource({ y: { id: '', poison: true } });
    const view = new MemoryViewStore<{ id: string }>();
    const deadLetter = new MemoryDeadLetterStore<Doc>();
    const calls: string[][] = [];
    start(source, { retry: RETRY, deadLetter, scheduler: clock }, viewWriter(view, (changes) => changes.some((c) => c.document?.poison), calls));
    await clock.advance(2_000);

    const letters = await deadLetter.list({ limit: 10 });
    expect(letters.map((l) => `${l.documentId}@${l.lsn}`)).toEqual([`${x}@1`, `${y}@1`]);
    expect(letters.map((l) => l.attempts)).toEqual([2, 2]);
    expect((await view.rows()).map((r) => r.key)).toEqual([z]);
    // The group is never run without its poison change: no call holds x without y.
    for (const call of calls) expect(call.includes(`${x}@1`)).toBe(call.includes(`${y}@1`));
  });
});
