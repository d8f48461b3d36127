import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { linearizeReducers, QueryEngine } from '../../src/emulator/query.js';

const require = createRequire(import.meta.url);
const engine = (require('@zeit/cosmosdb-query') as { default: (sql: string) => { code: string; exec(docs: object[], o: object): { result: unknown[] } } }).default;

const queries = new QueryEngine({ engine: 'auto', warn: () => {} });
const runQuery = (spec: unknown, docs: object[], max: number, token: string | undefined) => queries.run(spec, docs, max, token);

const families = Array.from({ length: 30 }, (_, i) => ({
  id: `f${i}`,
  _rid: `rid${String(i).padStart(3, '0')}`,
  lastName: i % 3 === 0 ? 'Smith [jr]' : `Name${i % 5}`,
  n: i,
  children: Array.from({ length: i % 4 }, (_, j) => ({ name: `c${i}-${j}`, pets: Array.from({ length: j }, (_, k) => ({ kind: k ? 'cat' : 'dog' })) })),
}));

const QUERIES = [
  'SELECT * FROM c',
  'SELECT * FROM c WHERE c.n > 10 ORDER BY c.n DESC',
  'SELECT c.id, c.lastName FROM c WHERE STARTSWITH(c.lastName, "Smith [")',
  "SELECT VALUE COUNT(1) FROM c WHERE c.lastName = 'Smith [jr]'",
  'SELECT c.id, ch.name FROM c JOIN ch IN c.children',
  'SELECT p.kind, ch.name FROM c JOIN ch IN c.children JOIN p IN ch.pets WHERE p.kind = "cat"',
  'SELECT TOP 5 c.id FROM c ORDER BY c.lastName, c.n',
  'SELECT VALUE ARRAY_LENGTH(c.children) FROM c',
  'SELECT c.id FROM c WHERE ARRAY_CONTAINS(["f1", "f2]"], c.id)',
  'SELECT * FROM c.children',
];

describe('emulator SQL engine', () => {
  it.each(QUERIES)('appends rows in place with the same results as the engine: %s', async (sql) => {
    const expected = engine(sql).exec(families, {}).result;
    const page = await runQuery({ query: sql }, families, 1000, undefined);
    expect(page.results).toEqual(expected);
    expect(linearizeReducers(engine(sql).code)).not.toContain('[...$,');
  });

  it('pages with continuation tokens without losing or repeating rows', async () => {
    const seen: unknown[] = [];
    let token: string | undefined;
    do {
      const page = await runQuery({ query: 'SELECT c.id FROM c WHERE c.n >= @min', parameters: [{ name: '@min', value: 5 }] }, families, 7, token);
      seen.push(...page.results);
      token = page.continuation;
    } while (token);
    expect(seen).toHaveLength(25);
  });

  it('answers an unparsable query with 400', async () => {
    await expect(runQuery({ query: 'SELEC nothing' }, families, 10, undefined)).rejects.toMatchObject({ status: 400 });
    await expect(runQuery({}, families, 10, undefined)).rejects.toMatchObject({ status: 400 });
  });
});
