/**
 * A small built-in evaluator for the Cosmos SQL shapes that lease stores, dead-letter stores and most tests
 * send: `SELECT * | VALUE expr | projections | VALUE COUNT(1)`, `TOP n`, `FROM c` (or `FROM root r`), `WHERE` with comparisons,
 * `AND` / `OR` / `NOT`, `IN`, parameters, a few string and type functions, and `ORDER BY` on properties.
 * Everything else (joins, subqueries, `GROUP BY`, most functions) is left to the optional full engine: the
 * parser throws {@link UnsupportedQueryError} naming what it did not understand.
 */

/** The query uses a construct the built-in evaluator does not implement. */
export class UnsupportedQueryError extends Error {
  constructor(readonly construct: string) {
    super(`the built-in query evaluator does not support ${construct}`);
    this.name = 'UnsupportedQueryError';
  }
}

/** The query is malformed for any engine (a bad parameter, a missing token). */
export class QuerySyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'QuerySyntaxError';
  }
}

type Value = unknown;
type Row = Record<string, unknown>;
type Params = ReadonlyMap<string, unknown>;
type Expr = (row: Row, params: Params) => Value;

interface Token {
  kind: 'ident' | 'number' | 'string' | 'param' | 'op' | 'end';
  text: string;
  value?: unknown;
}

const KEYWORDS = new Set(['select', 'value', 'top', 'from', 'where', 'order', 'by', 'asc', 'desc', 'and', 'or', 'not', 'in', 'as', 'true', 'false', 'null', 'undefined']);
const UNSUPPORTED_KEYWORDS = new Set(['join', 'group', 'distinct', 'offset', 'limit', 'exists', 'between', 'like', 'array', 'udf']);

function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i]!;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    if (ch === '-' && sql[i + 1] === '-') throw new UnsupportedQueryError('comments');
    if (ch === '"' || ch === "'") {
      let text = '';
      for (i++; i < sql.length && sql[i] !== ch; i++) {
        if (sql[i] === '\\') {
          i++;
          const esc = sql[i];
          text += esc === 'n' ? '\n' : esc === 't' ? '\t' : (esc ?? '');
        } else text += sql[i];
      }
      if (i >= sql.length) throw new QuerySyntaxError(`unterminated string literal in the query`);
      i++;
      tokens.push({ kind: 'string', text, value: text });
      continue;
    }
    const num = /^\d+(\.\d+)?([eE][+-]?\d+)?/.exec(sql.slice(i));
    if (num) {
      tokens.push({ kind: 'number', text: num[0], value: Number(num[0]) });
      i += num[0].length;
      continue;
    }
    const word = /^[@A-Za-z_$][A-Za-z0-9_$]*/.exec(sql.slice(i));
    if (word) {
      const text = word[0];
      tokens.push(text.startsWith('@') ? { kind: 'param', text } : { kind: 'ident', text });
      i += text.length;
      continue;
    }
    const op = /^(<=|>=|!=|<>|\?\?|\|\||[=<>(),.*[\]+\-/%])/.exec(sql.slice(i));
    if (!op) throw new QuerySyntaxError(`unexpected character ${JSON.stringify(ch)} in the query`);
    tokens.push({ kind: 'op', text: op[0] });
    i += op[0].length;
  }
  tokens.push({ kind: 'end', text: '' });
  return tokens;
}

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

/** A parsed query, ready to run over documents. */
export interface BuiltinQuery {
  /** Runs the query over all documents, before paging. */
  run(docs: readonly object[], parameters: readonly { name: string; value: unknown }[]): unknown[];
  /** True when results of each range can be concatenated as they are (no ORDER BY, TOP or aggregate). */
  readonly streaming: boolean;
}

class Parser {
  #tokens: Token[];
  #at = 0;
  #alias = '';

  constructor(sql: string) {
    this.#tokens = tokenize(sql);
  }

  #peek(offset = 0): Token {
    return this.#tokens[Math.min(this.#at + offset, this.#tokens.length - 1)]!;
  }

  #isWord(word: string, offset = 0): boolean {
    const t = this.#peek(offset);
    return t.kind === 'ident' && t.text.toLowerCase() === word;
  }

  #isOp(op: string): boolean {
    const t = this.#peek();
    return t.kind === 'op' && t.text === op;
  }

  #next(): Token {
    const t = this.#peek();
    this.#at++;
    return t;
  }

  #expectWord(word: string): void {
    if (!this.#isWord(word)) this.#fail(`expected ${word.toUpperCase()}`);
    this.#at++;
  }

  #expectOp(op: string): void {
    if (!this.#isOp(op)) this.#fail(`expected "${op}"`);
    this.#at++;
  }

  #fail(what: string): never {
    const t = this.#peek();
    if (t.kind === 'ident' && UNSUPPORTED_KEYWORDS.has(t.text.toLowerCase())) throw new UnsupportedQueryError(t.text.toUpperCase());
    throw new UnsupportedQueryError(`"${t.text || 'end of query'}" where it ${what}`);
  }

  parse(): BuiltinQuery {
    this.#expectWord('select');
    let top: number | undefined;
    if (this.#isWord('top')) {
      this.#at++;
      const t = this.#next();
      if (t.kind !== 'number' || !Number.isInteger(t.value)) this.#fail('expected a TOP count');
      top = t.value as number;
    }
    // Projection is parsed after FROM (it needs the alias), so remember where it starts.
    const selectAt = this.#at;
    let depth = 0;
    while (!(depth === 0 && this.#isWord('from')) && this.#peek().kind !== 'end') {
      const t = this.#next();
      if (t.text === '(' || t.text === '[') depth++;
      if (t.text === ')' || t.text === ']') depth--;
    }
    this.#expectWord('from');
    const alias = this.#next();
    if (alias.kind !== 'ident' || KEYWORDS.has(alias.text.toLowerCase())) this.#fail('expected the collection alias');
    this.#alias = alias.text;
    // `FROM root r` and `FROM root AS r` name the documents `r`.
    if (this.#isWord('as')) this.#at++;
    const renamed = this.#peek();
    if (renamed.kind === 'ident' && !KEYWORDS.has(renamed.text.toLowerCase()) && !UNSUPPORTED_KEYWORDS.has(renamed.text.toLowerCase())) {
      this.#alias = renamed.text;
      this.#at++;
    }
    if (!this.#isWord('where') && !this.#isWord('order') && this.#peek().kind !== 'end') this.#fail('expected WHERE or ORDER BY after FROM');
    const afterFrom = this.#at;
    this.#at = selectAt;
    const project = this.#projection();
    if (!this.#isWord('from')) this.#fail('expected FROM');
    this.#at = afterFrom;
    let where: Expr | undefined;
    if (this.#isWord('where')) {
      this.#at++;
      where = this.#expr();
    }
    const orderBy: { expr: Expr; desc: boolean }[] = [];
    if (this.#isWord('order')) {
      this.#at++;
      this.#expectWord('by');
      do {
        if (orderBy.length > 0) this.#at++;
        const expr = this.#expr();
        let desc = false;
        if (this.#isWord('asc')) this.#at++;
        else if (this.#isWord('desc')) {
          this.#at++;
          desc = true;
        }
        orderBy.push({ expr, desc });
      } while (this.#isOp(','));
    }
    if (this.#peek().kind !== 'end') this.#fail('expected the end of the query');
    const streaming = orderBy.length === 0 && top === undefined && !project.aggregate;
    return {
      streaming,
      run: (docs, parameters) => {
        const params = new Map(parameters.map((p) => [p.name, p.value]));
        let rows = docs.map((d) => ({ [this.#alias]: d }) as Row);
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

  #projection(): { row?: Expr; aggregate?: (rows: Row[], params: Params) => unknown } {
    if (this.#isOp('*')) {
      this.#at++;
      return { row: (r) => r[this.#alias] };
    }
    if (this.#isWord('value')) {
      this.#at++;
      if (this.#isWord('count') && this.#peek(1).text === '(') {
        this.#at += 2;
        const arg = this.#expr();
        this.#expectOp(')');
        return { aggregate: (rows, params) => rows.filter((r) => arg(r, params) !== undefined).length };
      }
      return { row: this.#expr() };
    }
    if (this.#isWord('distinct')) this.#fail('');
    const fields: { name: string; expr: Expr }[] = [];
    do {
      if (fields.length > 0) this.#at++;
      const expr = this.#expr();
      let name: string | undefined;
      if (this.#isWord('as')) {
        this.#at++;
        name = this.#next().text;
      } else {
        const last = this.#tokens[this.#at - 1]!;
        name = last.kind === 'ident' || last.kind === 'string' ? last.text : undefined;
      }
      fields.push({ name: name ?? `$${fields.length + 1}`, expr });
    } while (this.#isOp(','));
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

  #expr(): Expr {
    return this.#or();
  }

  #or(): Expr {
    let left = this.#and();
    while (this.#isWord('or')) {
      this.#at++;
      const l = left;
      const r = this.#and();
      left = (row, p) => {
        const a = l(row, p);
        const b = r(row, p);
        if (a === true || b === true) return true;
        return a === false && b === false ? false : undefined;
      };
    }
    return left;
  }

  #and(): Expr {
    let left = this.#not();
    while (this.#isWord('and')) {
      this.#at++;
      const l = left;
      const r = this.#not();
      left = (row, p) => {
        const a = l(row, p);
        if (a === false) return false;
        const b = r(row, p);
        if (b === false) return false;
        return a === true && b === true ? true : undefined;
      };
    }
    return left;
  }

  #not(): Expr {
    if (this.#isWord('not')) {
      this.#at++;
      const inner = this.#not();
      return (row, p) => {
        const v = inner(row, p);
        return typeof v === 'boolean' ? !v : undefined;
      };
    }
    return this.#comparison();
  }

  #comparison(): Expr {
    const left = this.#primary();
    const t = this.#peek();
    if (t.kind === 'op' && ['=', '!=', '<>', '<', '<=', '>', '>='].includes(t.text)) {
      this.#at++;
      const right = this.#primary();
      return (row, p) => compare(t.text, left(row, p), right(row, p));
    }
    const negated = this.#isWord('not') && this.#isWord('in', 1);
    if (this.#isWord('in') || negated) {
      this.#at += negated ? 2 : 1;
      this.#expectOp('(');
      const items: Expr[] = [];
      do {
        if (items.length > 0) this.#at++;
        items.push(this.#primary());
      } while (this.#isOp(','));
      this.#expectOp(')');
      return (row, p) => {
        const v = left(row, p);
        if (v === undefined) return undefined;
        const found = items.some((i) => compare('=', v, i(row, p)) === true);
        return negated ? !found : found;
      };
    }
    if (t.kind === 'op' && ['+', '-', '/', '%', '||', '??'].includes(t.text)) this.#fail(`uses the operator ${t.text}`);
    if (t.kind === 'op' && t.text === '*') this.#fail('uses the operator *');
    return left;
  }

  #primary(): Expr {
    const t = this.#next();
    if (t.kind === 'number' || t.kind === 'string') return () => t.value;
    if (t.kind === 'param') {
      const name = t.text;
      return (_row, p) => {
        if (!p.has(name)) throw new QuerySyntaxError(`the query uses the parameter ${name}, but no value for it was sent`);
        return p.get(name);
      };
    }
    if (t.kind === 'op' && t.text === '(') {
      if (this.#isWord('select')) this.#fail('starts a subquery');
      const inner = this.#expr();
      this.#expectOp(')');
      return inner;
    }
    if (t.kind === 'op' && t.text === '[') {
      const items: Expr[] = [];
      while (!this.#isOp(']')) {
        if (items.length > 0) this.#expectOp(',');
        items.push(this.#expr());
      }
      this.#at++;
      return (row, p) => items.map((i) => i(row, p));
    }
    if (t.kind === 'op' && t.text === '-' && this.#peek().kind === 'number') {
      const n = -(this.#next().value as number);
      return () => n;
    }
    if (t.kind === 'ident') {
      const lower = t.text.toLowerCase();
      if (lower === 'true') return () => true;
      if (lower === 'false') return () => false;
      if (lower === 'null') return () => null;
      if (lower === 'undefined') return () => undefined;
      if (this.#isOp('(')) return this.#call(t.text);
      if (t.text === this.#alias) return this.#path();
    }
    this.#at--;
    this.#fail('expected a value');
  }

  #call(name: string): Expr {
    const fn = FUNCTIONS[name.toLowerCase()];
    if (!fn) throw new UnsupportedQueryError(`the function ${name.toUpperCase()}`);
    this.#expectOp('(');
    const args: Expr[] = [];
    if (!this.#isOp(')')) {
      do {
        if (args.length > 0) this.#at++;
        args.push(this.#expr());
      } while (this.#isOp(','));
    }
    this.#expectOp(')');
    return (row, p) => fn(args.map((a) => a(row, p)));
  }

  #path(): Expr {
    const steps: (string | number)[] = [];
    for (;;) {
      if (this.#isOp('.')) {
        this.#at++;
        const name = this.#next();
        if (name.kind !== 'ident') this.#fail('expected a property name');
        steps.push(name.text);
      } else if (this.#isOp('[')) {
        this.#at++;
        const key = this.#next();
        if (key.kind !== 'string' && key.kind !== 'number') this.#fail('expected a quoted property name or an index');
        this.#expectOp(']');
        steps.push(key.value as string | number);
      } else break;
    }
    const alias = this.#alias;
    return (row) => {
      let v: unknown = row[alias];
      for (const s of steps) {
        if (v === null || typeof v !== 'object') return undefined;
        v = (v as Row)[s as string];
      }
      return v;
    };
  }
}

/**
 * Parses a query for the built-in evaluator.
 *
 * @example
 * ```ts
 * const q = parseBuiltinQuery('SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)');
 * q.run(docs, [{ name: '@prefix', value: 'lease.' }]);
 * ```
 * @throws UnsupportedQueryError when the query needs the full engine; QuerySyntaxError when it is malformed.
 */
export function parseBuiltinQuery(sql: string): BuiltinQuery {
  return new Parser(sql).parse();
}
