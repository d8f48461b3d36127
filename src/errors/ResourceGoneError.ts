import { RxfeedError } from './RxfeedError.js';

/**
 * The monitored container (or its database) no longer exists. The processor stops with close reason
 * `ResourceGone` instead of retrying.
 *
 * @example
 * ```ts
 * import { ResourceGoneError } from 'rxfeed';
 * if (err instanceof ResourceGoneError) process.exitCode = 2;
 * ```
 */
export class ResourceGoneError extends RxfeedError {
  constructor(
    /** What is gone, e.g. `dbs/shop/colls/orders`. */
    readonly resource: string,
    options?: { cause?: unknown },
  ) {
    super(`${resource} does not exist (deleted?); stopping instead of retrying`, options);
  }
}
