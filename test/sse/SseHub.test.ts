import { from, VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Change } from '../../src/core/Change.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { createSseHub, type SseHubOptions } from '../../src/sse/index.js';
import { formatEventId } from '../../src/sse/eventId.js';
import { FakeResponse } from './fakeResponse.js';

interface Order {
  id: string;
  customer: string;
  total: number;
  secret: string;
}

/** A hub on virtual time: `advance(ms)` runs the timers due, nothing sleeps. */
function setup(options: SseHubOptions<Order> = {}) {
  const scheduler = new VirtualTimeScheduler();
  let now = 0;
  const advance = (ms: number) => {
    now += ms;
    scheduler.maxFrames = now;
    scheduler.flush();
    scheduler.frame = now;
  };
  const hub = createSseHub<Order>({ streamId: 'S', scheduler, ...options });
  let lsn = 0;
  const batch = (partition: string, ...ids: number[]) =>
    new ChangeBatch<Order>({
      partition,
      position: `p${lsn}`,
      changes: ids.map(
        (n): Change<Order> => ({
          id: `o${n}`,
          operation: 'upsert',
          document: { id: `o${n}`, customer: n % 2 ? 'odd' : 'even', total: n * 10, secret: 'do-not-send' },
          lsn: ++lsn,
          timestampMs: 1000 + n,
        }),
      ),
    });
  return { hub, advance, batch };
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
/** The event id of stream S at these positions (LSN per partition). */
const at = (positions: Record<string, number>) => formatEventId('S', new Map(Object.entries(positions)));

describe('SseHub: multicast', () => {
  it('sends every change to every client, each id carrying the LSN reached per partition, and no document unless asked', () => {
    const { hub, batch } = setup();
    const a = new FakeResponse();
    const b = new FakeResponse();
    hub.connect(a);
    hub.connect(b);
    hub.publish(batch('0', 1, 2));
    hub.publish([batch('1', 3), batch('0', 4)]);
    for (const res of [a, b]) {
      expect(res.parser.retry).toBe(1000);
      expect(res.changes().map((c) => [c.eventId, c.id])).toEqual([
        ['S.0:1', 'o1'],
        ['S.0:2', 'o2'],
        ['S.0:2,1:3', 'o3'],
        ['S.0:4,1:3', 'o4'],
      ]);
      const first = JSON.parse(res.events[0]!.data);
      expect(first).toEqual({ id: 'o1', operation: 'upsert', partition: '0', lsn: 1, timestampMs: 1001 });
    }
    expect(hub.lastEventId).toBe(at({ 0: 4, 1: 3 }));
    expect(hub.stats()).toMatchObject({ clients: 2, connected: 2, head: 4, replayable: 4 });
  });

  it('applies each client its own filter and projection (the hub default otherwise)', () => {
    const { hub, batch } = setup({ project: (c) => ({ total: c.document?.total }) });
    const all = new FakeResponse();
    const odd = new FakeResponse();
    const full = new FakeResponse();
    hub.connect(all);
    hub.connect(odd, { filter: (c) => c.document?.customer === 'odd', project: (c) => c.document?.customer });
    hub.connect(full, { project: (c) => c.document });
    hub.publish(batch('0', 1, 2, 3));
    expect(all.changes().map((c) => c.data)).toEqual([{ total: 10 }, { total: 20 }, { total: 30 }]);
    expect(odd.changes().map((c) => [c.eventId, c.data])).toEqual([
      ['S.0:1', 'odd'],
      ['S.0:3', 'odd'],
    ]);
    expect(full.changes()[1]!.data).toMatchObject({ id: 'o2', secret: 'do-not-send' });
  });

  it('a filter or projection that throws leaves that change out for that client only', () => {
    const { hub, batch } = setup();
    const fine = new FakeResponse();
    const broken = new FakeResponse();
    hub.connect(fine);
    hub.connect(broken, { project: (c) => (c.id === 'o2' ? JSON.parse('{') : c.id) });
    hub.publish(batch('0', 1, 2, 3));
    expect(fine.changes()).toHaveLength(3);
    expect(broken.changes().map((c) => c.data)).toEqual(['o1', 'o3']);
    expect(hub.stats().clientErrors).toBe(1);
  });

  it('does not send a change again when its partition is re-read from an older position', () => {
    const { hub } = setup();
    const res = new FakeResponse();
    hub.connect(res);
    const change = (id: string, lsn: number): Change<Order> => ({ id, operation: 'upsert', document: undefined, lsn, timestampMs: 0 });
    hub.publish(new ChangeBatch({ partition: '0', position: 'a', changes: [change('x', 5), change('y', 5), change('z', 6)] }));
    hub.publish(new ChangeBatch({ partition: '0', position: 'b', changes: [change('y', 5), change('z', 6), change('w', 7)] }));
    expect(res.changes().map((c) => `${c.eventId} ${c.id}`)).toEqual(['S.0:5 x', 'S.0:5 y', 'S.0:6 z', 'S.0:7 w']);
  });

  it('broadcast() passes each batch on unchanged, at once, even to a pipeline whose only client stalled', () => {
    const { hub, batch } = setup({ maxBufferedBytes: 10 });
    const stalled = new FakeResponse();
    stalled.stalled = true;
    hub.connect(stalled);
    const passed: unknown[] = [];
    const batches = [batch('0', 1), batch('0', 2, 3), batch('1')];
    from(batches)
      .pipe(hub.broadcast())
      .subscribe((b) => passed.push(b));
    expect(passed).toEqual(batches);
    expect(passed[0]).toBe(batches[0]);
    expect(hub.stats().head).toBe(3);
  });
});

describe('SseHub: resume by Last-Event-ID', () => {
  it('a client that reconnects gets exactly what it missed, then live changes: no gap, no duplicate', () => {
    const { hub, batch } = setup();
    const first = new FakeResponse();
    hub.connect(first);
    hub.publish(batch('0', 1, 2, 3));
    first.disconnect();
    hub.publish(batch('1', 4, 5));
    const last = first.parser.lastEventId;
    expect(last).toBe('S.0:3');
    const second = new FakeResponse();
    hub.connect(second, { lastEventId: last });
    hub.publish(batch('0', 6));
    const ids = [...first.changes(), ...second.changes()].map((c) => c.id);
    expect(ids).toEqual(range(1, 6).map((n) => `o${n}`));
    expect(hub.stats()).toMatchObject({ resumed: 1, resets: 0, clients: 1 });
  });

  it('a first connection learns the position at once, so a reconnect before any event still resumes without a gap', () => {
    const { hub, batch } = setup();
    hub.publish(batch('0', 1, 2));
    const first = new FakeResponse();
    hub.connect(first);
    expect(first.changes()).toEqual([]);
    expect(first.parser.lastEventId).toBe('S.0:2');
    first.disconnect();
    hub.publish(batch('0', 3));
    const second = new FakeResponse();
    hub.connect(second, { lastEventId: first.parser.lastEventId });
    expect(second.changes().map((c) => c.eventId)).toEqual(['S.0:3']);
  });

  it("replays through the client's own filter", () => {
    const { hub, batch } = setup();
    hub.publish(batch('0', 1, 2, 3, 4, 5));
    const res = new FakeResponse();
    hub.connect(res, { lastEventId: 'S.0:1', filter: (c) => c.document?.customer === 'odd' });
    expect(res.changes().map((c) => c.id)).toEqual(['o3', 'o5']);
    expect(res.parser.lastEventId).toBe('S.0:5');
  });

  it('sends a reset (and the position to resume from) when the gap is older than the replay buffer', () => {
    const { hub, batch } = setup({ replayLimit: 3 });
    hub.publish(batch('0', ...range(1, 10)));
    const ok = new FakeResponse();
    hub.connect(ok, { lastEventId: 'S.0:7' }); // 8, 9, 10 are held
    expect(ok.changes().map((c) => c.lsn)).toEqual([8, 9, 10]);
    const old = new FakeResponse();
    hub.connect(old, { lastEventId: 'S.0:6' }); // 7 is gone
    expect(old.changes()).toEqual([]);
    const reset = old.events.find((e) => e.type === 'reset')!;
    expect(JSON.parse(reset.data)).toEqual({ reason: 'too-old', lastEventId: 'S.0:6', resumeFrom: at({ 0: 10 }) });
    expect(reset.lastEventId).toBe(at({ 0: 10 }));
    hub.publish(batch('0', 11));
    expect(old.changes().map((c) => c.lsn)).toEqual([11]);
    expect(hub.stats()).toMatchObject({ resets: 1, resumed: 1 });
  });

  it('sends a reset for a malformed id, a partition it does not know, or a position it can no longer vouch for', () => {
    const { hub, batch } = setup({ replayLimit: 3 });
    hub.publish(batch('0', 1, 2, 3, 4, 5));
    const reasons = ['garbage', 'S.7:1', 'S.0:1', 'S.0:1,7:3'].map((lastEventId) => {
      const res = new FakeResponse();
      hub.connect(res, { lastEventId });
      return JSON.parse(res.events.find((e) => e.type === 'reset')!.data).reason;
    });
    expect(reasons).toEqual(['unknown-stream', 'unknown-stream', 'too-old', 'unknown-stream']);
  });
});

describe('SseHub: slow clients', () => {
  it('writes no more to a client that stops reading than the bound (plus one event); it catches up from the buffer once it reads', () => {
    const { hub, batch } = setup({ maxBufferedBytes: 2_000 });
    const fast = new FakeResponse();
    const slow = new FakeResponse();
    hub.connect(fast);
    hub.connect(slow, { project: (c) => c.document });
    slow.stalled = true;
    hub.publish(batch('0', ...range(1, 60))); // one publish of ~10 KB for this client
    for (let n = 61; n <= 100; n++) hub.publish(batch('0', n));
    expect(fast.changes()).toHaveLength(100);
    expect(slow.peakUnsent).toBeLessThanOrEqual(2_000);
    expect(slow.ended).toBe(false);
    slow.resume(); // reads what was unsent: the hub writes the next bound's worth, and so on
    for (let i = 0; i < 100 && slow.changes().length < 100; i++) {
      slow.stalled = true;
      slow.resume();
    }
    expect(slow.changes().map((c) => c.lsn)).toEqual(range(1, 100));
    expect(slow.peakUnsent).toBeLessThanOrEqual(2_000);
  });

  it('drops a client the replay buffer left behind; the others get everything; its connection is destroyed after the grace', () => {
    const { hub, batch, advance } = setup({ maxBufferedBytes: 2_000, closeGraceMs: 1_000, replayLimit: 20 });
    const fast = new FakeResponse();
    const slow = new FakeResponse();
    hub.connect(fast);
    hub.connect(slow, { project: (c) => c.document });
    slow.stalled = true;
    for (let n = 1; n <= 100; n++) hub.publish(batch('0', n));
    expect(fast.changes()).toHaveLength(100);
    // Never more than the bound plus the small farewell message.
    expect(slow.unsent).toBeLessThan(2_000 + 200);
    expect(slow.ended).toBe(true);
    expect(hub.stats()).toMatchObject({ clients: 1, dropped: { 'slow-client': 1, 'hub-closed': 0 } });
    expect(slow.destroyed).toBe(false);
    advance(999);
    expect(slow.destroyed).toBe(false);
    advance(1);
    expect(slow.destroyed).toBe(true);
    expect(slow.unsent).toBe(0);
  });

  it('a dropped client learns why; what it got ends at an event boundary, and its reconnect is reset (the buffer moved on)', () => {
    const { hub, batch } = setup({ maxBufferedBytes: 500, replayLimit: 5 });
    const res = new FakeResponse();
    hub.connect(res);
    res.stalled = true;
    for (let n = 1; n <= 20; n++) hub.publish(batch('0', n));
    res.resume();
    const dropped = res.events.find((e) => e.type === 'dropped')!;
    expect(JSON.parse(dropped.data)).toMatchObject({ reason: 'slow-client', maxBufferedBytes: 500 });
    const got = res.changes().map((c) => c.lsn);
    expect(got).toEqual(range(1, got.length));
    const again = new FakeResponse();
    hub.connect(again, { lastEventId: res.parser.lastEventId });
    expect(JSON.parse(again.events.find((e) => e.type === 'reset')!.data).reason).toBe('too-old');
  });

  it('a resume replay is bounded like a publish', () => {
    const { hub, batch } = setup({ maxBufferedBytes: 1_000 });
    hub.publish(batch('0', ...range(1, 200)));
    const res = new FakeResponse();
    res.stalled = true;
    hub.connect(res, { lastEventId: 'S.0:0', project: (c) => c.document });
    expect(res.peakUnsent).toBeLessThanOrEqual(1_000);
    while (res.unsent > 0) {
      res.resume();
      res.stalled = true;
    }
    res.resume();
    expect(res.changes().map((c) => c.lsn)).toEqual(range(1, 200));
  });

  it('close() drops every client with reason hub-closed and refuses new ones', () => {
    const { hub } = setup();
    const res = new FakeResponse();
    hub.connect(res);
    hub.close();
    expect(JSON.parse(res.events.find((e) => e.type === 'dropped')!.data).reason).toBe('hub-closed');
    expect(hub.stats().dropped['hub-closed']).toBe(1);
    expect(() => hub.connect(new FakeResponse())).toThrow(/hub is closed/);
  });
});

describe('SseHub: heartbeats', () => {
  it('writes a comment line to every client each heartbeatMs, only while clients are connected', () => {
    const { hub, advance } = setup({ heartbeatMs: 1_000 });
    const a = new FakeResponse();
    hub.connect(a);
    advance(999);
    expect(a.parser.comments).toBe(0);
    advance(1);
    expect(a.parser.comments).toBe(1);
    const b = new FakeResponse();
    hub.connect(b);
    advance(2_000);
    expect(a.parser.comments).toBe(3);
    expect(b.parser.comments).toBe(2);
    expect(a.events).toEqual([]); // comments dispatch nothing
    a.disconnect();
    b.disconnect();
    advance(5_000);
    expect(a.parser.comments).toBe(3);
  });

  it("a heartbeat moves a filtered client's last event id to the hub's position, so its resume point stays in the buffer", () => {
    const { hub, batch, advance } = setup({ heartbeatMs: 1_000, replayLimit: 5 });
    const res = new FakeResponse();
    hub.connect(res, { filter: (c) => c.id === 'o1' });
    hub.publish(batch('0', ...range(1, 10)));
    expect(res.parser.lastEventId).toBe('S.0:1');
    advance(1_000);
    expect(res.parser.lastEventId).toBe(at({ 0: 10 }));
    res.disconnect();
    const again = new FakeResponse();
    hub.connect(again, { lastEventId: res.parser.lastEventId, filter: (c) => c.id === 'o1' });
    expect(again.events.filter((e) => e.type === 'reset')).toEqual([]);
  });
});

describe('createSseHub options', () => {
  it('refuses bad values, naming the option', () => {
    expect(() => createSseHub({ replayLimit: -1 })).toThrow(InvalidOptionsError);
    expect(() => createSseHub({ heartbeatMs: 0 })).toThrow(/heartbeatMs: must be an integer >= 1/);
    expect(() => createSseHub({ maxBufferedBytes: 1.5 })).toThrow(/maxBufferedBytes/);
    expect(() => createSseHub({ streamId: 'a.b' })).toThrow(/streamId/);
    expect(() => createSseHub({ project: 'document' as never })).toThrow(/project: must be a function/);
    expect(() => createSseHub({ snapshotChunkRows: 0 })).toThrow(/snapshotChunkRows/);
    expect(() => createSseHub({ view: {} as never })).toThrow(/view: must be a ViewStore/);
  });
});
