import { type MonoTypeOperatorFunction, type SchedulerLike, tap } from 'rxjs';
import type { ChangeBatch } from '../../core/ChangeBatch.js';
import { InvalidOptionsError } from '../../errors/index.js';
import { checkpointEvery } from '../../operators/checkpointEvery.js';
import type { ProcessChangesOptions } from '../types.js';

/**
 * @internal The ack point of each partition's pipeline for the `checkpoint` option: `checkpointEvery` (on the
 * feed's scheduler unless it is the default one), or, for `'manual'`, {@link releaseUnacknowledged}. Validates
 * the option now; throws `InvalidOptionsError`.
 */
export function checkpointerOf<T>(
  checkpoint: NonNullable<ProcessChangesOptions<T>['checkpoint']>,
  scheduler: SchedulerLike | undefined,
): () => MonoTypeOperatorFunction<ChangeBatch<T>> {
  if (checkpoint !== 'manual' && (typeof checkpoint !== 'object' || checkpoint === null)) {
    throw new InvalidOptionsError('checkpoint', "give { count, ms } or 'manual'");
  }
  const checkpointer = (): MonoTypeOperatorFunction<ChangeBatch<T>> =>
    checkpoint === 'manual' ? releaseUnacknowledged() : checkpointEvery({ ...checkpoint, ...(scheduler ? { scheduler } : {}) });
  checkpointer(); // validates { count, ms } now
  return checkpointer;
}

/**
 * Manual checkpointing: a batch whose call succeeded without `context.checkpoint()` returns its read
 * credit (its position is not acknowledged; a later checkpoint covers it).
 */
function releaseUnacknowledged<T>(): MonoTypeOperatorFunction<ChangeBatch<T>> {
  // Dropping a batch `context.checkpoint()` acknowledged is a no-op: the ledger is past it.
  return tap((batch) => batch.origin?.tracker.drop(batch.origin.sequence));
}
