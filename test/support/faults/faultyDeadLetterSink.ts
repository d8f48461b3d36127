import type { DeadLetter, DeadLetterWriter } from '../../../src/deadletter/DeadLetter.js';
import type { DeadLetterSink } from '../../../src/deadletter/DeadLetterSink.js';
import { TransientError } from '../../../src/errors/index.js';
import type { HostClock } from './clock.js';
import { type FaultEnv, type FaultPlan } from './plan.js';

/**
 * Faults of a dead-letter sink's `write` (key: the writer's lease token):
 * - `failure`: nothing written, the write rejects with a 503 `TransientError`;
 * - `slow`: the letters land after `ms` (default 1 000);
 * - `lostReply`: the letters land, then the call rejects with a 408 `TransientError`.
 */
export type DeadLetterFaultKind = 'failure' | 'slow' | 'lostReply';

/** A fault plan of a dead-letter sink: rules for `write`. */
export type DeadLetterFaultPlan = FaultPlan<'write', DeadLetterFaultKind>;

/**
 * Wraps a dead-letter sink so its writes fail, slow down or lose their reply as `plan` says.
 *
 * @example
 * ```ts
 * const sink = faultyDeadLetterSink(new MemoryDeadLetterStore(), { write: [{ kind: 'failure', probability: 0.1 }] }, env);
 * ```
 */
export function faultyDeadLetterSink<T>(sink: DeadLetterSink<T>, plan: DeadLetterFaultPlan, env: FaultEnv): DeadLetterSink<T> {
  return {
    get description() {
      return sink.description;
    },
    async write(letters: readonly DeadLetter<T>[], writer: DeadLetterWriter): Promise<void> {
      const rule = env.pick('deadLetter', plan, 'write', writer.leaseToken);
      switch (rule?.kind) {
        case undefined:
          return sink.write(letters, writer);
        case 'failure':
          throw new TransientError('dead-letter store unavailable (injected)', { statusCode: 503 });
        case 'slow':
          await env.delay(rule.ms ?? 1_000);
          return sink.write(letters, writer);
        case 'lostReply':
          await sink.write(letters, writer);
          throw new TransientError('dead-letter store reply lost (injected)', { statusCode: 408 });
      }
    },
  };
}

/** The dead-letter sink as one host sees it (see {@link HostClock.gate}). */
export function gateDeadLetterSink<T>(sink: DeadLetterSink<T>, host: HostClock): DeadLetterSink<T> {
  return {
    get description() {
      return sink.description;
    },
    write: (letters, writer) => host.gate(() => sink.write(letters, writer)),
  };
}
