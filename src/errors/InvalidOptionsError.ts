import { RxfeedError } from './RxfeedError.js';

/**
 * An option has a value rxfeed cannot use. Thrown at construction, never later; the message names the
 * option and says what to fix.
 *
 * @example
 * ```ts
 * import { InvalidOptionsError } from 'rxfeed';
 * try { changeFeed({ ...opts, pollIntervalMs: -1 }); } catch (e) { if (e instanceof InvalidOptionsError) console.error(e.message); }
 * ```
 */
export class InvalidOptionsError extends RxfeedError {
  constructor(
    /** Name of the offending option. */
    readonly option: string,
    problem: string,
  ) {
    super(`invalid option ${option}: ${problem}`);
  }
}
