/**
 * A small built-in evaluator for the Cosmos SQL shapes that lease stores, dead-letter stores and most tests
 * send: `SELECT * | VALUE expr | projections | VALUE COUNT(1)`, `TOP n`, `FROM c` (or `FROM root r`), `WHERE` with comparisons,
 * `AND` / `OR` / `NOT`, `IN`, parameters, a few string and type functions, and `ORDER BY` on properties.
 * Everything else (joins, subqueries, `GROUP BY`, most functions) is left to the optional full engine: the
 * parser throws {@link UnsupportedQueryError} naming what it did not understand.
 */
export { QuerySyntaxError, UnsupportedQueryError } from './errors.js';
export type { BuiltinQuery } from './evaluator.js';
export { parseBuiltinQuery } from './parser.js';
