import { QuerySyntaxError } from './errors.js';

/** One row under evaluation: the document under the collection alias. */
export type Row = Record<string, unknown>;
/** The query's parameter values by name (`@name`). */
export type Params = ReadonlyMap<string, unknown>;
/** A compiled expression: its value for a row. Cosmos semantics: `undefined` where the service's is undefined. */
export type Expr = (row: Row, params: Params) => unknown;

/** Cosmos type order for ORDER BY: undefined < null < booleans < numbers < strings. */
function typeRank(v: unknown): number {
  if (v === undefined) return 0;
  if (v === null) return 1;
  if (typeof v === 'boolean') return 2;
  if (typeof v === 'number') return 3;
  if (typeof v === 'string') return 4;
  return Array.isArray(v) ? 5 : 6;
}

function orderCompare(a: unknown, b: unknown): number {
  const ra = typeRank(a);
  const rb = typeRank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 2 || ra === 3) return Number(a) - Number(b);
  if (ra === 4) return (a as string) < (b as string) ? -1 : (a as string) > (b as string) ? 1 : 0;
  return 0;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => deepEqual((a as Row)[k], (b as Row)[k]));
}

/** Comparison with Cosmos semantics: operands of different types (or undefined) compare to undefined. */
function compare(op: string, a: unknown, b: unknown): boolean | undefined {
  if (a === undefined || b === undefined) return undefined;
  if (op === '=' || op === '!=' || op === '<>') {
    if (typeRank(a) !== typeRank(b)) return op === '=' ? false : true;
    const eq = deepEqual(a, b);
    return op === '=' ? eq : !eq;
  }
  const ra = typeRank(a);
  if (ra !== typeRank(b) || ra < 2 || ra > 4) return undefined;
  const c = orderCompare(a, b);
  return op === '<' ? c < 0 : op === '<=' ? c <= 0 : op === '>' ? c > 0 : c >= 0;
}

const FUNCTIONS: Record<string, (args: unknown[]) => unknown> = {
  startswith: ([s, p, ci]) => (typeof s === 'string' && typeof p === 'string' ? (ci === true ? s.toLowerCase().startsWith(p.toLowerCase()) : s.startsWith(p)) : undefined),
  endswith: ([s, p, ci]) => (typeof s === 'string' && typeof p === 'string' ? (ci === true ? s.toLowerCase().endsWith(p.toLowerCase()) : s.endsWith(p)) : undefined),
  contains: ([s, p, ci]) => (typeof s === 'string' && typeof p === 'string' ? (ci === true ? s.toLowerCase().includes(p.toLowerCase()) : s.includes(p)) : undefined),
  is_defined: ([v]) => v !== undefined,
  is_null: ([v]) => v === null,
  is_string: ([v]) => typeof v === 'string',
  is_number: ([v]) => typeof v === 'number',
  is_bool: ([v]) => typeof v === 'boolean',
  lower: ([s]) => (typeof s === 'string' ? s.toLowerCase() : undefined),
  upper: ([s]) => (typeof s === 'string' ? s.toUpperCase() : undefined),
  length: ([s]) => (typeof s === 'string' ? s.length : undefined),
  array_contains: ([arr, v]) => (Array.isArray(arr) ? arr.some((x) => deepEqual(x, v)) : undefined),
  array_length: ([arr]) => (Array.isArray(arr) ? arr.length : undefined),
};

/** The built-in function of that name (any case), or `undefined` when the evaluator has none. */
export function builtinFunction(name: string): ((args: unknown[]) => unknown) | undefined {
  return FUNCTIONS[name.toLowerCase()];
}

/** A constant. */
export function literal(value: unknown): Expr {
  return () => value;
}

/** A parameter's value; a query run without it throws {@link QuerySyntaxError}. */
export function parameter(name: string): Expr {
  return (_row, p) => {
    if (!p.has(name)) throw new QuerySyntaxError(`the query uses the parameter ${name}, but no value for it was sent`);
    return p.get(name);
  };
}

/** An array literal. */
export function arrayOf(items: readonly Expr[]): Expr {
  return (row, p) => items.map((i) => i(row, p));
}

/** A call of a built-in function. */
export function call(fn: (args: unknown[]) => unknown, args: readonly Expr[]): Expr {
  return (row, p) => fn(args.map((a) => a(row, p)));
}

/** A property path under the alias (`c.a.b`, `c["a"][0]`): undefined where a step is not an object. */
export function path(alias: string, steps: readonly (string | number)[]): Expr {
  return (row) => {
    let v: unknown = row[alias];
    for (const s of steps) {
      if (v === null || typeof v !== 'object') return undefined;
      v = (v as Row)[s as string];
    }
    return v;
  };
}

/** `=`, `!=`, `<>`, `<`, `<=`, `>`, `>=` with Cosmos semantics: operands of different types (or undefined) compare to undefined. */
export function comparison(op: string, left: Expr, right: Expr): Expr {
  return (row, p) => compare(op, left(row, p), right(row, p));
}

/** `left IN (items)` (or `NOT IN`): undefined when `left` is. */
export function inList(left: Expr, items: readonly Expr[], negated: boolean): Expr {
  return (row, p) => {
    const v = left(row, p);
    if (v === undefined) return undefined;
    const found = items.some((i) => compare('=', v, i(row, p)) === true);
    return negated ? !found : found;
  };
}

/** Three-valued `OR`: true if either side is, false if both are, else undefined (both sides evaluated). */
export function or(l: Expr, r: Expr): Expr {
  return (row, p) => {
    const a = l(row, p);
    const b = r(row, p);
    if (a === true || b === true) return true;
    return a === false && b === false ? false : undefined;
  };
}

/** Three-valued `AND`: false as soon as a side is, true if both are, else undefined. */
export function and(l: Expr, r: Expr): Expr {
  return (row, p) => {
    const a = l(row, p);
    if (a === false) return false;
    const b = r(row, p);
    if (b === false) return false;
    return a === true && b === true ? true : undefined;
  };
}

/** `NOT`: undefined for a non-boolean. */
export function not(inner: Expr): Expr {
  return (row, p) => {
    const v = inner(row, p);
    return typeof v === 'boolean' ? !v : undefined;
  };
}

/** What a query returns: a value per row, or one aggregate over all rows. */
export interface Projection {
  readonly row?: Expr;
  readonly aggregate?: (rows: Row[], params: Params) => unknown;
}

/** `SELECT *`: the document. */
export function selectAll(alias: string): Projection {
  return { row: (r) => r[alias] };
}

/** `SELECT VALUE COUNT(arg)`: how many rows `arg` is defined for. */
export function countOf(arg: Expr): Projection {
  return { aggregate: (rows, params) => rows.filter((r) => arg(r, params) !== undefined).length };
}

/** `SELECT a, b AS x`: an object of the defined fields. */
export function fieldsOf(fields: readonly { name: string; expr: Expr }[]): Projection {
  return {
    row: (r, params) => {
      const out: Row = {};
      for (const f of fields) {
        const v = f.expr(r, params);
        if (v !== undefined) out[f.name] = v;
      }
      return out;
    },
  };
}

/** A parsed query: the parts {@link compileQuery} runs. */
export interface QueryPlan {
  readonly alias: string;
  readonly top: number | undefined;
  readonly where: Expr | undefined;
  readonly orderBy: readonly { readonly expr: Expr; readonly desc: boolean }[];
  readonly project: Projection;
}

/** A parsed query, ready to run over documents. */
export interface BuiltinQuery {
  /** Runs the query over all documents, before paging. */
  run(docs: readonly object[], parameters: readonly { name: string; value: unknown }[]): unknown[];
  /** True when results of each range can be concatenated as they are (no ORDER BY, TOP or aggregate). */
  readonly streaming: boolean;
}

/** The runnable query of a plan: filter, sort, then aggregate or take the top rows and project them. */
export function compileQuery({ alias, top, where, orderBy, project }: QueryPlan): BuiltinQuery {
  const streaming = orderBy.length === 0 && top === undefined && !project.aggregate;
  return {
    streaming,
    run: (docs, parameters) => {
      const params = new Map(parameters.map((p) => [p.name, p.value]));
      let rows = docs.map((d) => ({ [alias]: d }) as Row);
      if (where) rows = rows.filter((r) => where(r, params) === true);
      if (orderBy.length > 0) {
        const keyed = rows.map((r) => ({ r, keys: orderBy.map((o) => o.expr(r, params)) }));
        keyed.sort((a, b) => {
          for (let i = 0; i < orderBy.length; i++) {
            const c = orderCompare(a.keys[i], b.keys[i]);
            if (c !== 0) return orderBy[i]!.desc ? -c : c;
          }
          return 0;
        });
        rows = keyed.map((k) => k.r);
      }
      if (project.aggregate) return [project.aggregate(rows, params)];
      if (top !== undefined) rows = rows.slice(0, top);
      return rows.map((r) => project.row!(r, params)).filter((v) => v !== undefined);
    },
  };
}
