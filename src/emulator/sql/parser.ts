import { UnsupportedQueryError } from './errors.js';
import {
  and,
  arrayOf,
  builtinFunction,
  call,
  compileQuery,
  comparison,
  countOf,
  fieldsOf,
  inList,
  literal,
  not,
  or,
  parameter,
  path,
  selectAll,
  type BuiltinQuery,
  type Expr,
  type Projection,
} from './evaluator.js';
import { tokenize, type Token } from './tokenizer.js';

const KEYWORDS = new Set(['select', 'value', 'top', 'from', 'where', 'order', 'by', 'asc', 'desc', 'and', 'or', 'not', 'in', 'as', 'true', 'false', 'null', 'undefined']);
const UNSUPPORTED_KEYWORDS = new Set(['join', 'group', 'distinct', 'offset', 'limit', 'exists', 'between', 'like', 'array', 'udf']);

/** Recursive descent over a query's tokens, building the evaluator's expressions as it goes. */
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
    return compileQuery({ alias: this.#alias, top, where, orderBy, project });
  }

  #projection(): Projection {
    if (this.#isOp('*')) {
      this.#at++;
      return selectAll(this.#alias);
    }
    if (this.#isWord('value')) {
      this.#at++;
      if (this.#isWord('count') && this.#peek(1).text === '(') {
        this.#at += 2;
        const arg = this.#expr();
        this.#expectOp(')');
        return countOf(arg);
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
    return fieldsOf(fields);
  }

  #expr(): Expr {
    return this.#or();
  }

  #or(): Expr {
    let left = this.#and();
    while (this.#isWord('or')) {
      this.#at++;
      left = or(left, this.#and());
    }
    return left;
  }

  #and(): Expr {
    let left = this.#not();
    while (this.#isWord('and')) {
      this.#at++;
      left = and(left, this.#not());
    }
    return left;
  }

  #not(): Expr {
    if (this.#isWord('not')) {
      this.#at++;
      return not(this.#not());
    }
    return this.#comparison();
  }

  #comparison(): Expr {
    const left = this.#primary();
    const t = this.#peek();
    if (t.kind === 'op' && ['=', '!=', '<>', '<', '<=', '>', '>='].includes(t.text)) {
      this.#at++;
      return comparison(t.text, left, this.#primary());
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
      return inList(left, items, negated);
    }
    if (t.kind === 'op' && ['+', '-', '/', '%', '||', '??'].includes(t.text)) this.#fail(`uses the operator ${t.text}`);
    if (t.kind === 'op' && t.text === '*') this.#fail('uses the operator *');
    return left;
  }

  #primary(): Expr {
    const t = this.#next();
    if (t.kind === 'number' || t.kind === 'string') return literal(t.value);
    if (t.kind === 'param') return parameter(t.text);
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
      return arrayOf(items);
    }
    if (t.kind === 'op' && t.text === '-' && this.#peek().kind === 'number') {
      return literal(-(this.#next().value as number));
    }
    if (t.kind === 'ident') {
      const lower = t.text.toLowerCase();
      if (lower === 'true') return literal(true);
      if (lower === 'false') return literal(false);
      if (lower === 'null') return literal(null);
      if (lower === 'undefined') return literal(undefined);
      if (this.#isOp('(')) return this.#call(t.text);
      if (t.text === this.#alias) return this.#path();
    }
    this.#at--;
    this.#fail('expected a value');
  }

  #call(name: string): Expr {
    const fn = builtinFunction(name);
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
    return call(fn, args);
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
    return path(this.#alias, steps);
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
