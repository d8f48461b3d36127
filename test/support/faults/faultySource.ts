import type { Partition } from '../../../src/core/Partition.js';
import { TransientError } from '../../../src/errors/index.js';
import type { Source } from '../../../src/sources/Source.js';
import { type FaultEnv, type FaultPlan, hang } from './plan.js';
import { forwardSource } from './forwardSource.js';

/**
 * Faults of a source:
 * - `transient`: fails with a 503 `TransientError`;
 * - `throttle`: fails with a 429 `TransientError` carrying `retryAfterMs` (rule's, default 500);
 * - `slow`: answers after `ms` (abortable through the read's signal);
 * - `hang`: never answers until the read's signal aborts;
 * - `split`: splits the partition read (through the inner source's own `split`), then reads, so the read
 *   sees the partition gone, as right after a split in Cosmos DB.
 */
export type SourceFaultKind = 'transient' | 'throttle' | 'slow' | 'hang' | 'split';

/**
 * A fault plan of a source: rules for `read` and `positionAt` (key: partition id), `listPartitions` and
 * `currentTime`.
 */
export type SourceFaultPlan = FaultPlan<'read' | 'listPartitions' | 'positionAt' | 'currentTime', SourceFaultKind>;

/** A source that can split a partition (as `MemorySource` does). */
interface Splittable {
  split(partitionId: string): readonly Partition[];
  partitions(): readonly Partition[];
}

function canSplit(source: unknown): source is Splittable {
  return typeof (source as Partial<Splittable>).split === 'function' && typeof (source as Partial<Splittable>).partitions === 'function';
}

/**
 * Wraps a source so its calls fail, slow down, hang or split as `plan` says, deterministically from `env`.
 *
 * @example
 * ```ts
 * const env = new FaultEnv({ seed: 7, scheduler: clock });
 * const source = faultySource(new MemorySource({ partitions: 4 }), { read: [{ kind: 'throttle', probability: 0.2, retryAfterMs: 100 }] }, env);
 * ```
 */
export function faultySource<T>(source: Source<T>, plan: SourceFaultPlan, env: FaultEnv): Source<T> {
  const strike = async (op: 'read' | 'listPartitions' | 'positionAt' | 'currentTime', key: string | undefined, signal: AbortSignal | undefined) => {
    const rule = env.pick('source', plan, op, key);
    if (!rule) return;
    switch (rule.kind) {
      case 'transient':
        throw new TransientError('service unavailable (injected)', { statusCode: 503 });
      case 'throttle':
        throw new TransientError('request rate is too large (injected)', { statusCode: 429, retryAfterMs: rule.retryAfterMs ?? 500 });
      case 'slow':
        return env.delay(rule.ms ?? 1_000, signal);
      case 'hang':
        return hang(signal);
      case 'split':
        // Only a live partition splits; a gone one is reported gone by the inner read anyway.
        if (key !== undefined && canSplit(source) && source.partitions().some((p) => p.id === key)) source.split(key);
        return;
    }
  };
  return forwardSource(source, {
    positionAt: (positionAt) => async (p, at, signal) => {
      await strike('positionAt', p.id, signal);
      return positionAt(p, at, signal);
    },
    currentTime: (currentTime) => async (signal) => {
      await strike('currentTime', undefined, signal);
      return currentTime(signal);
    },
    listPartitions: (listPartitions) => async (signal) => {
      await strike('listPartitions', undefined, signal);
      return listPartitions(signal);
    },
    read: (read) => async (request) => {
      await strike('read', request.partition.id, request.signal);
      return read(request);
    },
  });
}
