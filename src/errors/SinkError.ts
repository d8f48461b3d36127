import { RxfeedError } from './RxfeedError.js';
import { errorCode } from './classify.js';

/**
 * A sink (a view or an index) refused a write in a way no wait can fix: rejected credentials, a missing
 * table or database, bad SQL, a row the table cannot hold. The pipeline ends with it; transient failures
 * (connection refused, timeouts, deadlocks) never end it, they are retried inside the sink.
 *
 * @example
 * ```ts
 * import { SinkError } from 'rxfeed';
 * feed$.pipe(materializeToView(view, { project })).subscribe({ error: (e) => e instanceof SinkError && console.error(e.code, e.message) });
 * ```
 */
export class SinkError extends RxfeedError {
  /** The driver's code, when it gave one (a SQLSTATE such as `'42P01'`, or `'ENOTFOUND'`). */
  readonly code: string | undefined;

  constructor(
    /** The sink, as its `description` names it (never with credentials). */
    readonly sink: string,
    cause: unknown,
  ) {
    const code = errorCode(cause);
    super(
      `write to ${sink} failed in a way waiting cannot fix${code ? ` (${code})` : ''}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.code = code;
  }
}
