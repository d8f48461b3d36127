/**
 * Base class of every error rxfeed throws or reports, so `err instanceof RxfeedError` tells library errors
 * from others.
 *
 * @example
 * ```ts
 * import { RxfeedError } from 'rxfeed';
 * if (err instanceof RxfeedError) console.error(err.name, err.message);
 * ```
 */
export class RxfeedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
