import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { linearizeReducers, QueryEngine } from '../../src/emulator/QueryEngine.js';

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

// Shapes the built-in evaluator runs; each must give exactly what the full engine gives.
const BUILTIN = [
  'SELECT * FROM c',
  'SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)',
  'SELECT * FROM c WHERE c.lastName = @name AND c.n >= 3',
  'SELECT * FROM c WHERE c.n > 10 ORDER BY c.n DESC',
  'SELECT c.id, c.lastName FROM c WHERE STARTSWITH(c.lastName, "Smith [")',
  "SELECT VALUE COUNT(1) FROM c WHERE c.lastName = 'Smith [jr]'",
  'SELECT TOP 5 c.id FROM c ORDER BY c.lastName, c.n',
  'SELECT VALUE ARRAY_LENGTH(c.children) FROM c',
  'SELECT c.id FROM c WHERE ARRAY_CONTAINS(["f1", "f2]"], c.id)',
  'SELECT c.id AS key, c.n FROM c WHERE c.n IN (1, 2, 3) OR NOT (c.n < 28)',
  'SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.missing) = false AND c["lastName"] != "Name1" ORDER BY c._rid',
  'SELECT * FROM root r WHERE r.n = 4',
];
const PARAMS = [
  { name: '@prefix', value: 'f1' },
  { name: '@name', value: 'Name2' },
];

describe('built-in SQL evaluator', () => {
  const builtinOnly = new QueryEngine({ engine: 'builtin', warn: () => {} });

  it.each(BUILTIN)('gives what the full engine gives: %s', async (sql) => {
    const used = PARAMS.filter((p) => sql.includes(p.name));
    const expected = engine(sql).exec(families, { parameters: used }).result;
    const page = await builtinOnly.run({ query: sql, parameters: used }, families, 1000, undefined);
    expect(page.results).toEqual(expected);
  });

  it('pages with its own continuation tokens', async () => {
    const seen: unknown[] = [];
    let token: string | undefined;
    do {
      const page = await builtinOnly.run({ query: 'SELECT VALUE c.id FROM c ORDER BY c.n' }, families, 7, token);
      seen.push(...page.results);
      token = page.continuation;
    } while (token);
    expect(seen).toEqual(families.map((f) => f.id));
  });

  it('says what to install when a query needs the optional package and it cannot be loaded, warning once', async () => {
    const warnings: string[] = [];
    let loads = 0;
    const missing = new QueryEngine({
      engine: 'auto',
      warn: (m) => warnings.push(m),
      loadFullEngine: () => {
        loads++;
        return Promise.reject(new Error("Cannot find package '@zeit/cosmosdb-query'"));
      },
    });
    const join = 'SELECT c.id, ch.name FROM c JOIN ch IN c.children WHERE ch.name = "x"';
    for (let i = 0; i < 2; i++) {
      await expect(missing.run({ query: join }, families, 10, undefined)).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/does not support JOIN, and @zeit\/cosmosdb-query is not installed\. Install .*npm i -D @zeit\/cosmosdb-query/),
      });
    }
    expect(warnings).toHaveLength(1);
    // What the lease store sends never needs the package.
    const page = await missing.run({ query: 'SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)', parameters: [{ name: '@prefix', value: 'f2' }] }, families, 100, undefined);
    expect(page.results).toHaveLength(11);
    expect(loads).toBe(2);
  });

  it('rejects a parameter without a value, and text that is not a query', async () => {
    await expect(builtinOnly.run({ query: 'SELECT * FROM c WHERE c.id = @id' }, families, 10, undefined)).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining('@id'),
    });
    await expect(builtinOnly.run({ query: 'SELECT * FROM c WHERE c.id = "unterminated' }, families, 10, undefined)).rejects.toMatchObject({ status: 400 });
  });
});
