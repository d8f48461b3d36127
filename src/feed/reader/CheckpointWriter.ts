import type { FeedEvent } from '../../core/events.js';
import type { Position } from '../../core/Partition.js';
import type { Logger } from '../../internal/log.js';
import type { OwnedLease } from '../../leases/LeaseCoordinator.js';

/**
 * Writes one ownership's checkpoints through its lease, one at a time: a position requested while a write
 * is in flight is coalesced into the next write, and a position already written is skipped. Every write is
 * also added to `writes`, so the processor's `stop()` can await it.
 *
 * @internal
 */
export class CheckpointWriter {
  #written: Position | null;
  #requested: Position | null = null;
  #chain: Promise<void> = Promise.resolve();
  #checkpointedChanges: number;

  constructor(
    private readonly owned: OwnedLease,
    private readonly writes: Set<Promise<unknown>>,
    private readonly emit: (event: FeedEvent) => void,
    private readonly owner: string,
    private readonly log: Logger,
    /** Changes acknowledged so far (for the `changes` count of checkpoint events). */
    private readonly ackedChanges: () => number,
  ) {
    this.#written = owned.lease.continuation;
    this.#checkpointedChanges = 0;
  }

  /** The last position written (or the lease's checkpoint). */
  get written(): Position | null {
    return this.#written;
  }

  /** Writes `position` after the writes before it; resolves when it (or a newer position) is written. */
  write(position: Position): Promise<void> {
    this.#requested = position;
    const write = this.#chain.then(() => this.#writeRequested());
    this.#chain = write.catch(() => undefined);
    this.writes.add(write);
    const forget = () => this.writes.delete(write);
    write.then(forget, forget);
    return write;
  }

  /** Waits for every write requested so far. */
  settled(): Promise<void> {
    return this.#chain;
  }

  async #writeRequested(): Promise<void> {
    const position = this.#requested;
    if (position === null || position === this.#written) return;
    const changes = this.ackedChanges();
    await this.owned.checkpoint(position);
    this.#written = position;
    this.log('checkpoint %s', position);
    this.emit({
      type: 'checkpoint',
      owner: this.owner,
      lease: this.owned.leaseToken,
      position,
      changes: changes - this.#checkpointedChanges,
    });
    this.#checkpointedChanges = changes;
  }
}
