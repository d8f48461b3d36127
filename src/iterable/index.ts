export {
  changeFeedIterable,
  type ChangeFeedIterable,
  type ChangeFeedIterableOptions,
  type CheckpointPolicy,
} from './changeFeedIterable.js';
