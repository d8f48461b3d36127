import type { Container, FeedRange as SdkFeedRange } from '@azure/cosmos';
import type { Partition } from '../../core/Partition.js';
import { PartitionGoneError } from '../../errors/index.js';
import { isEpkPartition, sameRange } from './whyGone.js';

/**
 * The SDK's own FeedRange object for `partition`, which a point-in-time start needs (the SDK refuses plain
 * copies). An EPK-range partition (part of a merged range) has none of its own: it gets one of the same class
 * as the range holding it, so the SDK reads just that part. Throws a {@link PartitionGoneError} when no range
 * of the container is the partition's, or holds it.
 *
 * @internal
 */
export async function sdkFeedRange(container: Container, partition: Partition): Promise<SdkFeedRange> {
  const ranges = await container.getFeedRanges();
  const match = ranges.find((r) => sameRange(partition.range, r));
  if (match) return match;
  const { minInclusive, maxExclusive } = partition.range;
  const holder = isEpkPartition(partition)
    ? ranges.find((r) => r.minInclusive <= minInclusive && maxExclusive <= r.maxExclusive)
    : undefined;
  if (!holder) throw new PartitionGoneError(partition.id);
  const SdkRange = holder.constructor as new (min: string, max: string) => SdkFeedRange;
  return new SdkRange(minInclusive, maxExclusive);
}
