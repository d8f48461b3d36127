import { RxfeedError } from './RxfeedError.js';

/**
 * The service refused the credentials (401/403). Retrying cannot help; the processor stops at once.
 *
 * @example
 * ```ts
 * import { CredentialsError } from 'rxfeed';
 * if (err instanceof CredentialsError) console.error('check COSMOS_KEY');
 * ```
 */
export class CredentialsError extends RxfeedError {
  constructor(
    /** HTTP status the service answered with (401 or 403). */
    readonly statusCode: number,
    options?: { cause?: unknown },
  ) {
    super(
      `the service rejected the credentials (HTTP ${statusCode}): check the account key or token and its permissions`,
      options,
    );
  }
}
