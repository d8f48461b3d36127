export { createChangeFeed, changeFeed, partitionFeeds, type ChangeFeedProcessor } from './createChangeFeed.js';
export type { ChangeFeedOptions } from './options.js';
export type { PartitionFeed } from './reader/readPartition.js';
