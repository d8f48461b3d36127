import type { Partition, Position, StartFrom } from '../../core/Partition.js';
import { ResourceGoneError } from '../../errors/index.js';
import { lsnOfPosition } from './continuation.js';

/**
 * Throws a {@link ResourceGoneError} when a read from `from` answered a `position` with a lower LSN. LSNs only
 * grow, and split children inherit their parent's: a position that moves backwards means the log is not the
 * one the position was taken from, the container was deleted and created again under the same name. Reading
 * on would silently skip everything up to the old LSN, so the read stops instead.
 *
 * @param description - the source's name, for the error.
 * @internal
 */
export function checkForward(partition: Partition, from: StartFrom, position: Position, description: string): void {
  if (typeof from !== 'object' || from instanceof Date || from.position === position) return;
  const before = lsnOfPosition(from.position);
  const after = lsnOfPosition(position);
  if (before === undefined || after === undefined || after >= before) return;
  throw new ResourceGoneError(
    `${description} (partition ${partition.id} answered position ${position} to a read after ${from.position}: ` +
      'the container was re-created; stored positions belong to the old one)',
  );
}
