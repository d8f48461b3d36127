import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { callbackDeadLetterSink } from '../../src/deadletter/callbackDeadLetterSink.js';
import { CosmosDeadLetterStore } from '../../src/deadletter/CosmosDeadLetterStore.js';
import { MemoryDeadLetterStore } from '../../src/deadletter/MemoryDeadLetterStore.js';
import { PGliteDeadLetterStore, PostgresDeadLetterStore } from '../../src/deadletter/PostgresDeadLetterStore.js';
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
