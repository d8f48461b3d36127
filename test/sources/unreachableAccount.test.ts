/**
 * An account whose host name does not resolve is reported at once, with `host:port` in the message (issue 26,
 * item 6): the SDK alone retries such a host for about two minutes and then throws a raw RestError.
 */
import { CosmosClient } from '@azure/cosmos';
import { afterAll, describe, expect, it } from 'vitest';
import type { FeedEvent } from '../../src/core/events.js';
import { connect } from '../../src/cli/connect.js';
import { TransientError } from '../../src/errors/index.js';
import { createChangeFeed } from '../../src/feed/index.js';
import { MemoryLeaseStore } from '../../src/leases/MemoryLeaseStore.js';
import { toSourceError } from '../../src/sources/cosmos/errors.js';
import { hostPortOf } from '../../src/sources/cosmos/reachability.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';

// `.invalid` never resolves (RFC 6761); the key is the public emulator key.
const ENDPOINT = 'https://no-such-account.invalid:8081';
const KEY = 'C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==';
const NAMED = /cannot reach no-such-account\.invalid:8081: the host name does not resolve \((ENOTFOUND|EAI_AGAIN|EAI_FAIL|EAI_NONAME|ENODATA)\); check the account endpoint/;
// Far below the SDK's two minutes: each of these answers within one DNS lookup.
const SOON = { timeout: 15_000 };

const client = new CosmosClient({ endpoint: ENDPOINT, key: KEY });
afterAll(() => client.dispose());

describe('an account whose host name does not resolve', () => {
  it('fails the first listPartitions or read at once with a TransientError naming host:port', SOON, async () => {
    const source = new CosmosSource(client.database('db').container('orders'));
    const listing = source.listPartitions();
    await expect(listing).rejects.toBeInstanceOf(TransientError);
    await expect(listing).rejects.toThrow(NAMED);
    const partition = { id: '0', range: { minInclusive: '', maxExclusive: 'FF' } };
    const reader = new CosmosSource(client.database('db').container('orders'));
    await expect(reader.read({ partition, from: 'beginning', maxItemCount: 10 })).rejects.toThrow(NAMED);
  });

  it('is reported by a starting change feed as an error event with the host named, while it keeps retrying', SOON, async () => {
    const events: FeedEvent[] = [];
    const feed = createChangeFeed({
      source: new CosmosSource(client.database('db').container('orders')),
      leases: new MemoryLeaseStore(),
      instanceName: 'a',
      leasePrefix: 'unreachable.',
      events: (e) => events.push(e),
    });
    const subscription = feed.changes$.subscribe();
    try {
      while (!events.some((e) => e.type === 'error')) await new Promise((resolve) => setTimeout(resolve, 20));
      const first = events.find((e) => e.type === 'error')!;
      expect(first.error).toBeInstanceOf(TransientError);
      expect(first.error.message).toMatch(NAMED);
      expect(first).toMatchObject({ kind: 'infrastructure' });
    } finally {
      subscription.unsubscribe();
      await feed.stop();
    }
  });

  it('makes the CLI refuse at once, naming --endpoint and host:port', SOON, async () => {
    const target = { endpoint: ENDPOINT, key: KEY, database: 'db', container: undefined, leaseContainer: 'leases', naming: { leasePrefix: undefined, processorName: undefined, leaseScheme: 'rxfeed' as const }, leaseExpirationMs: 60_000, json: false };
    await expect(connect(target)).rejects.toThrow(/--endpoint: cannot reach no-such-account\.invalid:8081/);
  });
});

describe('network failures name the account', () => {
  it('maps ENOTFOUND and refused connections to a TransientError with host:port in the message', () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND x.invalid'), { name: 'RestError', code: 'ENOTFOUND' });
    const mapped = toSourceError(notFound, 'dbs/db/colls/c', '*', 'x.invalid:443');
    expect(mapped).toBeInstanceOf(TransientError);
    expect((mapped as Error).message).toBe('dbs/db/colls/c: ENOTFOUND at x.invalid:443 reading partition *');
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect((toSourceError(refused, 'dbs/db/colls/c', '0', '127.0.0.1:1') as Error).message).toMatch(/ECONNREFUSED at 127\.0\.0\.1:1/);
  });

  it('takes the port from the endpoint, or the scheme default', () => {
    expect(hostPortOf('https://shop.documents.azure.com')).toBe('shop.documents.azure.com:443');
    expect(hostPortOf('https://shop.documents.azure.com:443/')).toBe('shop.documents.azure.com:443');
    expect(hostPortOf('http://127.0.0.1:8081')).toBe('127.0.0.1:8081');
    expect(hostPortOf('not a url')).toBeUndefined();
  });
});
