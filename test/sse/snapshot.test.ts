import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { ViewStore } from '../../src/sinks/ViewStore.js';
import { createSseHub, type SseHubOptions } from '../../src/sse/index.js';
import { parseEventId } from '../../src/sse/eventId.js';
import { FakeResponse } from './fakeResponse.js';
import { liveViewOf, MiniFeed, settle, withWritesDuringRead, type Row } from './snapshotFeed.js';

function hubOf(feed: MiniFeed, options: SseHubOptions<Row, Row> = {}, view: ViewStore<Row> = feed.view) {
  const hub = createSseHub<Row, Row>({ streamId: 'S', scheduler: new VirtualTimeScheduler(), view, project: (c) => c.document, ...options });
  feed.hub = hub;
  return hub;
}

async function viewState(feed: MiniFeed): Promise<Record<string, Row>> {
  return Object.fromEntries((await feed.view.rows()).map((r) => [r.key, r.row]));
}

const types = (res: FakeResponse) => res.events.map((e) => e.type);

describe('snapshot mode: a first connection gets the view, then the changes after it', () => {
  it('sends snapshot-begin, the rows in chunks, up-to-date with the positions they reflect, then live changes', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed, { snapshotChunkRows: 2 });
    for (let i = 0; i < 5; i++) await feed.write(`k${i}`, { v: i });
    await feed.write('k1', undefined);
    const res = new FakeResponse();
    hub.connect(res);
    await settle();
    expect(types(res)).toEqual(['snapshot-begin', 'snapshot', 'snapshot', 'up-to-date']);
    const upToDate = res.events.at(-1)!;
    expect(JSON.parse(upToDate.data)).toEqual({ positions: { 0: 6 }, rows: 4 });
    expect(upToDate.lastEventId).toBe('S.0:6');
    expect(JSON.parse(res.events[1]!.data)[0]).toEqual({ id: 'k0', partition: '0', lsn: 1, timestampMs: 1, data: { v: 0 } });
    await feed.write('k7', { v: 7 });
    await feed.write('k0', { v: 100 });
    const { sync } = liveViewOf<Row>(res);
    const live = sync();
    expect(Object.fromEntries(live.rows)).toEqual(await viewState(feed));
    expect(live.stats).toMatchObject({ snapshots: 1, changes: 2, stale: 0 });
    expect(hub.stats()).toMatchObject({ snapshots: 1, resumed: 0 });
  });

  it('holds the changes written while the rows are read, and sends each exactly once after up-to-date', async () => {
    const feed = new MiniFeed();
    for (let i = 0; i < 6; i++) await feed.write(`k${i}`, { v: i });
    // Between the read of the positions and the read of the rows: an update, a new row, a delete.
    const view = withWritesDuringRead(feed.view, async () => {
      await feed.write('k2', { v: 20 });
      await feed.write('new', { v: 99 });
      await feed.write('k3', undefined);
    });
    const hub = hubOf(feed, {}, view);
    const res = new FakeResponse();
    hub.connect(res);
    await settle();
    await feed.write('k2', { v: 21 }); // after the snapshot: must arrive
    const { sync } = liveViewOf<Row>(res);
    const live = sync();
    expect(Object.fromEntries(live.rows)).toEqual(await viewState(feed));
    // The rows already carried k2@20 and `new`; the delete of k3 (gone from the rows) is sent; nothing twice.
    expect(res.changes().map((c) => `${c.id}@${c.lsn}`)).toEqual(['k3@9', 'k2@10']);
    expect(live.stats.stale).toBe(0);
  });

  it('a client that reconnects before the stream passed the rows read ahead of its positions gets none of them twice', async () => {
    // Found by the simulation (`--sse on`): up-to-date carried the positions as its id, so a browser that
    // reconnected then resumed from them and got again, as changes, what its rows already held.
    const feed = new MiniFeed();
    for (let i = 0; i < 3; i++) await feed.write(`k${i}`, { v: i });
    // The pipeline's view write lands while the rows are read; its broadcast comes after the snapshot.
    const view = withWritesDuringRead(feed.view, async () => {
      feed.hub = undefined;
      await feed.write('k1', { v: 11 });
    });
    const hub = hubOf(feed, {}, view);
    const first = new FakeResponse();
    hub.connect(first);
    await settle();
    expect(types(first)).toEqual(['snapshot-begin', 'snapshot', 'up-to-date']);
    first.disconnect();
    // The browser comes back with the last event id it holds (its parser survives the connection).
    const again = new FakeResponse(first.parser);
    const lastEventId = first.parser.lastEventId;
    hub.connect(again, lastEventId ? { lastEventId } : {});
    await settle();
    const p = feed.partitionOf('k1');
    const late = p.log.at(-1)!;
    hub.publish(new ChangeBatch({ partition: p.token, changes: [late], position: `p${late.lsn}`, range: p.range, epoch: p.epoch }));
    feed.hub = hub;
    await feed.write('k2', { v: 12 });
    // What the browser holds since its last snapshot began: k1@4 once (a row or a change), k2@5 after it.
    const events = first.parser.events;
    const since = events.slice(events.map((e) => e.type).lastIndexOf('snapshot-begin'));
    const got = since.flatMap((e) =>
      e.type === 'snapshot' ? (JSON.parse(e.data) as { id: string; lsn: number }[]).map((r) => `${r.id}@${r.lsn}`) : e.type === 'message' ? [`${(JSON.parse(e.data) as { id: string }).id}@${(JSON.parse(e.data) as { lsn: number }).lsn}`] : [],
    );
    expect(got.filter((k) => k === 'k1@4')).toHaveLength(1);
    expect(got.at(-1)).toBe('k2@5');
    // Once the stream passed those rows, ids are resumable again.
    expect(parseEventId(first.parser.lastEventId)?.positions.get('0')).toBe(5);
  });

  it('applies a client its own row filter and projection, and its change filter and projection afterwards', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed);
    for (let i = 0; i < 4; i++) await feed.write(`k${i}`, { v: i });
    const res = new FakeResponse();
    hub.connect(res, { filterRow: (r) => r.row.v % 2 === 0, projectRow: (r) => r.row.v * 10, filter: (c) => (c.document?.v ?? 0) % 2 === 0, project: (c) => (c.document?.v ?? 0) * 10 });
    await settle();
    await feed.write('k9', { v: 8 });
    await feed.write('k8', { v: 7 });
    const live = liveViewOf<number>(res).sync();
    expect(Object.fromEntries(live.rows)).toEqual({ k0: 0, k2: 20, k9: 80 });
  });

  it('a burst of clients shares one read of the view', async () => {
    const feed = new MiniFeed();
    for (let i = 0; i < 10; i++) await feed.write(`k${i}`, { v: i });
    let reads = 0;
    const view: ViewStore<Row> = { ...withWritesDuringRead(feed.view, async () => undefined), rows: () => (reads++, feed.view.rows()) };
    const hub = hubOf(feed, {}, view);
    const clients = Array.from({ length: 50 }, () => new FakeResponse());
    for (const res of clients) hub.connect(res);
    await settle();
    expect(reads).toBe(1);
    for (const res of clients) expect(liveViewOf<Row>(res).sync().rows.size).toBe(10);
  });

  it('a view that fails to read drops the client with view-error (it reconnects and tries again)', async () => {
    const feed = new MiniFeed();
    const broken: ViewStore<Row> = { ...withWritesDuringRead(feed.view, async () => undefined), rows: () => Promise.reject(new Error('connection reset')) };
    const hub = hubOf(feed, {}, broken);
    const res = new FakeResponse();
    hub.connect(res);
    await settle();
    expect(JSON.parse(res.events.find((e) => e.type === 'dropped')!.data).reason).toBe('view-error');
    expect(hub.stats().dropped['view-error']).toBe(1);
  });
});

describe('snapshot mode: resume', () => {
  it('a client that comes back with its Last-Event-ID gets only what it missed, no snapshot', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed);
    for (let i = 0; i < 4; i++) await feed.write(`k${i}`, { v: i });
    const first = new FakeResponse();
    hub.connect(first);
    await settle();
    await feed.write('k1', { v: 11 });
    first.disconnect();
    await feed.write('k2', { v: 12 });
    await feed.write('k5', { v: 15 });
    const again = new FakeResponse();
    hub.connect(again, { lastEventId: first.parser.lastEventId });
    await settle();
    expect(types(again)).toEqual(['message', 'message']);
    expect(again.changes().map((c) => c.id)).toEqual(['k2', 'k5']);
    expect(hub.stats()).toMatchObject({ snapshots: 1, resumed: 1 });
  });

  it('gets a fresh snapshot, not a bare reset, when what it missed is gone from the buffer', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed, { replayLimit: 3 });
    await feed.write('a', { v: 1 });
    const first = new FakeResponse();
    hub.connect(first);
    await settle();
    first.disconnect();
    for (let i = 0; i < 5; i++) await feed.write(`b${i}`, { v: i });
    const again = new FakeResponse();
    hub.connect(again, { lastEventId: first.parser.lastEventId });
    await settle();
    expect(types(again)[0]).toBe('snapshot-begin');
    expect(JSON.parse(again.events[0]!.data)).toEqual({ reason: 'too-old' });
    expect(again.events[0]!.lastEventId).toBe(''); // a cut during the snapshot reconnects without a position
    expect(Object.fromEntries(liveViewOf<Row>(again).sync().rows)).toEqual(await viewState(feed));
  });

  it('after a server restart, a new hub replays to a client at or past the view, and snapshots one behind it', async () => {
    const feed = new MiniFeed();
    const before = hubOf(feed);
    for (let i = 0; i < 4; i++) await feed.write(`k${i}`, { v: i });
    const current = new FakeResponse();
    const behind = new FakeResponse();
    before.connect(current);
    before.connect(behind);
    await settle();
    behind.disconnect();
    await feed.write('k1', { v: 11 });
    before.close();
    // The new process: another stream id; its feed re-reads from an older checkpoint, then goes on.
    const after = createSseHub<Row, Row>({ view: feed.view, project: (c) => c.document, scheduler: new VirtualTimeScheduler() });
    feed.hub = after;
    const p0 = feed.partitions.get('0')!;
    const resumed = new FakeResponse();
    const stale = new FakeResponse();
    after.connect(resumed, { lastEventId: current.parser.lastEventId });
    after.connect(stale, { lastEventId: behind.parser.lastEventId });
    await settle();
    await feed.deliver(p0, p0.log.slice(-3)); // the re-read: already in the view
    await feed.write('k2', { v: 12 });
    expect(types(resumed)).toEqual(['message']);
    expect(resumed.changes().map((c) => `${c.id}@${c.lsn}`)).toEqual(['k2@6']);
    expect(types(stale)[0]).toBe('snapshot-begin');
    for (const res of [current, resumed]) expect(res.parser.lastEventId).not.toBe('');
    const live = liveViewOf<Row>(current).sync();
    liveViewOf<Row>(resumed);
    // The page that kept its state and resumed: its state plus what it got equals the view.
    const rows = new Map(live.rows);
    for (const c of resumed.changes<Row>()) rows.set(c.id, c.data!);
    expect(Object.fromEntries(rows)).toEqual(await viewState(feed));
    expect(Object.fromEntries(liveViewOf<Row>(stale).sync().rows)).toEqual(await viewState(feed));
    expect(parseEventId(resumed.parser.lastEventId)!.positions.get('0')).toBe(6);
  });
});

describe('snapshot mode: lineage and bounds', () => {
  it('a split child re-reading its parent sends nothing twice, to live clients and to clients whose snapshot knew the parent only', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed);
    for (let i = 0; i < 20; i++) await feed.write(`k${i}`, { v: i });
    const live = new FakeResponse();
    hub.connect(live);
    await settle();
    const [left] = await feed.split('0', 8);
    const late = new FakeResponse();
    hub.connect(late);
    await settle();
    await feed.split(left.token, 5);
    for (let i = 0; i < 20; i += 3) await feed.write(`k${i}`, { v: 100 + i });
    for (const res of [live, late]) {
      const view = liveViewOf<Row>(res).sync();
      expect(view.stats.stale).toBe(0);
      expect(Object.fromEntries(view.rows)).toEqual(await viewState(feed));
      const seen = res.changes().map((c) => `${c.id}@${c.lsn}`);
      expect(new Set(seen).size).toBe(seen.length);
    }
  });

  it('a client that stops reading during its snapshot holds no more than the bound; it finishes once it reads', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed, { maxBufferedBytes: 1_000, snapshotChunkRows: 5 });
    for (let i = 0; i < 100; i++) await feed.write(`k${i}`, { v: i });
    const res = new FakeResponse();
    res.stalled = true;
    hub.connect(res);
    await settle();
    const chunk = 5 * 80 + 40; // one snapshot event
    expect(res.peakUnsent).toBeLessThanOrEqual(1_000 + chunk);
    for (let i = 0; i < 5; i++) await feed.write(`k${i}`, { v: 1000 + i });
    for (let i = 0; i < 200 && !res.events.some((e) => e.type === 'up-to-date'); i++) {
      res.resume();
      res.stalled = true;
      await settle(1);
    }
    res.resume();
    await settle();
    expect(res.peakUnsent).toBeLessThanOrEqual(1_000 + chunk);
    expect(Object.fromEntries(liveViewOf<Row>(res).sync().rows)).toEqual(await viewState(feed));
  });

  it('drops a client whose snapshot took longer than the buffer holds changes', async () => {
    const feed = new MiniFeed();
    const hub = hubOf(feed, { maxBufferedBytes: 500, snapshotChunkRows: 5, replayLimit: 10 });
    for (let i = 0; i < 50; i++) await feed.write(`k${i}`, { v: i });
    const res = new FakeResponse();
    res.stalled = true;
    hub.connect(res);
    await settle();
    for (let i = 0; i < 20; i++) await feed.write(`k${i}`, { v: 1000 + i });
    expect(res.ended).toBe(true);
    expect(hub.stats()).toMatchObject({ clients: 0, dropped: { 'slow-client': 1 } });
  });
});
