// Role (CosmosLeaseStore): groups lease writes due in the same turn into one bulk request.
import type { Container, CreateOperationInput, JSONObject, OperationResponse, ReplaceOperationInput } from '@azure/cosmos';
import type { SchedulerLike, Subscription } from 'rxjs';
import { LeaseConflictError } from '../../errors/LeaseConflictError.js';

/** The most operations one bulk request may carry. */
const MAX_GROUP = 100;

type Doc = Record<string, unknown>;

interface Queued<R> {
  /** A conditional replace (with the etag it expects) or a create. */
  readonly etag: string | undefined;
  readonly id: string;
  readonly doc: Doc;
  readonly resolve: (result: R | undefined) => void;
  readonly reject: (error: unknown) => void;
}

/** How one write is sent on its own: a replace (errors mapped), or a create (`undefined` when the id exists). */
export interface SingleWrites<R> {
  replace(id: string, etag: string, doc: Doc): Promise<R>;
  create(doc: Doc): Promise<R | undefined>;
  /** The stored document `id`, or `undefined` when there is none. */
  read(id: string): Promise<Doc | undefined>;
  /** The document as stored (with `_etag`) → the caller's result; throws for a document it cannot read. */
  parse(stored: Doc): R;
  /** The request units a bulk request cost, in all. */
  charged?(requestUnits: number): void;
}

/**
 * Lease writes sent together, as one `items.bulk` request (up to 100) instead of a request each: through
 * the SDK a request costs about the same client and server CPU whether it carries one write or forty, and a
 * busy processor writes a checkpoint per page. Writes issued together (a bootstrap's creates and takes, a
 * stop's releases, renewals due on the same grid step) leave as one group at once, after the current turn
 * of the event loop (`setImmediate`, so a lone write waits for no timer). A write of a lease written less
 * than `windowMs` ago (the next checkpoint of a busy partition) waits until `windowMs` after that write,
 * with the writes of other leases due by then: a write waits at most that long, only after its own lease
 * was just written, and a lease's checkpoints acknowledged meanwhile coalesce into one write upstream.
 *
 * Each write keeps the outcome it would have had on its own: a replace 200 → the stored document, 412 / 404
 * → {@link LeaseConflictError}; a create 201 → the stored document, 409 → `undefined`. Anything else — an
 * operation throttled or timed out inside the bulk, or the whole request failing (the SDK's `bulk` reports
 * that without a status code, and, in a lease container of several physical partitions, after some of its
 * per-partition requests may have landed) — is sent again on its own, where the SDK's retry policies and
 * rxfeed's error mapping apply. A write sent again that meets the document changed (replace) or present
 * (create) reads it back: if the stored document is the one it wrote, it had landed and that is its result.
 * A group of one is sent as a plain request.
 *
 * @internal
 */
export class WriteGroups<R> {
  readonly #queue: Queued<R>[] = [];
  #timer: Pick<Subscription, 'unsubscribe'> | undefined;
  /** When the armed timer fires (scheduler time). */
  #timerAt = Infinity;
  /** When each lease was last sent, for those sent within the last `windowMs` (scheduler time). */
  readonly #sentAt = new Map<string, number>();

  constructor(
    private readonly container: Container,
    private readonly windowMs: number,
    private readonly scheduler: SchedulerLike,
    private readonly single: SingleWrites<R>,
  ) {}

  /** Replaces document `id` with `doc` if its etag is still `etag`, in the next group sent. */
  replace(id: string, etag: string, doc: Doc): Promise<R> {
    return this.#enqueue(id, etag, doc) as Promise<R>;
  }

  /** Creates `doc` unless a document with its id exists (then `undefined`), in the next group sent. */
  create(doc: Doc & { id: string }): Promise<R | undefined> {
    return this.#enqueue(doc.id, undefined, doc);
  }

  #enqueue(id: string, etag: string | undefined, doc: Doc): Promise<R | undefined> {
    return new Promise<R | undefined>((resolve, reject) => {
      const write = { id, etag, doc, resolve, reject };
      this.#queue.push(write);
      if (this.#queue.length >= MAX_GROUP) this.#flush();
      else this.#arm(this.#dueAt(write));
    });
  }

  #dueAt(write: Queued<R>): number {
    const now = this.scheduler.now();
    const sentAt = this.#sentAt.get(write.id);
    return sentAt === undefined ? now : Math.max(now, sentAt + this.windowMs);
  }

  #arm(at: number): void {
    if (this.#timer && this.#timerAt <= at) return;
    this.#timer?.unsubscribe();
    this.#timerAt = at;
    const delay = at - this.scheduler.now();
    // Due now: after the current turn of the event loop (writes issued by timers or replies of the same
    // turn join the group), not on a timer, which Node rounds up to a millisecond or more.
    this.#timer = delay > 0 ? this.scheduler.schedule(() => this.#flush(), delay) : nextTurn(() => this.#flush());
  }

  #flush(): void {
    this.#timer?.unsubscribe();
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = this.scheduler.now();
    const group: Queued<R>[] = [];
    const held: Queued<R>[] = [];
    for (const write of this.#queue) (group.length < MAX_GROUP && this.#dueAt(write) <= now ? group : held).push(write);
    this.#queue.splice(0, this.#queue.length, ...held);
    for (const [id, at] of this.#sentAt) if (at + this.windowMs <= now) this.#sentAt.delete(id);
    for (const write of group) this.#sentAt.set(write.id, now);
    if (held.length > 0) this.#arm(Math.min(...held.map((w) => this.#dueAt(w))));
    if (group.length === 1) this.#alone(group[0]!).then(group[0]!.resolve, group[0]!.reject);
    else if (group.length > 1) void this.#send(group);
  }

  #alone(write: Queued<R>): Promise<R | undefined> {
    return write.etag === undefined ? this.single.create(write.doc) : this.single.replace(write.id, write.etag, write.doc);
  }

  async #send(group: Queued<R>[]): Promise<void> {
    const operations = group.map(
      (w): ReplaceOperationInput | CreateOperationInput =>
        w.etag === undefined
          ? { operationType: 'Create', partitionKey: w.id, resourceBody: w.doc as JSONObject }
          : { operationType: 'Replace', id: w.id, partitionKey: w.id, ifMatch: w.etag, resourceBody: w.doc as JSONObject },
    );
    let results: OperationResponse[];
    try {
      // `bulk` is marked deprecated for `executeBulkOperations`, which waits for a timer (1 s) before it sends
      // a group smaller than 100: far too slow for a lease write.
      results = await this.container.items.bulk(operations, { continueOnError: true });
    } catch {
      for (const write of group) this.#again(write);
      return;
    }
    this.single.charged?.(results.reduce((sum, r) => sum + (r?.requestCharge ?? 0), 0));
    group.forEach((write, i) => {
      const result = results[i];
      const status = result?.statusCode;
      if ((status === 200 || status === 201) && result) {
        try {
          write.resolve(this.single.parse((result.resourceBody as Doc | undefined) ?? { ...write.doc, _etag: result.eTag }));
        } catch (error) {
          write.reject(error);
        }
      } else if (write.etag === undefined && status === 409) write.resolve(undefined);
      else if (write.etag !== undefined && status === 412) write.reject(new LeaseConflictError(write.id, 'changed'));
      else if (write.etag !== undefined && status === 404) write.reject(new LeaseConflictError(write.id, 'missing'));
      else this.#again(write);
    });
  }

  /** Sends a write that may have landed (its outcome is unknown) again on its own. */
  #again(write: Queued<R>): void {
    const landed = async (): Promise<R | undefined> => {
      const stored = await this.single.read(write.id);
      return stored && holds(stored, write.doc) ? this.single.parse(stored) : undefined;
    };
    this.#alone(write).then(
      async (result) => {
        // A create that finds the id taken: taken by this write's first attempt?
        write.resolve(result === undefined ? await landed().catch(() => undefined) : result);
      },
      async (error: unknown) => {
        const mine = error instanceof LeaseConflictError && error.kind === 'changed' ? await landed().catch(() => undefined) : undefined;
        if (mine === undefined) write.reject(error);
        else write.resolve(mine);
      },
    );
  }
}

/** Runs `fn` after the current turn of the event loop (`setImmediate`), unless unsubscribed first. */
function nextTurn(fn: () => void): Pick<Subscription, 'unsubscribe'> {
  const handle = setImmediate(fn);
  return { unsubscribe: () => clearImmediate(handle) };
}

/** Whether the stored document carries every field of `doc` with the same value (system fields aside). */
function holds(stored: Doc, doc: Doc): boolean {
  return Object.keys(doc).every((key) => same(stored[key], doc[key]));
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(b);
  return keys.length === Object.keys(a).length && keys.every((k) => same((a as Doc)[k], (b as Doc)[k]));
}
