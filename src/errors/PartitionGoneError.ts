import { RxfeedError } from './RxfeedError.js';

/**
 * The partition no longer exists because it was split or merged. Its lease is replaced by leases for the
 * partitions that now cover its range, each starting at its position.
 *
 * @example
 * ```ts
 * import { PartitionGoneError } from 'rxfeed';
 * if (err instanceof PartitionGoneError) console.info(`partition ${err.partitionId} split`);
 * ```
 */
export class PartitionGoneError extends RxfeedError {
  constructor(
    /** The id of the partition that is gone. */
    readonly partitionId: string,
    options?: { cause?: unknown },
  ) {
    super(`partition ${partitionId} is gone (split or merged)`, options);
  }
}
