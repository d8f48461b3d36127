/**
 * An idle partition's polls: CosmosSource answers a "not modified" reply equal to the last one (same continuation
 * token, session token and charge) with the same page, and any other reply with a page of its own.
 */
import { CosmosClient, type Container } from '@azure/cosmos';
import { describe, expect, it } from 'vitest';
import { EMULATOR_KEY } from '../../src/emulator/CosmosEmulator.js';
import { CosmosSource } from '../../src/sources/CosmosSource.js';

const RID = 'idleRID=';
const partition = { id: '0', range: { minInclusive: '', maxExclusive: 'FF' } };

/** A container of one range whose change feed answers what `reply` gives, from memory. */
function idleContainer(reply: () => { lsn: number; session: string; charge: number }): Container {
  const container = new CosmosClient({ endpoint: 'http://127.0.0.1:1/', key: EMULATOR_KEY }).database('db').container('orders');
  (container.items as unknown as Record<string, unknown>).getChangeFeedIterator = () => ({
    hasMoreResults: true,
    readNext: async () => {
      const { lsn, session, charge } = reply();
      const continuationToken = JSON.stringify({ rid: RID, Continuation: [{ minInclusive: '', maxExclusive: 'FF', continuationToken: `"${lsn}"` }] });
      return { statusCode: 304, result: [], continuationToken, requestCharge: charge, headers: { 'x-ms-session-token': session } };
    },
  });
  (container as unknown as Record<string, unknown>).read = async () => ({ resource: { id: 'orders', _rid: RID, partitionKey: { paths: ['/pk'] } }, headers: {} });
  return container;
}

describe('CosmosSource, idle polls', () => {
  it('gives the same page for the same "not modified" reply, and a new one when the reply changes', async () => {
    let state = { lsn: 42, session: '0:-1#42', charge: 1 };
    const source = new CosmosSource<unknown>(idleContainer(() => state));
    const read = (position: string) => source.read({ partition, from: { position }, maxItemCount: 10 });
    const first = await read('"42"');
    expect(first).toEqual({ changes: [], position: '"42"', latestLsn: 42, requestCharge: 1 });
    const second = await read('"42"');
    expect(second).toBe(first);
    state = { ...state, session: '0:-1#44' };
    const third = await read('"42"');
    expect(third).not.toBe(first);
    expect(third).toEqual({ changes: [], position: '"42"', latestLsn: 44, requestCharge: 1 });
    expect(await read('"42"')).toBe(third);
    state = { ...state, charge: 2 };
    const fourth = await read('"42"');
    expect(fourth).toEqual({ changes: [], position: '"42"', latestLsn: 44, requestCharge: 2 });
    state = { lsn: 45, session: '0:-1#45', charge: 2 };
    const fifth = await read('"42"');
    expect(fifth).toEqual({ changes: [], position: '"45"', latestLsn: 45, requestCharge: 2 });
    expect(await read('"45"')).toBe(fifth);
  });
});
