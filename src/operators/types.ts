import type { BatchOrBatches, ChangeBatch } from '../core/ChangeBatch.js';

/**
 * The document type carried by a batch or an array of batches: `DocumentOf<ChangeBatch<Order>>` is `Order`.
 *
 * In short: lets an operator read the document type off whatever flows into it, so callbacks are typed
 * without annotations.
 *
 * @example
 * ```ts
 * import type { ChangeBatch, DocumentOf } from 'rxfeed';
 * type Order = DocumentOf<ChangeBatch<{ total: number }>>; // { total: number }
 * ```
 */
export type DocumentOf<B> =
  B extends ChangeBatch<infer T> ? T : B extends readonly ChangeBatch<infer T>[] ? T : never;

/**
 * What a batch-or-batches `B` becomes when its documents turn into `R`: a batch stays a batch, an array of
 * batches stays an array.
 *
 * @example
 * ```ts
 * import type { ChangeBatch, Rebatched } from 'rxfeed';
 * type Ids = Rebatched<ChangeBatch<{ id: string }>[], string>; // ChangeBatch<string>[]
 * ```
 */
export type Rebatched<B, R> = B extends ChangeBatch<unknown> ? ChangeBatch<R> : ChangeBatch<R>[];

/**
 * Anything that may flow into an rxfeed operator: a batch or an array of batches, of any document type.
 * (`any`, not `unknown`: an operator built outside a `pipe` from an annotated callback must still accept it.)
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyBatches = BatchOrBatches<any>;

/** Options of the operators that run asynchronous work per batch. */
export interface ConcurrencyOptions {
  /**
   * How many partitions may have work in flight at once (batches of one partition always run one at a
   * time, in order). A positive integer or `Infinity`. Default `4`.
   */
  readonly concurrency?: number;
}
