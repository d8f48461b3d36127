import type { SchedulerLike, Subscription } from 'rxjs';
import type { Partition, Position, StartFrom } from '../../core/Partition.js';
import { onAbort } from '../../internal/abortWatch.js';
import type { Page, Source } from '../../sources/Source.js';
import type { ReadLimiter } from './ReadLimiter.js';

/** A first page read while the write that makes its lease this host's is on its way. */
interface Early<T> {
  readonly epoch: number;
  /** The position it was read from (`null`: the partition's beginning). */
  readonly from: Position | null;
  readonly page: Promise<Page<T>>;
  readonly controller: AbortController;
  readonly expiry: Subscription;
}

/**
 * The first page of each lease this host is about to own, read beside the write that makes it its own (a
 * claimed create, an acquisition) instead of one round trip after it: a reader starting on a lease takes the
 * page read for it, when it was read for that ownership (the epoch written) from where the reader starts.
 *
 * Only a hint, never ahead of ownership: nothing read here reaches the pipeline before the lease is owned and
 * its reader takes the page (under the reader's credit and deadline, as any read of its own). A page nobody
 * takes (the write failed: another host took the lease first) is dropped after `keepMs`. A read is started
 * only when a slot of `maxConcurrentReads` is free (it holds it while in flight) and the lease is read from a
 * position, or from the beginning: a start still to pin ('now', a time) is left to the reader.
 *
 * @internal
 */
export class FirstPages<T> {
  readonly #early = new Map<string, Early<T>>();

  constructor(
    private readonly source: Source<T>,
    private readonly reads: ReadLimiter,
    private readonly scheduler: SchedulerLike,
    /** Aborts every read here when the run ends. */
    private readonly signal: AbortSignal,
    /** Largest page read (`maxItemCount`). */
    private readonly pageSize: number,
    /** How long a page nobody took is kept, in ms. */
    private readonly keepMs: number,
  ) {}

  /** Pages read and not taken yet. */
  get size(): number {
    return this.#early.size;
  }

  /**
   * Reads the first page of lease `id` (to be owned at `epoch`) of `partition`, from its `continuation`, or
   * from the beginning when it has none and `start` is `'beginning'`; nothing otherwise, nor without a free
   * read slot. Returns what drops the page (the write did not make the lease this host's).
   */
  read(id: string, epoch: number, partition: Partition, continuation: Position | null, start: StartFrom): (() => void) | undefined {
    if (this.signal.aborted || (continuation === null && start !== 'beginning')) return undefined;
    this.#drop(id);
    if (!this.reads.tryAcquire()) return undefined;
    const controller = new AbortController();
    const stopWatching = onAbort(this.signal, () => controller.abort(this.signal.reason));
    const from: StartFrom = continuation === null ? 'beginning' : { position: continuation };
    const page = this.source.read({ partition, from, maxItemCount: this.pageSize, signal: controller.signal }).finally(() => {
      stopWatching();
      this.reads.release();
    });
    page.catch(() => undefined); // taken (and its failure handled) by the reader, or dropped
    const expiry = this.scheduler.schedule(() => this.#drop(id), this.keepMs);
    const early: Early<T> = { epoch, from: continuation, page, controller, expiry };
    this.#early.set(id, early);
    return () => {
      if (this.#early.get(id) === early) this.#drop(id);
    };
  }

  /**
   * The page read for lease `id` owned at `epoch` from `from` (`null`: its beginning), as a read the reader runs
   * under its deadline (its signal aborts the read); `undefined` when none was read for that.
   */
  take(id: string, epoch: number, from: Position | null): ((signal: AbortSignal) => Promise<Page<T>>) | undefined {
    const early = this.#early.get(id);
    if (!early) return undefined;
    this.#early.delete(id);
    early.expiry.unsubscribe();
    if (early.epoch !== epoch || early.from !== from) {
      early.controller.abort();
      return undefined;
    }
    return (signal) => {
      const stopWatching = onAbort(signal, () => early.controller.abort(signal.reason));
      return early.page.finally(stopWatching);
    };
  }

  #drop(id: string): void {
    const early = this.#early.get(id);
    if (!early) return;
    this.#early.delete(id);
    early.expiry.unsubscribe();
    early.controller.abort();
  }
}
