import type { Container, JSONObject, OperationResponse, ReplaceOperationInput } from '@azure/cosmos';
import type { SchedulerLike, Subscription } from 'rxjs';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';

/** The most operations one bulk request may carry. */
const MAX_GROUP = 100;

interface Queued<R> {
  readonly id: string;
  readonly etag: string;
  readonly doc: Record<string, unknown>;
  readonly resolve: (result: R) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Conditional lease replaces sent together, as one `items.bulk` request (up to 100) instead of a request
 * each: through the SDK a request costs about the same client and server CPU whether it carries one write
 * or forty, and a busy processor writes a checkpoint per page. Writes issued together (a bootstrap's takes,
 * a stop's releases) leave as one group at once, after the current turn of the event loop; after that, a
 * group leaves at most every `windowMs`, carrying what was issued meanwhile, so a write waits at most that
 * long and only while others are being written.
 *
 * Each write keeps the outcome a single replace would have had: 200 → the stored document, 412 / 404 →
 * {@link LeaseConflictError}. Anything else — an operation throttled or timed out inside the bulk, or the
 * whole request failing (the SDK's `bulk` reports that without a status code, and, in a lease container of
 * several physical partitions, after some of its per-partition requests may have landed) — is sent again
 * on its own through `single`, where the SDK's retry policies and rxfeed's error mapping apply. A write sent
 * again that conflicts is read back: if the stored document is the one it wrote, it had landed and that is
 * its result. A group of one is sent as a plain replace.
 *
 * @internal
 */
export class ReplaceGroups<R> {
  readonly #queue: Queued<R>[] = [];
  #timer: Subscription | undefined;
  /** When the last group left (scheduler time). */
  #sentAt = -Infinity;

  constructor(
    private readonly container: Container,
    private readonly windowMs: number,
    private readonly scheduler: SchedulerLike,
    /** The document as stored (with `_etag`) → the caller's result; throws for a document it cannot read. */
    private readonly parse: (stored: Record<string, unknown>) => R,
    /** One replace on its own, errors mapped. */
    private readonly single: (id: string, etag: string, doc: Record<string, unknown>) => Promise<R>,
    /** The stored document `id`, or `undefined` when there is none. */
    private readonly read: (id: string) => Promise<Record<string, unknown> | undefined>,
  ) {}

  /** Replaces document `id` with `doc` if its etag is still `etag`, in the next group sent. */
  replace(id: string, etag: string, doc: Record<string, unknown>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ id, etag, doc, resolve, reject });
      if (this.#queue.length >= MAX_GROUP) this.#flush();
      else this.#arm();
    });
  }

  #arm(): void {
    this.#timer ??= this.scheduler.schedule(() => this.#flush(), Math.max(0, this.#sentAt + this.windowMs - this.scheduler.now()));
  }

  #flush(): void {
    this.#timer?.unsubscribe();
    this.#timer = undefined;
    this.#sentAt = this.scheduler.now();
    const group = this.#queue.splice(0, MAX_GROUP);
    if (this.#queue.length > 0) this.#arm();
    if (group.length === 1) this.#alone(group[0]!);
    else if (group.length > 1) void this.#send(group);
  }

  #alone(write: Queued<R>): void {
    this.single(write.id, write.etag, write.doc).then(write.resolve, write.reject);
  }

  async #send(group: Queued<R>[]): Promise<void> {
    const operations: ReplaceOperationInput[] = group.map((w) => ({
      operationType: 'Replace',
      id: w.id,
      partitionKey: w.id,
      ifMatch: w.etag,
      resourceBody: w.doc as JSONObject,
    }));
    let results: OperationResponse[];
    try {
      // `bulk` is marked deprecated for `executeBulkOperations`, which waits for a timer (1 s) before it sends
      // a group smaller than 100: far too slow for a lease write.
      results = await this.container.items.bulk(operations, { continueOnError: true });
    } catch {
      for (const write of group) this.#again(write);
      return;
    }
    group.forEach((write, i) => {
      const result = results[i];
      const status = result?.statusCode;
      if (status === 200 && result) {
        try {
          const stored = (result.resourceBody as Record<string, unknown> | undefined) ?? { ...write.doc, _etag: result.eTag };
          write.resolve(this.parse(stored));
        } catch (error) {
          write.reject(error);
        }
      } else if (status === 412) write.reject(new LeaseConflictError(write.id, 'changed'));
      else if (status === 404) write.reject(new LeaseConflictError(write.id, 'missing'));
      else this.#again(write);
    });
  }

  /** Sends a write that may have landed (its outcome is unknown) again on its own. */
  #again(write: Queued<R>): void {
    this.single(write.id, write.etag, write.doc).then(write.resolve, async (error: unknown) => {
      try {
        const stored = error instanceof LeaseConflictError && error.kind === 'changed' ? await this.read(write.id) : undefined;
        if (stored && holds(stored, write.doc)) write.resolve(this.parse(stored));
        else write.reject(error);
      } catch {
        write.reject(error);
      }
    });
  }
}

/** Whether the stored document carries every field of `doc` with the same value (system fields aside). */
function holds(stored: Record<string, unknown>, doc: Record<string, unknown>): boolean {
  return Object.keys(doc).every((key) => same(stored[key], doc[key]));
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(b);
  return keys.length === Object.keys(a).length && keys.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
