import type { DeadLetter, DeadLetterWriter } from './DeadLetter.js';
import type { DeadLetterSink } from './DeadLetterSink.js';

/**
 * A {@link DeadLetterSink} that hands letters to your function: post them to a queue, a topic, a ticket
 * system. The checkpoint passes the letters only after the promise resolves; a rejection holds the partition
 * and is retried. Fencing is yours: `writer.epoch` is the lease epoch of the writing host.
 *
 * @example
 * ```ts
 * import { callbackDeadLetterSink } from 'rxfeed';
 * const deadLetter = callbackDeadLetterSink(async (letters) => { await queue.sendBatch(letters); }, 'orders-poison queue');
 * ```
 */
export function callbackDeadLetterSink<T = unknown>(
  write: (letters: readonly DeadLetter<T>[], writer: DeadLetterWriter) => Promise<void> | void,
  description = 'callback dead-letter sink',
): DeadLetterSink<T> {
  if (typeof write !== 'function') throw new TypeError('callbackDeadLetterSink needs a function (letters, writer) => Promise<void>');
  return { description, write: async (letters, writer) => write(letters, writer) };
}
