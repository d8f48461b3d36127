import { QuerySyntaxError, UnsupportedQueryError } from './errors.js';

/** One token of a query; `end` closes every token list. */
export interface Token {
  kind: 'ident' | 'number' | 'string' | 'param' | 'op' | 'end';
  text: string;
  value?: unknown;
}

/**
 * The tokens of a query: identifiers (keywords included), numbers, quoted strings, `@parameters` and
 * operators, then one `end` token.
 *
 * @example
 * ```ts
 * tokenize('SELECT * FROM c'); // ident SELECT, op *, ident FROM, ident c, end
 * ```
 * @throws UnsupportedQueryError for comments; QuerySyntaxError for an unterminated string or an unknown character.
 */
export function tokenize(sql: string): Token[] {
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
