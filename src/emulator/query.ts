import { CosmosHttpError } from './errors.js';

interface CompiledQuery {
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
  if (compiled.size >= CACHE_SIZE) compiled.delete(compiled.keys().next().value as string);
  compiled.set(sql, q);
  return q;
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
