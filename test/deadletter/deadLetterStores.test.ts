import type { Container } from '@azure/cosmos';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { callbackDeadLetterSink } from '../../src/deadletter/callbackDeadLetterSink.js';
import { CosmosDeadLetterStore } from '../../src/deadletter/CosmosDeadLetterStore.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { PGliteDeadLetterStore, PostgresDeadLetterStore } from '../../src/postgres/PostgresDeadLetterStore.js';
import { InvalidOptionsError } from '../../src/errors/index.js';
import { startTestCosmos, type TestCosmos } from '../support/cosmos.js';
import { deadLetterStoreConformance, letter } from '../support/deadLetterStoreConformance.js';
import { PG_URL, postgresUnavailable, uniqueSchema } from '../sinks/postgres.js';

// PGlite takes seconds to start: one instance for the whole file.
let pglite: PGlite | undefined;
const pgliteReady = PGlite.create().then((db) => (pglite = db));
const pgSkip = await postgresUnavailable();
const schema = uniqueSchema('rxfeed_dl');
let tables = 0;
let cosmos: TestCosmos | undefined;
const closers: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const close of closers) await close();
  await pglite?.close();
  await cosmos?.stop();
  if (pgSkip === undefined) {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
});

deadLetterStoreConformance('MemoryDeadLetterStore', async () => new MemoryDeadLetterStore<{ id: string; total: number }>());

deadLetterStoreConformance('PGliteDeadLetterStore', async () => new PGliteDeadLetterStore({ pglite: pgliteReady, schema, table: `dl${++tables}` }));

describe.skipIf(pgSkip !== undefined)('PostgreSQL', () => {
  deadLetterStoreConformance('PostgresDeadLetterStore', async () => {
    const store = new PostgresDeadLetterStore<{ id: string; total: number }>({ connection: PG_URL, schema, table: `dl${++tables}` });
    closers.push(() => store.close());
    return store;
  });
});

deadLetterStoreConformance('CosmosDeadLetterStore', async () => {
  cosmos ??= await startTestCosmos({ initialRangeCount: 1 });
  const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
  const { container } = await database.containers.createIfNotExists({ id: `dl-${process.pid}-${++tables}`, partitionKey: { paths: ['/id'] } });
  return new CosmosDeadLetterStore(container);
});

describe('dead-letter sinks: the rest', () => {
  it('a callback sink hands letters and the writer to the function, and passes its failure on', async () => {
    const got: unknown[] = [];
    const sink = callbackDeadLetterSink((letters, writer) => void got.push([letters.map((l) => l.id), writer.epoch]));
    await sink.write([letter('0', 1)], { leaseToken: '0', epoch: 4, range: undefined });
    expect(got).toEqual([[['0:1:o1'], 4]]);
    const failing = callbackDeadLetterSink(async () => {
      throw new Error('queue down');
    });
    await expect(failing.write([letter('0', 1)], { leaseToken: '0', epoch: 1, range: undefined })).rejects.toThrow('queue down');
  });

  it('rejects bad options with a message that says what to fix', () => {
    expect(() => new PostgresDeadLetterStore({ connection: PG_URL, table: 'Bad-Name' })).toThrow(InvalidOptionsError);
    expect(() => new PGliteDeadLetterStore({ dataDir: '' })).toThrow(/directory path/);
    expect(() => new CosmosDeadLetterStore({} as never)).toThrow(/Container partitioned on \/id/);
  });
});

/** `container`, whose `items.create` runs `after` once each create has landed (a writer paused between two requests). */
function pausingContainer(container: Container, after: () => Promise<void>): Container {
  const bind = (target: object, prop: string | symbol) => {
    const value: unknown = Reflect.get(target, prop);
    return typeof value === 'function' ? value.bind(target) : value;
  };
  const items = new Proxy(container.items, {
    get: (target, prop) =>
      prop === 'create'
        ? async (...args: Parameters<typeof target.create>) => {
            const response = await target.create(...args);
            await after();
            return response;
          }
        : bind(target, prop),
  });
  return new Proxy(container, { get: (target, prop) => (prop === 'items' ? items : bind(target, prop)) });
}

describe('CosmosDeadLetterStore: the fence and the letters in separate requests', () => {
  it('a writer refused by a fence raised after it checked takes its letters back, but not one a newer writer took over', async () => {
    cosmos ??= await startTestCosmos({ initialRangeCount: 1 });
    const { database } = await cosmos.client.databases.createIfNotExists({ id: 'db' });
    const { container } = await database.containers.createIfNotExists({ id: `dl-${process.pid}-${++tables}`, partitionKey: { paths: ['/id'] } });
    const child = new CosmosDeadLetterStore<{ id: string; total: number }>(container);
    let between: (() => Promise<void>) | undefined;
    const parent = new CosmosDeadLetterStore<{ id: string; total: number }>(
      pausingContainer(container, async () => {
        const work = between;
        between = undefined;
        await work?.();
      }),
    );
    await parent.write([], { leaseToken: 'P', epoch: 1, range: { minInclusive: '', maxExclusive: 'FF' } });
    // The parent's owner passes the fence and creates its letters; before it raises the fence, its split child
    // (epoch 2) dead-letters change 5 too (finding the parent's letter) and raises the fence over [,80).
    between = () => child.write([letter('L', 5, { epoch: 2 })], { leaseToken: 'L', epoch: 2, range: { minInclusive: '', maxExclusive: '80' } });
    const refused = parent.write([letter('P', 5), letter('P', 7)], { leaseToken: 'P', epoch: 1, range: { minInclusive: '', maxExclusive: 'FF' } });
    await expect(refused).rejects.toMatchObject({ name: 'DeadLetterFencedError', epoch: 1, currentEpoch: 2 });
    // Change 7 (the parent's alone) is taken back; change 5 stays once, as first written, held by the child.
    expect(await child.list()).toEqual([letter('P', 5)]);
  });
});
