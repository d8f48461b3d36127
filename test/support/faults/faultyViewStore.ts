import type { ViewStore, ViewWrite, ViewWriteOptions, ViewWriteResult } from '../../../src/sinks/ViewStore.js';
import { type FaultEnv, type FaultPlan } from './plan.js';

/**
 * Faults of a view store's `write` (key: the write's partitions, comma-separated):
 * - `failure`: nothing written, the write rejects with an `Error`;
 * - `slow`: the write lands after `ms` (default 1 000), unless the write's `signal` aborts first (then nothing is
 *   written and it rejects with the signal's reason, as a store that cancels a transaction in flight does);
 * - `lostReply`: the write lands, then the call rejects (the reply was lost);
 * - `unavailable`: nothing written, the write rejects as a database that is down does (`ECONNREFUSED`);
 * - `rejected`: nothing written, the write rejects in a way no wait can fix (SQLSTATE `42P01`, a missing table).
 */
export type ViewFaultKind = 'failure' | 'slow' | 'lostReply' | 'unavailable' | 'rejected';

/** A fault plan of a view store: rules for `write`. */
export type ViewFaultPlan = FaultPlan<'write', ViewFaultKind>;

/**
 * Wraps a view store so its writes fail, slow down or lose their reply as `plan` says; reads pass through.
 *
 * @example
 * ```ts
 * const view = faultyViewStore(new MemoryViewStore(), { write: [{ kind: 'failure', probability: 0.05 }] }, env);
 * ```
 */
export function faultyViewStore<R>(view: ViewStore<R>, plan: ViewFaultPlan, env: FaultEnv): ViewStore<R> {
  return {
    get description() {
      return view.description;
    },
    async write(write: ViewWrite<R>, options?: ViewWriteOptions): Promise<ViewWriteResult> {
      const rule = env.pick('view', plan, 'write', write.partitions.map((p) => p.partition).join(','));
      switch (rule?.kind) {
        case undefined:
          return view.write(write, options);
        case 'failure':
          throw new Error(`view write failed (injected)`);
        case 'slow':
          await env.delay(rule.ms ?? 1_000, options?.signal);
          return view.write(write, options);
        case 'lostReply':
          await view.write(write, options);
          throw new Error('view write reply lost (injected)');
        case 'unavailable':
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432 (injected)'), { code: 'ECONNREFUSED' });
        case 'rejected':
          throw Object.assign(new Error('relation "view" does not exist (injected)'), { code: '42P01' });
      }
    },
    get: (key) => view.get(key),
    rows: () => view.rows(),
    positions: () => view.positions(),
    pruneTombstones: (before) => view.pruneTombstones(before),
    clearPositions: () => view.clearPositions(),
    close: () => view.close(),
  };
}
