import { describe, expect, it } from 'vitest';
import { CredentialsError, PartitionGoneError, ResourceGoneError, TransientError } from '../../src/errors/index.js';
import {
  etagOfShape,
  lsnOfPosition,
  lsnOfSessionToken,
  parseToken,
  rangeIdOfSessionToken,
  rangeToken,
  tokenShape,
} from '../../src/sources/cosmos/continuation.js';
import { toSourceError } from '../../src/sources/cosmos/errors.js';
import { allVersionsChange, latestVersionChange, partitionKeyPaths } from '../../src/sources/cosmos/mapChange.js';

describe('continuation tokens', () => {
  it('builds the SDK feed-range token for one range and reads it back', () => {
    const text = rangeToken('AAAAAYAAAAE=', { minInclusive: '', maxExclusive: '20' }, '"42"');
    expect(JSON.parse(text)).toEqual({
      rid: 'AAAAAYAAAAE=',
      Continuation: [{ minInclusive: '', maxExclusive: '20', continuationToken: '"42"' }],
    });
    expect(parseToken(text)?.Continuation[0]?.continuationToken).toBe('"42"');
    expect(parseToken('{"rid":"x","partitionKey":"p","Continuation":"\\"3\\""}')).toBeUndefined();
    expect(parseToken('not json')).toBeUndefined();
    expect(parseToken(undefined)).toBeUndefined();
  });

  it('reads LSNs from etags and session tokens the way the .NET estimator does', () => {
    expect(lsnOfPosition('"42"')).toBe(42);
    expect(lsnOfPosition('42')).toBe(42);
    expect(lsnOfPosition('W/"7"')).toBe(7);
    expect(lsnOfPosition('"abc"')).toBeUndefined();
    expect(lsnOfPosition(null)).toBeUndefined();
    expect(lsnOfSessionToken('0:-1#12')).toBe(12);
    expect(lsnOfSessionToken('3:1#120#4=110#5=118')).toBe(120);
    expect(lsnOfSessionToken('0:-1#12,1:-1#30')).toBe(30);
    expect(lsnOfSessionToken('0:99')).toBe(99);
    expect(lsnOfSessionToken('')).toBeUndefined();
    expect(rangeIdOfSessionToken('3:-1#12')).toBe('3');
    expect(rangeIdOfSessionToken('0:-1#12,1:-1#30')).toBeUndefined();
  });

  it('reads the LSN of unusual etags and session tokens as before (scanned in place, not split)', () => {
    expect(lsnOfPosition('""')).toBeUndefined();
    expect(lsnOfPosition('"4 2"')).toBeUndefined();
    expect(lsnOfPosition('"007"')).toBe(7);
    expect(lsnOfPosition('W/"12"')).toBe(12);
    expect(lsnOfSessionToken('0:-1#')).toBeUndefined();
    expect(lsnOfSessionToken('0:')).toBeUndefined();
    expect(lsnOfSessionToken('0:-1#+5')).toBeUndefined();
    expect(lsnOfSessionToken('17')).toBe(17);
    expect(lsnOfSessionToken('0:-1#x,1:-1#30,2:5')).toBe(30);
    expect(lsnOfSessionToken('0:-1#40,1:-1#30')).toBe(40);
    // A colon of a later part is not this part's.
    expect(lsnOfSessionToken('8,1:-1#3')).toBe(8);
    expect(lsnOfSessionToken(',')).toBeUndefined();
  });

  it('reads the next etag of a checked token without parsing it, and only when nothing else changed', () => {
    const range = { minInclusive: '', maxExclusive: '20' };
    const shape = tokenShape(rangeToken('AAAAAYAAAAE=', range, '"42"'))!;
    expect(shape).toBeDefined();
    expect(etagOfShape(rangeToken('AAAAAYAAAAE=', range, '"43"'), shape)).toBe('"43"');
    expect(etagOfShape(rangeToken('AAAAAYAAAAE=', range, 'W/"1000"'), shape)).toBe('W/"1000"');
    expect(etagOfShape(rangeToken('AAAAAYAAAAE=', range, 'a\\b'), shape)).toBe('a\\b');
    expect(etagOfShape(rangeToken('AAAAAYAAAAE=', range, ''), shape)).toBeUndefined();
    // Another range (a split's child), another container, or a second entry: parsed and checked in full.
    expect(etagOfShape(rangeToken('AAAAAYAAAAE=', { minInclusive: '', maxExclusive: '10' }, '"43"'), shape)).toBeUndefined();
    expect(etagOfShape(rangeToken('BBBBBYAAAAE=', range, '"43"'), shape)).toBeUndefined();
    const two = JSON.stringify({
      rid: 'AAAAAYAAAAE=',
      Continuation: [
        { minInclusive: '', maxExclusive: '20', continuationToken: '"43"' },
        { minInclusive: '10', maxExclusive: '20', continuationToken: '"44"' },
      ],
    });
    expect(etagOfShape(two, shape)).toBeUndefined();
    expect(tokenShape(two)).toBeUndefined();
    // An etag whose text would close the string and add fields is not taken for an etag.
    const sneaky = rangeToken('AAAAAYAAAAE=', range, '"43"').replace('\\"43\\"', '\\"43\\","x":"');
    expect(etagOfShape(sneaky, shape)).toBeUndefined();
    // Fields after the etag (as other SDK versions may add) are part of the shape.
    const withMore = (etag: string, epk: string) =>
      JSON.stringify({ rid: 'r', Continuation: [{ minInclusive: '', maxExclusive: 'FF', continuationToken: etag, epkMinHeader: epk }] });
    const moreShape = tokenShape(withMore('"1"', 'a'))!;
    expect(etagOfShape(withMore('"2"', 'a'), moreShape)).toBe('"2"');
    expect(etagOfShape(withMore('"2"', 'b'), moreShape)).toBeUndefined();
    expect(tokenShape('not a token')).toBeUndefined();
  });
});

describe('mapping change feed items', () => {
  const key = partitionKeyPaths(['/tenant']);

  it('maps a LatestVersion document: upsert, _lsn, _ts in ms, key value', () => {
    const change = latestVersionChange({ id: 'a', tenant: 't1', _lsn: 9, _ts: 1_700_000_000 }, key, 0);
    expect(change).toEqual({
      id: 'a',
      operation: 'upsert',
      document: { id: 'a', tenant: 't1', _lsn: 9, _ts: 1_700_000_000 },
      lsn: 9,
      timestampMs: 1_700_000_000_000,
      partitionKey: 't1',
    });
    expect(latestVersionChange({ id: 'b', t: { x: 1 } }, partitionKeyPaths(['/t/x', '/id']), 5)).toMatchObject({ lsn: 5, partitionKey: [1, 'b'] });
  });

  it('maps AllVersionsAndDeletes items, including TTL deletes', () => {
    const create = allVersionsChange(
      { current: { id: 'a', tenant: 't1', v: 1 }, metadata: { operationType: 'create', lsn: 3, crts: 100 } },
      key,
      0,
    );
    expect(create).toEqual({ id: 'a', operation: 'create', document: { id: 'a', tenant: 't1', v: 1 }, lsn: 3, timestampMs: 100_000, partitionKey: 't1' });
    const del = allVersionsChange(
      {
        current: {},
        previous: { id: 'a', tenant: 't1', v: 2 },
        metadata: { operationType: 'delete', lsn: 5, crts: 101, id: 'a', partitionKey: { tenant: 't1' }, timeToLiveExpired: true },
      },
      key,
      0,
    );
    expect(del).toEqual({
      id: 'a',
      operation: 'delete',
      document: undefined,
      previous: { id: 'a', tenant: 't1', v: 2 },
      lsn: 5,
      timestampMs: 101_000,
      partitionKey: 't1',
      timeToLiveExpired: true,
    });
  });
});

describe('error mapping', () => {
  const map = (err: unknown): unknown => toSourceError(err, 'dbs/db/colls/c', '3');

  it('throttling, unavailability and timeouts are transient, with the retry-after', () => {
    const throttled = map({ code: 429, retryAfterInMs: 120, headers: {} });
    expect(throttled).toBeInstanceOf(TransientError);
    expect(throttled).toMatchObject({ statusCode: 429, retryAfterMs: 120 });
    expect(map({ code: 429, headers: { 'x-ms-retry-after-ms': '35' } })).toMatchObject({ retryAfterMs: 35 });
    expect(map({ code: 503, headers: {} })).toMatchObject({ statusCode: 503 });
    expect(map({ code: 408 })).toBeInstanceOf(TransientError);
    expect(map(Object.assign(new Error('Timeout Error! Request took more than 300 ms'), { name: 'TimeoutError', code: 'TimeoutError' }))).toMatchObject({
      statusCode: 408,
    });
    expect(map(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBeInstanceOf(TransientError);
    expect(map(new Error('wrapped', { cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }) }))).toBeInstanceOf(TransientError);
    // 404/1002 is a lagging replica (ReadSessionNotAvailable), not a deleted container.
    expect(map({ code: 404, headers: { 'x-ms-substatus': '1002' } })).toBeInstanceOf(TransientError);
  });

  it('deleted containers, rejected credentials and gone ranges stop or hand over', () => {
    expect(map({ code: 404, headers: {} })).toBeInstanceOf(ResourceGoneError);
    expect(map(new Error('The continuation token is not for the current container definition'))).toBeInstanceOf(ResourceGoneError);
    expect(map({ code: 401 })).toBeInstanceOf(CredentialsError);
    expect(map({ code: 403, headers: {} })).toMatchObject({ statusCode: 403 });
    expect(map({ code: 410, substatus: 1002 })).toBeInstanceOf(PartitionGoneError);
  });

  it('leaves other errors and aborts alone', () => {
    const bad = Object.assign(new Error('bad request'), { code: 400 });
    expect(map(bad)).toBe(bad);
    const abort = new DOMException('aborted', 'AbortError');
    expect(map(abort)).toBe(abort);
  });
});
