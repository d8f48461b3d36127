import type { Container } from '@azure/cosmos';
import { describe, expect, it } from 'vitest';
import type { Partition } from '../../src/core/Partition.js';
import { CredentialsError, ResourceGoneError, TransientError } from '../../src/errors/index.js';
import { routingMapError } from '../../src/sources/cosmos/errors.js';
import { takeRoutingMapFailure } from '../../src/sources/cosmos/routingMapCache.js';
import { isEpkPartition, whyGone } from '../../src/sources/cosmos/whyGone.js';

const range = { minInclusive: '10', maxExclusive: '20' };
const physical: Partition = { id: '3', range };
const epk: Partition = { id: '10-20', range };
const entry = (minInclusive: string, maxExclusive: string) => ({ minInclusive, maxExclusive, continuationToken: '"9"' });

describe('whyGone: which answers mean a split or merge of the partition read', () => {
  it('tells EPK-range partitions (token min-max) from physical ranges', () => {
    expect(isEpkPartition(epk)).toBe(true);
    expect(isEpkPartition({ id: '-20', range: { minInclusive: '', maxExclusive: '20' } })).toBe(true);
    expect(isEpkPartition(physical)).toBe(false);
    expect(isEpkPartition({ id: '10-30', range })).toBe(false);
  });

  it('a physical range is gone when another range answers or the continuation no longer covers exactly it', () => {
    expect(whyGone(physical, [entry('10', '20')], '3')).toBeUndefined();
    expect(whyGone(physical, [entry('10', '20')], undefined)).toBeUndefined();
    expect(whyGone(physical, [entry('10', '20')], '7')).toMatch(/range 7 answered/);
    expect(whyGone(physical, [entry('10', '15'), entry('15', '20')], '5')).toMatch(/2 ranges/);
    expect(whyGone(physical, [entry('10', '15')], '5')).toMatch(/\[10, 15\)/);
    expect(whyGone(physical, [], undefined)).toMatch(/0 ranges/);
  });

  it('an EPK range is read from whichever range holds it, and gone only when its own range is cut', () => {
    expect(whyGone(epk, [entry('10', '20')], '7')).toBeUndefined();
    expect(whyGone(epk, [entry('10', '20')], '8')).toBeUndefined();
    expect(whyGone(epk, [entry('10', '15'), entry('15', '20')], '9')).toMatch(/2 ranges/);
  });
});

/** A stand-in for the SDK's Container with the 4.x cache layout. */
function fakeContainer(cached: Promise<unknown> | undefined, layout: 'sdk' | 'other' = 'sdk') {
  const maps: Record<string, Promise<unknown> | undefined> = {};
  if (cached) maps['dbs/db/colls/c'] = cached;
  const items = layout === 'sdk' ? { partitionKeyRangeCache: { collectionRoutingMapByCollectionId: maps } } : {};
  return { container: { url: '/dbs/db/colls/c', items } as unknown as Container, maps };
}

const sdkError = (code: number, message = `status ${code}`) => Object.assign(new Error(message), { code });

describe('takeRoutingMapFailure: the routing map the SDK client cached as a failure', () => {
  it('removes a rejected entry and returns its reason', async () => {
    const reason = sdkError(503);
    const rejected = Promise.reject(reason);
    rejected.catch(() => undefined);
    const { container, maps } = fakeContainer(rejected);
    expect(await takeRoutingMapFailure(container)).toEqual({ kind: 'failed', reason });
    expect(maps['dbs/db/colls/c']).toBeUndefined();
    expect(await takeRoutingMapFailure(container)).toEqual({ kind: 'healthy' });
  });

  it('leaves good and in-flight entries alone, without waiting for them', async () => {
    const good = fakeContainer(Promise.resolve({ ranges: [] }));
    expect(await takeRoutingMapFailure(good.container)).toEqual({ kind: 'healthy' });
    expect(good.maps['dbs/db/colls/c']).toBeDefined();
    const pending = fakeContainer(new Promise(() => undefined));
    expect(await takeRoutingMapFailure(pending.container)).toEqual({ kind: 'healthy' });
    expect(pending.maps['dbs/db/colls/c']).toBeDefined();
    expect(await takeRoutingMapFailure(fakeContainer(undefined).container)).toEqual({ kind: 'healthy' });
  });

  it('says so when the SDK keeps its cache elsewhere', async () => {
    expect(await takeRoutingMapFailure(fakeContainer(undefined, 'other').container)).toEqual({ kind: 'unreachable' });
  });
});

describe('routingMapError: the cached failure decides the error', () => {
  it('503 and throttling: TransientError with the status and retry-after; the cause kept', () => {
    const unavailable = routingMapError(sdkError(503, 'injected fault 503'), 'dbs/db/colls/c', '0');
    expect(unavailable).toBeInstanceOf(TransientError);
    expect((unavailable as TransientError).statusCode).toBe(503);
    expect(unavailable.message).toMatch(/partition key ranges failed \(injected fault 503\).*next read fetches them again/);
    const throttled = routingMapError(Object.assign(sdkError(429), { retryAfterInMs: 250 }), 'dbs/db/colls/c', '0');
    expect((throttled as TransientError).retryAfterMs).toBe(250);
  });

  it('a missing container and rejected credentials keep their meaning', () => {
    expect(routingMapError(sdkError(404), 'dbs/db/colls/c', '0')).toBeInstanceOf(ResourceGoneError);
    expect(routingMapError(sdkError(401), 'dbs/db/colls/c', '0')).toBeInstanceOf(CredentialsError);
  });

  it('anything else is retried: the cache entry is gone, so the next read asks again', () => {
    const odd = routingMapError(new Error('socket weirdness'), 'dbs/db/colls/c', '0');
    expect(odd).toBeInstanceOf(TransientError);
    expect((odd as TransientError).statusCode).toBeUndefined();
  });
});
