// Role: counts consecutive failures per operation and reports them at a falling rate (logs, `error` events).
import { errorEvent, worthReporting } from '../../errors/errorEvent.js';
import type { FeedEvent } from '../../core/events.js';
import { logger } from '../../internal/log.js';

/**
 * Consecutive failures per operation (`scan`, `renew:<lease id>`, …) of one host. Every failure is logged
 * with its count; the 1st, 3rd, 10th, 30th, … of a run are also `error` events (with `attempts`), so a
 * failure that keeps repeating stays visible without `DEBUG` and without flooding the events stream.
 *
 * @internal
 */
export class FailureCounter {
  readonly #counts = new Map<string, number>();

  constructor(
    private readonly owner: string,
    private readonly emit: (event: FeedEvent) => void,
  ) {}

  succeeded(operation: string): void {
    this.#counts.delete(operation);
  }

  failed(operation: string, error: unknown, lease?: string): void {
    const attempts = (this.#counts.get(operation) ?? 0) + 1;
    this.#counts.set(operation, attempts);
    const err = error instanceof Error ? error : new Error(String(error));
    logger('lease', { owner: this.owner, ...(lease ? { lease } : {}) })('%s failed (%d in a row): %s', operation.split(':')[0], attempts, err.message);
    if (worthReporting(attempts)) this.emit(errorEvent(this.owner, err, { ...(lease ? { lease } : {}), attempts }));
  }
}
