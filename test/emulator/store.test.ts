import { describe, expect, it } from 'vitest';
import { allVersionsItem, parseStart, readChanges } from '../../src/emulator/feedReader.js';
import { Store, type ContainerState, type LogEntry } from '../../src/emulator/store/Store.js';

function setup(rangeCount = 1, defaultTtl?: number) {
  let nowMs = Date.UTC(2026, 0, 1);
  const store = new Store({ now: () => nowMs, initialRangeCount: () => rangeCount, defaultPartitionKeyVersion: 2 });
  store.createDatabase({ id: 'db' });
  const c = store.createContainer('db', { id: 'c', partitionKey: { paths: ['/pk'] }, ...(defaultTtl ? { defaultTtl } : {}) });
  const advance = (ms: number) => (nowMs += ms);
  return { store, c, advance };
}

const all = () => true;
const ids = (es: LogEntry[]) => es.map((e) => `${e.op}:${e.id}`);

/** Every change of a container from the beginning, range by range, following continuations page by page. */
function drain(c: ContainerState, allVersions: boolean, pageSize: number): LogEntry[] {
  const out: LogEntry[] = [];
  for (const r of c.ranges) {
    let start = parseStart(undefined, undefined);
    for (;;) {
      if (start === 'invalid') throw new Error('bad start');
      const page = readChanges(r, start, allVersions, pageSize, all);
      if (page.entries.length === 0) break;
      out.push(...page.entries);
      start = { kind: 'afterLsn', lsn: page.continuationLsn };
    }
  }
  return out;
}

describe('emulator store: change log', () => {
  it('LatestVersion gives each live document once, at its latest version, in LSN order', () => {
    const { store, c } = setup();
    store.createDocument(c, { id: 'a', pk: 'x', v: 1 }, ['x'], false);
    store.createDocument(c, { id: 'b', pk: 'x', v: 1 }, ['x'], false);
    store.replaceDocument(c, 'a', { id: 'a', pk: 'x', v: 2 }, ['x']);
    store.createDocument(c, { id: 'gone', pk: 'y' }, ['y'], false);
    store.deleteDocument(c, 'gone', ['y']);
    const page = readChanges(c.ranges[0]!, { kind: 'beginning' }, false, 100, all);
    expect(ids(page.entries)).toEqual(['create:b', 'replace:a']);
    expect(page.entries[1]!.current?.['v']).toBe(2);
    expect(page.continuationLsn).toBe(5);
  });

  it('AllVersionsAndDeletes gives every write, with the delete carrying its previous image', () => {
    const { store, c } = setup();
    store.createDocument(c, { id: 'a', pk: 'x', v: 1 }, ['x'], false);
    store.createDocument(c, { id: 'a', pk: 'x', v: 2 }, ['x'], true);
    store.deleteDocument(c, 'a', ['x']);
    const page = readChanges(c.ranges[0]!, { kind: 'afterLsn', lsn: 0 }, true, 100, all);
    expect(ids(page.entries)).toEqual(['create:a', 'replace:a', 'delete:a']);
    const del = allVersionsItem(page.entries[2]!, c.partitionKey);
    expect(del).toMatchObject({
      current: {},
      metadata: { operationType: 'delete', lsn: 3, previousImageLSN: 2, id: 'a', partitionKey: { pk: 'x' }, timeToLiveExpired: false },
      previous: { id: 'a', v: 2 },
    });
    expect(allVersionsItem(page.entries[1]!, c.partitionKey)).not.toHaveProperty('previous');
  });

  it('pages by the item limit and resumes after the last LSN without losing or repeating anything', () => {
    const { store, c } = setup(3);
    for (let i = 0; i < 50; i++) store.createDocument(c, { id: `d${i}`, pk: `p${i % 7}` }, [`p${i % 7}`], false);
    for (let i = 0; i < 50; i += 3) store.createDocument(c, { id: `d${i}`, pk: `p${i % 7}`, v: 2 }, [`p${i % 7}`], true);
    const seen = drain(c, false, 4).map((e) => e.id);
    expect(seen).toHaveLength(50);
    expect(new Set(seen).size).toBe(50);
    expect(drain(c, true, 4)).toHaveLength(50 + 17);
  });

  it('answers "now" with no changes and the current LSN', () => {
    const { store, c } = setup();
    store.createDocument(c, { id: 'a', pk: 'x' }, ['x'], false);
    expect(readChanges(c.ranges[0]!, { kind: 'now' }, false, 10, all)).toEqual({ entries: [], continuationLsn: 1 });
  });

  it('starts a time read at the first change at or after the time', () => {
    const { store, c, advance } = setup();
    store.createDocument(c, { id: 'old', pk: 'x' }, ['x'], false);
    advance(5_000);
    const since = store.now();
    store.createDocument(c, { id: 'new', pk: 'x' }, ['x'], false);
    expect(ids(readChanges(c.ranges[0]!, { kind: 'time', sinceMs: since }, false, 10, all).entries)).toEqual(['create:new']);
  });

  it('reads If-None-Match before If-Modified-Since, as the SDK sends both', () => {
    expect(parseStart('"7"', 'Thu, 01 Jan 2026 00:00:00 GMT')).toEqual({ kind: 'afterLsn', lsn: 7 });
    expect(parseStart(undefined, 'Thu, 01 Jan 2026 00:00:00 GMT')).toEqual({ kind: 'time', sinceMs: Date.UTC(2026, 0, 1) });
    expect(parseStart('*', undefined)).toEqual({ kind: 'now' });
    expect(parseStart('', undefined)).toEqual({ kind: 'beginning' });
    expect(parseStart('"nope"', undefined)).toBe('invalid');
  });
});

describe('emulator store: splits and merges', () => {
  it('children continue the parent LSN and hold its log halves, so a parent etag means the same on both', () => {
    const { store, c } = setup();
    for (let i = 0; i < 20; i++) store.createDocument(c, { id: `d${i}`, pk: `p${i}` }, [`p${i}`], false);
    const parentEtag = 12;
    const before = readChanges(c.ranges[0]!, { kind: 'afterLsn', lsn: parentEtag }, false, 100, all).entries.map((e) => e.id);
    const [left, right] = store.split(c, '0');
    expect(left.lsn).toBe(20);
    expect(right.lsn).toBe(20);
    expect(left.max).toBe(right.min);
    expect(left.log.length + right.log.length).toBe(20);
    expect(left.log.length).toBeGreaterThan(0);
    expect(right.log.length).toBeGreaterThan(0);
    const after = [left, right].flatMap((r) => readChanges(r, { kind: 'afterLsn', lsn: parentEtag }, false, 100, all).entries.map((e) => e.id));
    expect(after.sort()).toEqual(before.sort());
    expect(() => store.range(c, '0')).toThrow(expect.objectContaining({ status: 410, substatus: 1002 }));
    expect(c.ranges.map((r) => r.id)).toEqual([left.id, right.id]);
  });

  it('routes new writes to the child that owns the key', () => {
    const { store, c } = setup();
    for (let i = 0; i < 10; i++) store.createDocument(c, { id: `d${i}`, pk: `p${i}` }, [`p${i}`], false);
    const [left, right] = store.split(c, '0');
    store.createDocument(c, { id: 'late', pk: 'p3' }, ['p3'], false);
    const owner = [left, right].find((r) => r.log.some((e) => e.id === 'late'))!;
    expect(owner.lsn).toBe(11);
    expect(owner.log.filter((e) => e.pk[0] === 'p3')).toHaveLength(2);
  });

  it('splits an empty V2 range at the middle of its hash interval', () => {
    const { store, c } = setup();
    const [left] = store.split(c, '0');
    expect(left.max).toBe('20000000000000000000000000000000');
  });

  it('rejects a boundary outside the range', () => {
    const { store, c } = setup(2);
    expect(() => store.split(c, '0', '30000000000000000000000000000000')).toThrow(/strictly inside/);
  });

  it('merges neighbours into one range that keeps both logs in LSN order', () => {
    const { store, c } = setup(2);
    for (let i = 0; i < 30; i++) store.createDocument(c, { id: `d${i}`, pk: `p${i}` }, [`p${i}`], false);
    const [a, b] = c.ranges;
    const merged = store.merge(c, a!.id, b!.id);
    expect(merged.lsn).toBe(Math.max(a!.lsn, b!.lsn));
    expect(merged.log).toHaveLength(30);
    expect(merged.log.map((e) => e.lsn)).toEqual([...merged.log.map((e) => e.lsn)].sort((x, y) => x - y));
    expect(drain(c, false, 3).map((e) => e.id).sort()).toEqual(Array.from({ length: 30 }, (_, i) => `d${i}`).sort());
    expect(() => store.range(c, a!.id)).toThrow(expect.objectContaining({ status: 410 }));
  });
});

describe('emulator store: documents', () => {
  it('rejects a partition key header that does not match the body with 400/1001', () => {
    const { store, c } = setup();
    expect(() => store.createDocument(c, { id: 'a', pk: 'x' }, ['y'], false)).toThrow(
      expect.objectContaining({ status: 400, substatus: 1001 }),
    );
  });

  it('expires documents under TTL into deletes marked timeToLiveExpired', () => {
    const { store, c, advance } = setup(1, 60);
    store.createDocument(c, { id: 'short', pk: 'x', ttl: 5 }, ['x'], false);
    store.createDocument(c, { id: 'default', pk: 'x' }, ['x'], false);
    store.createDocument(c, { id: 'forever', pk: 'x', ttl: -1 }, ['x'], false);
    advance(10_000);
    expect(store.documents(c).map((d) => d['id'])).toEqual(['default', 'forever']);
    advance(60_000);
    expect(store.documents(c).map((d) => d['id'])).toEqual(['forever']);
    const deletes = c.ranges[0]!.log.filter((e) => e.op === 'delete');
    expect(deletes.map((e) => [e.id, e.ttlExpired])).toEqual([
      ['short', true],
      ['default', true],
    ]);
  });

  it('turning TTL on by replacing the container expires documents counted from their last write', () => {
    const { store, c, advance } = setup();
    store.createDocument(c, { id: 'a', pk: 'x' }, ['x'], false);
    advance(30_000);
    store.replaceContainer('db', 'c', { id: 'c', defaultTtl: 20 });
    expect(store.documents(c)).toHaveLength(0);
    expect(c.resource).toMatchObject({ defaultTtl: 20, partitionKey: { paths: ['/pk'] } });
    expect(c.ranges[0]!.log.at(-1)).toMatchObject({ op: 'delete', ttlExpired: true });
  });

  it('patches with set, incr, add, remove and move', () => {
    const { store, c } = setup();
    store.createDocument(c, { id: 'a', pk: 'x', n: 1, tags: ['t'], old: 'o' }, ['x'], false);
    const doc = store.patchDocument(c, 'a', ['x'], [
      { op: 'incr', path: '/n', value: 2 },
      { op: 'add', path: '/tags/-', value: 'u' },
      { op: 'set', path: '/owner', value: 'host-1' },
      { op: 'move', from: '/old', path: '/renamed' },
      { op: 'remove', path: '/tags/0' },
    ]);
    expect(doc).toMatchObject({ n: 3, tags: ['u'], owner: 'host-1', renamed: 'o' });
    expect(doc).not.toHaveProperty('old');
  });
});
