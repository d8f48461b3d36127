import type { ChangeBatch } from '../../core/ChangeBatch.js';
import type { Partition } from '../../core/Partition.js';
import type { PartitionFeed } from '../../feed/reader/readPartition.js';
import type { PartitionContext } from '../types.js';

/**
 * @internal The {@link PartitionContext} of one ownership, with the batch of the call in flight and the last one
 * done.
 */
export class OwnershipContext<T> implements PartitionContext {
  readonly leaseToken: string;
  readonly partition: Partition;
  readonly epoch: number;
  readonly signal: AbortSignal;
  /** The batch whose call is in flight. */
  current: ChangeBatch<T> | undefined;
  /** The last batch whose call succeeded. */
  last: ChangeBatch<T> | undefined;
  /** Sequences acknowledged through `checkpoint()` (manual mode leaves the others to be handed back). */
  acknowledged = 0;

  constructor(
    feed: PartitionFeed<T>,
    readonly owner: string,
  ) {
    this.leaseToken = feed.leaseToken;
    this.partition = feed.partition;
    this.epoch = feed.epoch;
    this.signal = feed.signal;
  }

  async checkpoint(): Promise<void> {
    const batch = this.current ?? this.last;
    const origin = batch?.origin;
    if (!batch || !origin) return;
    if (origin.sequence > this.acknowledged) {
      this.acknowledged = origin.sequence;
      origin.tracker.acknowledge(origin.sequence, batch.position);
    }
    await origin.tracker.checkpoint(batch.position);
  }
}
