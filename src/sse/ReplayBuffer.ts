import type { Change } from '../core/Change.js';

/** @internal One change as the hub numbered it. */
export interface SseEntry<T> {
  /** Hub-local sequence number (1, 2, 3, …): orders the buffer, never sent to clients. */
  readonly seq: number;
  /** Lease token of the partition the change was read from. */
  readonly partition: string;
  readonly change: Change<T>;
  /** Event id after this change: the hub's positions once it is published. */
  readonly eventId: string;
}

/**
 * @internal The last `capacity` entries of a hub, in sequence order, in a fixed-size ring (memory is bounded by
 * `capacity` whatever the clients do). `onEvict` hears of every entry pushed out.
 */
export class ReplayBuffer<T> {
  readonly #ring: (SseEntry<T> | undefined)[];
  #start = 0;
  #size = 0;

  constructor(
    readonly capacity: number,
    private readonly onEvict: (entry: SseEntry<T>) => void,
  ) {
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
    if (this.capacity === 0) {
      this.onEvict(entry);
    } else if (this.#size < this.capacity) {
      this.#ring[(this.#start + this.#size) % this.capacity] = entry;
      this.#size++;
    } else {
      this.onEvict(this.#ring[this.#start]!);
      this.#ring[this.#start] = entry;
      this.#start = (this.#start + 1) % this.capacity;
    }
  }

  /** The entry numbered `seq`, if still held. */
  get(seq: number): SseEntry<T> | undefined {
    const oldest = this.oldestSeq;
    if (oldest === undefined || seq < oldest || seq >= oldest + this.#size) return undefined;
    return this.#ring[(this.#start + seq - oldest) % this.capacity];
  }
}
