import { CosmosHttpError } from './errors.js';

interface CompiledQuery {
  /** The generated JavaScript; `exec` runs whatever is cached here. */
  _code: string | undefined | null;
  readonly code: string;
  exec(
    docs: object[],
    options: {
      parameters?: { name: string; value: unknown }[];
      maxItemCount?: number;
      continuation?: { token: string };
    },
  ): { result: unknown[]; continuation: { token: string } | null };
}

type QueryFactory = (sql: string) => CompiledQuery;

let factory: Promise<QueryFactory> | undefined;

/**
 * Loads the Cosmos SQL engine on first use. It is an optional peer dependency (it pulls in hundreds of
 * packages), so a user who never queries never needs it, and one who does gets told what to install.
 */
async function loadFactory(): Promise<QueryFactory> {
  factory ??= import('@zeit/cosmosdb-query').then(
    (m: { default: unknown }) => {
      // A CommonJS module with an ES default export: Node puts the real function one level down.
      const d = m.default as QueryFactory | { default: QueryFactory };
      return typeof d === 'function' ? d : d.default;
    },
    (err: unknown) => {
      factory = undefined;
      throw new CosmosHttpError(
        500,
        `the emulator runs SQL queries with the optional package @zeit/cosmosdb-query; install it (npm i -D @zeit/cosmosdb-query): ${String(err)}`,
      );
    },
  );
  return factory;
}

const CACHE_SIZE = 256;
const compiled = new Map<string, CompiledQuery>();

/** Parsing builds JavaScript through babel, which is slow; the lease store sends the same few queries again and again. */
async function compile(sql: string): Promise<CompiledQuery> {
  const hit = compiled.get(sql);
  if (hit) return hit;
  const make = await loadFactory();
  let q: CompiledQuery;
  try {
    q = make(sql);
  } catch (err) {
    throw new CosmosHttpError(400, `the query cannot be parsed: ${err instanceof Error ? err.message : String(err)}`);
  }
  q._code = linearizeReducers(q.code);
  if (compiled.size >= CACHE_SIZE) compiled.delete(compiled.keys().next().value as string);
  compiled.set(sql, q);
  return q;
}

const SPREAD_ACCUMULATOR = '[...$, ';

/**
 * The engine builds its row set with `.reduce(($, c) => [...$, row], [])`, which copies the accumulator on
 * every document: quadratic, about 4 s for `SELECT * FROM c` over 20,000 documents. The accumulator always
 * starts as a fresh `[]`, so appending in place is equivalent: `[...$, X]` becomes `($.push(X), $)`.
 * Brackets inside string literals are skipped while looking for the matching `]`.
 */
export function linearizeReducers(code: string): string {
  let out = '';
  let from = 0;
  for (;;) {
    const at = code.indexOf(SPREAD_ACCUMULATOR, from);
    if (at < 0) return out + code.slice(from);
    const end = matchingBracket(code, at);
    if (end < 0) return out + code.slice(from);
    const inner = linearizeReducers(code.slice(at + SPREAD_ACCUMULATOR.length, end));
    out += `${code.slice(from, at)}($.push(${inner}), $)`;
    from = end + 1;
  }
}

function matchingBracket(code: string, open: number): number {
  let depth = 0;
  for (let i = open; i < code.length; i++) {
    const ch = code[i];
    if (ch === '"' || ch === "'" || ch === '`') {
      for (i++; i < code.length && code[i] !== ch; i++) if (code[i] === '\\') i++;
    } else if (ch === '[' || ch === '(' || ch === '{') depth++;
    else if (ch === ']' || ch === ')' || ch === '}') {
      depth--;
      if (depth === 0) return ch === ']' ? i : -1;
    }
  }
  return -1;
}

/** A query as the SDK posts it. */
export interface QuerySpec {
  query: string;
  parameters?: { name: string; value: unknown }[];
}

/** One page of query results and the token for the next, if any. */
export interface QueryPage {
  results: unknown[];
  continuation: string | undefined;
}

/** Runs a Cosmos SQL query over documents, one page at a time. */
export async function runQuery(spec: unknown, docs: object[], maxItemCount: number, continuation: string | undefined): Promise<QueryPage> {
  const s = spec as Partial<QuerySpec> | null;
  if (!s || typeof s.query !== 'string') throw new CosmosHttpError(400, 'a query body needs a "query" string');
  const q = await compile(s.query);
  try {
    const out = q.exec(docs, {
      parameters: s.parameters ?? [],
      maxItemCount,
      ...(continuation ? { continuation: { token: continuation } } : {}),
    });
    return { results: out.result, continuation: out.continuation?.token };
  } catch (err) {
    throw new CosmosHttpError(400, `the query failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}
