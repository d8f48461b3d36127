import { countBefore } from '../internal/countBefore.js';
import { CosmosHttpError } from './errors.js';
import { comparePositions, type PositionedDoc } from './store/Store.js';
import { parseBuiltinQuery, QuerySyntaxError, UnsupportedQueryError, type BuiltinQuery } from './sql/index.js';

/** The optional full SQL engine could not be loaded. */
class FullEngineMissing extends Error {}

/** A query compiled by the optional package. */
export interface CompiledQuery {
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

/** The optional package's entry point: compiles one SQL text. */
export type QueryFactory = (sql: string) => CompiledQuery;

let factory: Promise<QueryFactory> | undefined;

/**
 * Loads the full Cosmos SQL engine on first use. It is an optional peer dependency (it pulls in hundreds of
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
      throw new FullEngineMissing(String(err));
    },
  );
  return factory;
}

const CACHE_SIZE = 256;
const compiled = new Map<string, CompiledQuery>();

/** Parsing builds JavaScript through babel, which is slow; the lease store sends the same few queries again and again. */
async function compile(sql: string, load: () => Promise<QueryFactory>): Promise<CompiledQuery> {
  const hit = compiled.get(sql);
  if (hit) return hit;
  let make: QueryFactory;
  try {
    make = await load();
  } catch (err) {
    throw err instanceof FullEngineMissing ? err : new FullEngineMissing(String(err));
  }
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
  /** Documents the query looked at, for the request charge. */
  scanned: number;
}

/** Which SQL engine runs queries: the built-in evaluator first and the optional package for the rest, or the built-in only. */
export type SqlEngineChoice = 'auto' | 'builtin';

const BUILTIN_TOKEN = 'b:';
/** Continuation of a streaming query: after the document at this EPK and key (`r:<epk>:<encoded key>`). */
const RESUME_TOKEN = 'r:';
/** Result sets kept for paging (queries in flight at once, roughly). */
const RESULT_CACHE_SIZE = 32;
const FULL_ENGINE = '@zeit/cosmosdb-query';

/** The position a streaming query's continuation names; 400 for a token the emulator did not give. */
function resumePosition(token: string | undefined): { epk: string; key: string } | undefined {
  if (token === undefined || token === '') return undefined;
  const sep = token.indexOf(':', RESUME_TOKEN.length);
  if (!token.startsWith(RESUME_TOKEN) || sep < 0) throw new CosmosHttpError(400, `invalid continuation token for this query: ${token}`);
  try {
    return { epk: token.slice(RESUME_TOKEN.length, sep), key: decodeURIComponent(token.slice(sep + 1)) };
  } catch {
    throw new CosmosHttpError(400, `invalid continuation token for this query: ${token}`);
  }
}

/** Index of the first document after `position` in container order (binary search). */
function firstAfter(ordered: readonly PositionedDoc[], position: { epk: string; key: string }): number {
  return countBefore(ordered, (doc) => comparePositions(doc, position) <= 0);
}

function specOf(spec: unknown): QuerySpec {
  const s = spec as Partial<QuerySpec> | null;
  if (!s || typeof s.query !== 'string') throw new CosmosHttpError(400, 'a query body needs a "query" string');
  if (s.parameters !== undefined && !Array.isArray(s.parameters)) throw new CosmosHttpError(400, 'query "parameters" must be an array');
  return { query: s.query, parameters: s.parameters ?? [] };
}

/**
 * Runs Cosmos SQL for the emulator. The built-in evaluator ({@link parseBuiltinQuery}) answers the simple
 * shapes without any extra package; anything else goes to the optional `@zeit/cosmosdb-query`. When that is
 * missing, the query answers 400 with what to install or change, and `warn` is called once.
 */
export class QueryEngine {
  #warned = false;
  readonly #engine: SqlEngineChoice;
  readonly #warn: (message: string) => void;
  readonly #parsed = new Map<string, BuiltinQuery | UnsupportedQueryError>();
  readonly #results = new Map<string, { rows: unknown[]; scanned: number }>();
  readonly #ordered = new Map<string, PositionedDoc[]>();

  readonly #load: () => Promise<QueryFactory>;

  /**
   * @param options.engine - `'auto'` (built-in, then the optional package) or `'builtin'` (never load it).
   * @param options.warn - told once when a query needs the optional package and cannot have it.
   * @param options.loadFullEngine - loads the optional package's factory. Default: a dynamic import of it.
   */
  constructor(options: { engine: SqlEngineChoice; warn: (message: string) => void; loadFullEngine?: () => Promise<QueryFactory> }) {
    this.#engine = options.engine;
    this.#warn = options.warn;
    this.#load = options.loadFullEngine ?? loadFactory;
  }

  /** The built-in form of a query, or the reason it has none. */
  builtin(sql: string): BuiltinQuery | UnsupportedQueryError {
    let hit = this.#parsed.get(sql);
    if (hit === undefined) {
      try {
        hit = parseBuiltinQuery(sql);
      } catch (err) {
        if (err instanceof QuerySyntaxError) throw new CosmosHttpError(400, `the query cannot be parsed: ${err.message}`);
        if (!(err instanceof UnsupportedQueryError)) throw err;
        hit = err;
      }
      if (this.#parsed.size >= CACHE_SIZE) this.#parsed.delete(this.#parsed.keys().next().value as string);
      this.#parsed.set(sql, hit);
    }
    return hit;
  }

  /**
   * One page of a query over positioned documents. A streaming built-in query (no ORDER BY, TOP or
   * aggregate) continues after the last document it looked at, by EPK and key, as the service's gateway
   * continues a cross-partition query range by range: the token stays valid when ranges split or merge
   * between pages (a child's scope simply starts after it or holds nothing before it), and documents written
   * meanwhile neither shift nor repeat rows. Other queries page through {@link QueryEngine.run}.
   *
   * @param docs - lists the documents in container order (not called when a cached order is still valid).
   * @param snapshot - names the documents' current state, as for {@link QueryEngine.run}.
   */
  async page(rawSpec: unknown, docs: () => PositionedDoc[], maxItemCount: number, continuation: string | undefined, snapshot?: string): Promise<QueryPage> {
    const spec = specOf(rawSpec);
    const builtin = this.builtin(spec.query);
    if (builtin instanceof UnsupportedQueryError || !builtin.streaming) {
      return this.run(spec, () => docs().map((d) => d.body), maxItemCount, continuation, snapshot);
    }
    const ordered = this.#orderedDocs(docs, snapshot);
    const after = resumePosition(continuation);
    let i = after === undefined ? 0 : firstAfter(ordered, after);
    const results: unknown[] = [];
    const from = i;
    try {
      for (; i < ordered.length && results.length < maxItemCount; i++) results.push(...builtin.run([ordered[i]!.body], spec.parameters ?? []));
    } catch (err) {
      throw new CosmosHttpError(400, `the query failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    const last = ordered[i - 1];
    const next = i < ordered.length && last ? `${RESUME_TOKEN}${last.epk}:${encodeURIComponent(last.key)}` : undefined;
    return { results, continuation: next, scanned: i - from };
  }

  #orderedDocs(docs: () => PositionedDoc[], snapshot: string | undefined): PositionedDoc[] {
    if (snapshot === undefined) return docs();
    let hit = this.#ordered.get(snapshot);
    if (!hit) {
      hit = docs();
      if (this.#ordered.size >= RESULT_CACHE_SIZE) this.#ordered.delete(this.#ordered.keys().next().value as string);
      this.#ordered.set(snapshot, hit);
    }
    return hit;
  }

  /**
   * Runs a query over documents and returns one page from `continuation`.
   *
   * @param docs - the documents, or a function that lists them (not called when the page comes from the cache).
   * @param snapshot - names the documents' current state (e.g. container, scope and LSNs): later pages of a
   *   built-in query over the same snapshot are cut from the first page's results instead of running it again.
   */
  async run(
    rawSpec: unknown,
    docs: object[] | (() => object[]),
    maxItemCount: number,
    continuation: string | undefined,
    snapshot?: string,
  ): Promise<QueryPage> {
    const spec = specOf(rawSpec);
    const list = (): object[] => (typeof docs === 'function' ? docs() : docs);
    const builtin = this.builtin(spec.query);
    if (!(builtin instanceof UnsupportedQueryError)) {
      const key = snapshot === undefined ? undefined : `${snapshot}\u0000${spec.query}\u0000${JSON.stringify(spec.parameters)}`;
      let hit = key === undefined ? undefined : this.#results.get(key);
      if (!hit) {
        const all = list();
        try {
          hit = { rows: builtin.run(all, spec.parameters ?? []), scanned: all.length };
        } catch (err) {
          throw new CosmosHttpError(400, `the query failed: ${err instanceof Error ? err.message : String(err)}`);
        }
        if (key !== undefined) {
          if (this.#results.size >= RESULT_CACHE_SIZE) this.#results.delete(this.#results.keys().next().value as string);
          this.#results.set(key, hit);
        }
      }
      const from = continuation?.startsWith(BUILTIN_TOKEN) ? Number(continuation.slice(BUILTIN_TOKEN.length)) || 0 : 0;
      const results = hit.rows.slice(from, from + maxItemCount);
      const next = from + maxItemCount < hit.rows.length ? `${BUILTIN_TOKEN}${from + maxItemCount}` : undefined;
      return { results, continuation: next, scanned: from === 0 ? hit.scanned : results.length };
    }
    const all = list();
    if (this.#engine === 'builtin') throw this.#unsupported(builtin, 'the emulator runs with sqlEngine "builtin"');
    let q: CompiledQuery;
    try {
      q = await compile(spec.query, this.#load);
    } catch (err) {
      if (err instanceof FullEngineMissing) throw this.#unsupported(builtin, `${FULL_ENGINE} is not installed`);
      throw err;
    }
    try {
      const out = q.exec(all, {
        parameters: spec.parameters ?? [],
        maxItemCount,
        ...(continuation ? { continuation: { token: continuation } } : {}),
      });
      return { results: out.result, continuation: out.continuation?.token, scanned: all.length };
    } catch (err) {
      throw new CosmosHttpError(400, `the query failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  #unsupported(reason: UnsupportedQueryError, why: string): CosmosHttpError {
    const message =
      `${reason.message}, and ${why}. Install the optional package ${FULL_ENGINE} (npm i -D ${FULL_ENGINE}) to run any ` +
      'Cosmos SQL query, or keep to what the built-in evaluator runs: SELECT * | VALUE expr | VALUE COUNT(1) | projections, ' +
      'TOP n, FROM c, WHERE with = != < <= > >= AND OR NOT IN, STARTSWITH ENDSWITH CONTAINS IS_DEFINED ARRAY_CONTAINS, ' +
      'parameters, ORDER BY properties.';
    if (!this.#warned) {
      this.#warned = true;
      this.#warn(`rxfeed emulator: ${message} (said once; later queries answer 400 with the same message)`);
    }
    return new CosmosHttpError(400, message);
  }
}
