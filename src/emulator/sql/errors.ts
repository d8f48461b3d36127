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
