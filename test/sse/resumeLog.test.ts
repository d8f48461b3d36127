import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Change } from '../../src/core/Change.js';
import type { FeedRange } from '../../src/core/Partition.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import { ResumeLog } from '../../src/sse/hub/resumeLog.js';
import { createSseHub } from '../../src/sse/index.js';
import { recordingTracker, type RecordingTracker } from '../operators/batches.js';
import { FakeResponse } from './fakeResponse.js';

type Doc = { id: string };
const change = (id: string, lsn: number): Change<Doc> => ({ id, operation: 'upsert', document: { id }, lsn, timestampMs: lsn });
const batch = (partition: string, range: FeedRange, changes: Change<Doc>[], tracker?: RecordingTracker) =>
  new ChangeBatch({
    partition,
    range,
    changes,
    position: `p${changes.at(-1)?.lsn ?? 0}`,
    ...(tracker ? { origin: { tracker, sequence: 1, readCount: changes.length } } : {}),
  });
const ALL = { minInclusive: '', maxExclusive: 'FF' };
const LOW = { minInclusive: '', maxExclusive: '80' };
const HIGH = { minInclusive: '80', maxExclusive: 'FF' };
const settle = async () => {
  for (let i = 0; i < 4; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('ResumeLog (snapshot mode): a held re-read that does not finish on this host', () => {
  // A published to 5 over ['', 80); B, over ['', FF), re-reads from 2 (an admin reset): the hub publishes none of
  // it up to 5, the furthest it published over the range, and holds its position until the re-read gets there.
  const heldReread = () => {
    const log = new ResumeLog<Doc>('S', 1000);
    log.holdRereads = true;
    log.append(batch('A', LOW, [change('a', 1), change('b', 2), change('c', 3), change('d', 4), change('e', 5)]));
    expect(log.append(batch('B', ALL, [change('b', 2), change('x', 3)]))).toEqual([]);
    return log;
  };

  it('split into children that published past its end: the hub\'s own latest id resumes', () => {
    const log = heldReread();
    // B split: B1 and B2 read on from its checkpoint, past what the hub had published over the range.
    expect(log.append(batch('B1', LOW, [change('f', 6), change('g', 12)])).map((e) => e.change.lsn)).toEqual([6, 12]);
    expect(log.append(batch('B2', HIGH, [change('y', 4), change('z', 14)])).map((e) => e.change.lsn)).toEqual([4, 14]);
    expect(log.eventId).toBe('S.A:5,B1:c,B2:e');
    expect(log.resume(log.eventId)).toEqual({ kind: 'replay', after: new Map([['A', 5], ['B1', 12], ['B2', 14]]) });
    // A client started over from the view during the re-read (it holds B at 3) resumes too: the children's
    // changes after 3 are all in the buffer.
    expect(log.resume('S.A:5,B:3').kind).toBe('replay');
    // One from before the re-read may lack what B read and the hub did not publish: it starts over.
    expect(log.resume('S.A:5')).toEqual({ kind: 'reset', reason: 'too-old' });
    expect(log.resume('S.A:4')).toEqual({ kind: 'reset', reason: 'too-old' });
  });

  it('one child past the end, the other not yet: ids below the end over the rest of the range still start over', () => {
    const log = heldReread();
    log.append(batch('B1', LOW, [change('f', 6), change('g', 12)]));
    expect(log.resume('S.A:5,B:3,B1:c')).toEqual({ kind: 'reset', reason: 'too-old' });
  });

  it('its lease moved to another host: ids given since its last batch resume; older ones still start over', () => {
    const log = heldReread();
    const owner = recordingTracker('B');
    expect(log.append(batch('B', ALL, [change('w', 4)], owner))).toEqual([]);
    log.append(batch('A', LOW, [change('h', 6)]));
    // While B may still read up to 5 here, an id holding it below 5 lacks what the hub will not publish.
    expect(log.resume('S.A:6,B:4')).toEqual({ kind: 'reset', reason: 'too-old' });
    owner.end();
    log.append(batch('A', LOW, [change('i', 7)]));
    expect(log.resume('S.A:6,B:4')).toEqual({ kind: 'replay', after: new Map([['A', 6], ['B', 4]]) });
    // Below what the hub read of B and did not publish: it may lack some.
    expect(log.resume('S.A:6,B:3')).toEqual({ kind: 'reset', reason: 'too-old' });
    expect(log.resume('S.A:5')).toEqual({ kind: 'reset', reason: 'too-old' });
  });

  it('its lease came back: the re-read holds again until it passes its end, and then needs ids past it', () => {
    const log = heldReread();
    const first = recordingTracker('B');
    log.append(batch('B', ALL, [change('w', 4)], first));
    first.end();
    expect(log.resume('S.A:5,B:4').kind).toBe('replay');
    const again = recordingTracker('B');
    log.append(batch('B', ALL, [change('w', 4)], again));
    expect(log.resume('S.A:5,B:4')).toEqual({ kind: 'reset', reason: 'too-old' });
    expect(log.append(batch('B', ALL, [change('e', 5), change('v', 8)], again)).map((e) => e.change.lsn)).toEqual([8]);
    expect(log.resume('S.A:5,B:4')).toEqual({ kind: 'reset', reason: 'too-old' });
    expect(log.resume(log.eventId).kind).toBe('replay');
  });
});

describe('SseHub (snapshot mode): a held re-read whose lease moves to another host', () => {
  it('a client started over from the view during the re-read resumes from the buffer once the lease is gone', async () => {
    const view = new MemoryViewStore<Doc>();
    const hub = createSseHub<Doc, Doc>({ streamId: 'S', scheduler: new VirtualTimeScheduler(), view, project: (c) => c.document });
    const read = async (partition: string, range: FeedRange, epoch: number, changes: Change<Doc>[], tracker?: RecordingTracker) => {
      await view.write({
        mode: 'guarded',
        changes: changes.map((c) => ({ key: c.id, row: c.document, lsn: c.lsn, timestampMs: c.timestampMs, partition })),
        partitions: [{ partition, epoch, position: `p${changes.at(-1)!.lsn}`, lsn: changes.at(-1)!.lsn, range }],
      });
      hub.publish(batch(partition, range, changes, tracker));
    };
    const res = new FakeResponse();
    hub.connect(res);
    await settle();
    await read('A', LOW, 1, [change('a', 1), change('b', 2), change('c', 3), change('d', 4), change('e', 5)]);
    // After an admin reset, B re-reads the whole range from 2: the client starts over from the view.
    const owner = recordingTracker('B');
    await read('B', ALL, 2, [change('b', 2), change('x', 3)], owner);
    await settle();
    expect(res.events.filter((e) => e.type === 'snapshot-begin')).toHaveLength(2);
    const id = res.parser.lastEventId;
    expect(id).toBe('S.A:5,B:3');
    res.disconnect();
    // B's lease moves to another host before its re-read gets to 5; A reads on here.
    owner.end();
    await read('A', LOW, 3, [change('f', 6)]);
    const again = new FakeResponse(res.parser);
    const before = again.events.length;
    hub.connect(again, { lastEventId: id });
    await settle();
    expect(again.events.slice(before).map((e) => e.type)).toEqual(['message']);
    expect(again.changes().slice(-1).map((c) => `${c.id}@${c.lsn}`)).toEqual(['f@6']);
    expect(hub.stats().resumed).toBe(1);
  });
});

describe('SseHub (snapshot mode): an id holding a snapshot\'s position of a partition the hub never read', () => {
  it('resumes from the buffer: the hub sent that position itself (another process wrote the partition to the view)', async () => {
    const view = new MemoryViewStore<Doc>();
    const hub = createSseHub<Doc, Doc>({ streamId: 'S', scheduler: new VirtualTimeScheduler(), view, project: (c) => c.document });
    await settle();
    // Another process reads the upper half into the view after this hub started: this hub never reads it.
    await view.write({
      mode: 'guarded',
      changes: [change('x', 7)].map((c) => ({ key: c.id, row: c.document, lsn: c.lsn, timestampMs: c.timestampMs, partition: 'X' })),
      partitions: [{ partition: 'X', epoch: 1, position: 'p7', lsn: 7, range: HIGH }],
    });
    const res = new FakeResponse();
    hub.connect(res);
    await settle();
    expect(res.events.map((e) => e.type)).toEqual(['snapshot-begin', 'snapshot', 'up-to-date']);
    hub.publish(batch('A', LOW, [change('a', 1)]));
    const id = res.parser.lastEventId;
    expect(id).toBe('S.A:1,X:7');
    res.disconnect();
    hub.publish(batch('A', LOW, [change('b', 2)]));
    const again = new FakeResponse(res.parser);
    const before = again.events.length;
    hub.connect(again, { lastEventId: id });
    await settle();
    expect(again.events.slice(before).map((e) => e.type)).toEqual(['message']);
    expect(again.changes().slice(-1).map((c) => `${c.id}@${c.lsn}`)).toEqual(['b@2']);
    // A partition no snapshot of this hub named is still one it cannot vouch for.
    const stranger = new FakeResponse();
    hub.connect(stranger, { lastEventId: 'S.A:1,Y:7' });
    await settle();
    expect(JSON.parse(stranger.events[0]!.data)).toEqual({ reason: 'unknown-stream' });
  });
});

describe('SseHub (snapshot mode): a partition the hub first reads well past the view\'s position when it started', () => {
  // Seed 6114 of the simulation: the hub starts with the view at P:3, its host freezes, and takes P's lease back at
  // a checkpoint other processes moved to 9; P's changes 4–9 are in the view (rows of its snapshots), never in the
  // hub's buffer.
  const started = async () => {
    const view = new MemoryViewStore<Doc>();
    let epoch = 0;
    const write = (partition: string, range: FeedRange, changes: Change<Doc>[]) =>
      view.write({
        mode: 'guarded',
        changes: changes.map((c) => ({ key: c.id, row: c.document, lsn: c.lsn, timestampMs: c.timestampMs, partition })),
        partitions: [{ partition, epoch: ++epoch, position: `p${changes.at(-1)!.lsn}`, lsn: changes.at(-1)!.lsn, range }],
      });
    await write('P', HIGH, [change('p', 3)]);
    const hub = createSseHub<Doc, Doc>({ streamId: 'S', scheduler: new VirtualTimeScheduler(), view, project: (c) => c.document });
    await settle();
    await write('P', HIGH, [change('d', 8), change('q', 9)]);
    const read = async (partition: string, range: FeedRange, changes: Change<Doc>[]) => {
      await write(partition, range, changes);
      hub.publish(batch(partition, range, changes));
    };
    await read('P', HIGH, [change('r', 10), change('s', 11)]);
    await read('A', LOW, [change('a', 1), change('b', 7)]);
    return { hub, read };
  };

  it('a range over it read again from below its first change is not published to a client whose snapshot had it', async () => {
    const { hub, read } = await started();
    const res = new FakeResponse();
    hub.connect(res);
    await settle();
    expect(res.events.map((e) => e.type)).toEqual(['snapshot-begin', 'snapshot', 'up-to-date']);
    expect(JSON.parse(res.events[1]!.data)).toContainEqual(expect.objectContaining({ id: 'd', lsn: 8 }));
    // A merge of A and P reads on from A's 7, the least advanced of them: d@8 again.
    await read('M', ALL, [change('d', 8), change('n', 12)]);
    await settle();
    expect(res.changes().map((c) => `${c.id}@${c.lsn}`)).not.toContain('d@8');
    expect(res.events.filter((e) => e.type === 'snapshot-begin')).toHaveLength(2);
  });

  it('an id of another process that stands between the view\'s old position and the first change starts over', async () => {
    const { hub } = await started();
    const res = new FakeResponse();
    hub.connect(res, { lastEventId: 'other.P:5,A:7' });
    await settle();
    expect(res.events[0]).toMatchObject({ type: 'snapshot-begin', data: JSON.stringify({ reason: 'too-old' }) });
    const past = new FakeResponse();
    hub.connect(past, { lastEventId: 'other.P:9,A:7' });
    await settle();
    expect(past.changes().map((c) => `${c.id}@${c.lsn}`)).toEqual(['r@10', 's@11']);
    expect(hub.stats().resumed).toBe(1);
  });
});
