import type { Change } from '../core/Change.js';

/** One change as the hub numbered it. */
export interface SseEntry<T> {
  /** Sequence number in the hub's stream (1, 2, 3, …). */
  readonly seq: number;
  /** Lease token of the partition the change was read from. */
  readonly partition: string;
  readonly change: Change<T>;
}

/**
 * @internal The last `capacity` entries of a hub, in sequence order, in a fixed-size ring (memory is bounded by
 * `capacity` whatever the clients do).
 */
export class ReplayBuffer<T> {
  readonly #ring: (SseEntry<T> | undefined)[];
  #start = 0;
  #size = 0;

  constructor(readonly capacity: number) {
    this.#ring = new Array<SseEntry<T> | undefined>(capacity);
  }

  /** Entries held. */
  get size(): number {
    return this.#size;
  }

  /** Sequence number of the oldest entry held, or `undefined` when empty. */
  get oldestSeq(): number | undefined {
    return this.#size === 0 ? undefined : this.#ring[this.#start]!.seq;
  }

  /** Appends an entry (its `seq` must follow the last one), evicting the oldest when full. */
  push(entry: SseEntry<T>): void {
    if (this.capacity === 0) return;
    if (this.#size < this.capacity) {
      this.#ring[(this.#start + this.#size) % this.capacity] = entry;
      this.#size++;
    } else {
      this.#ring[this.#start] = entry;
      this.#start = (this.#start + 1) % this.capacity;
    }
  }

  /**
   * The entries after `seq` up to the newest, or `'gap'` when some of them were already evicted. `head` is the
   * hub's newest sequence number (entries may be fewer than `head` when the buffer is empty or small).
   */
  after(seq: number, head: number): readonly SseEntry<T>[] | 'gap' {
    if (seq >= head) return [];
    const oldest = this.oldestSeq;
    if (oldest === undefined || seq + 1 < oldest) return 'gap';
    const out: SseEntry<T>[] = [];
    for (let i = seq + 1 - oldest; i < this.#size; i++) out.push(this.#ring[(this.#start + i) % this.capacity]!);
    return out;
  }
}
