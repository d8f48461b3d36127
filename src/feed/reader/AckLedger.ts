import type { Position } from '../../core/Partition.js';
import type { CreditAccount } from '../CreditPool.js';

interface Outstanding {
  readonly sequence: number;
  /** Changes read in the batch: the credit it holds (0 once dropped). */
  count: number;
  /** Scheduler time the batch was emitted. */
  readonly readAt: number;
  dropped: boolean;
}

/** What an acknowledgement did. */
export interface Acknowledged {
  /** Changes whose credit was returned. */
  readonly freed: number;
  /** Sequences skipped without being acknowledged or dropped (an operator lost them), if any. */
  readonly skipped: readonly [first: number, last: number] | undefined;
}

/**
 * The ack ledger of one ownership: which batches were read and not yet acknowledged, in order, and the read
 * credit each holds. An acknowledgement of batch n acknowledges every earlier batch too (a partition is
 * processed in order) and returns their credit; a dropped batch returns its credit without moving the
 * acknowledged position.
 *
 * @internal
 */
export class AckLedger {
  readonly #account: CreditAccount;
  readonly #queue: Outstanding[] = [];
  #head = 0;
  #sequence = 0;
  #ackedSequence = 0;
  #ackedPosition: Position | null;
  #ackedChanges = 0;
  /** Made with the first listener (only a drain listens). */
  #listeners: Set<() => void> | undefined;

  constructor(account: CreditAccount, position: Position | null) {
    this.#account = account;
    this.#ackedPosition = position;
  }

  /** Position of the last acknowledged batch (or the lease's checkpoint). */
  get ackedPosition(): Position | null {
    return this.#ackedPosition;
  }

  /** Changes acknowledged so far (as read, before any filtering). */
  get ackedChanges(): number {
    return this.#ackedChanges;
  }

  /** Batches read and neither acknowledged nor dropped. */
  get pending(): number {
    let n = 0;
    for (let i = this.#head; i < this.#queue.length; i++) if (!this.#queue[i]!.dropped) n++;
    return n;
  }

  /** When the oldest pending batch was read (scheduler time), or `undefined` when none is pending. */
  get oldestReadAt(): number | undefined {
    for (let i = this.#head; i < this.#queue.length; i++) if (!this.#queue[i]!.dropped) return this.#queue[i]!.readAt;
    return undefined;
  }

  /** Records a batch of `count` changes (whose credit is already taken); returns its sequence number. */
  record(count: number, readAt: number): number {
    const sequence = ++this.#sequence;
    this.#queue.push({ sequence, count, readAt, dropped: false });
    return sequence;
  }

  /** Batch `sequence` (and every earlier one) is done; returns what that freed. Replays are ignored. */
  acknowledge(sequence: number, position: Position): Acknowledged | undefined {
    if (sequence <= this.#ackedSequence || sequence > this.#sequence) return undefined;
    let freed = 0;
    let skipped: [number, number] | undefined;
    const queue = this.#queue;
    while (this.#head < queue.length && queue[this.#head]!.sequence <= sequence) {
      const entry = queue[this.#head++]!;
      if (entry.sequence < sequence && !entry.dropped) skipped = skipped ? [skipped[0], entry.sequence] : [entry.sequence, entry.sequence];
      freed += entry.count;
    }
    this.#compact();
    this.#ackedSequence = sequence;
    this.#ackedPosition = position;
    this.#ackedChanges += freed;
    this.#account.release(freed);
    this.#notify();
    return { freed, skipped };
  }

  /** Batch `sequence` left the pipeline unacknowledged: returns its credit (how much). */
  drop(sequence: number): number {
    for (let i = this.#head; i < this.#queue.length; i++) {
      const entry = this.#queue[i]!;
      if (entry.sequence > sequence) break;
      if (entry.sequence === sequence && !entry.dropped) {
        const freed = entry.count;
        entry.count = 0;
        entry.dropped = true;
        this.#account.release(freed);
        this.#notify();
        return freed;
      }
    }
    return 0;
  }

  /** Returns the credit of every pending batch (nobody will acknowledge them any more). */
  releaseAll(): number {
    let freed = 0;
    for (let i = this.#head; i < this.#queue.length; i++) {
      const entry = this.#queue[i]!;
      freed += entry.count;
      entry.count = 0;
      entry.dropped = true;
    }
    this.#account.release(freed);
    this.#notify();
    return freed;
  }

  /** Calls `fn` after every acknowledgement or drop, until the returned function is called. */
  onChange(fn: () => void): () => void {
    const listeners = (this.#listeners ??= new Set());
    listeners.add(fn);
    return () => listeners.delete(fn);
  }

  #notify(): void {
    const listeners = this.#listeners;
    if (listeners !== undefined && listeners.size > 0) for (const fn of [...listeners]) fn();
  }

  #compact(): void {
    // All acknowledged (an idle partition's one batch, or a busy one caught up): nothing kept alive with the lease.
    if (this.#head === this.#queue.length) {
      this.#queue.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue.splice(0, this.#head);
      this.#head = 0;
    }
  }
}
