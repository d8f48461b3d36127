import type { Lease, NewLease } from '../../../src/leases/Lease.js';
import { LeaseConflictError } from '../../../src/errors/LeaseConflictError.js';
import type { LeaseListing, LeaseStore } from '../../../src/leases/LeaseStore.js';
import { TransientError } from '../../../src/errors/index.js';
import { type FaultEnv, type FaultPlan, hang } from './plan.js';

/**
 * Faults of a lease store:
 * - `transient`: fails with a 503 `TransientError`, nothing written;
 * - `conflict`: fails with `LeaseConflictError('changed')` though nothing changed (a spurious 412), nothing written;
 * - `timeout`: nothing written, fails with a 408 `TransientError` after `ms` (default 1 000);
 * - `hang`: never answers (a request without a timeout);
 * - `slow`: answers after `ms`;
 * - `lostReply`: the write lands, then the call fails with a 408 `TransientError` (the reply was lost).
 */
export type LeaseFaultKind = 'transient' | 'conflict' | 'timeout' | 'hang' | 'slow' | 'lostReply';

/** A fault plan of a lease store: rules per method (key: lease id; none for `list`). */
export type LeaseFaultPlan = FaultPlan<keyof LeaseStore, LeaseFaultKind>;

/**
 * Wraps a lease store so its calls fail, time out, hang, slow down or lose their reply as `plan` says.
 *
 * @example
 * ```ts
 * const store = faultyLeaseStore(new MemoryLeaseStore(), { replace: [{ kind: 'lostReply', count: 1 }] }, env);
 * ```
 */
export function faultyLeaseStore(store: LeaseStore, plan: LeaseFaultPlan, env: FaultEnv): LeaseStore {
  const call = async <R>(op: keyof LeaseStore, key: string | undefined, work: () => Promise<R>): Promise<R> => {
    const rule = env.pick('lease', plan, op, key);
    if (!rule) return work();
    switch (rule.kind) {
      case 'transient':
        throw new TransientError(`lease store unavailable (injected, ${op})`, { statusCode: 503 });
      case 'conflict':
        if (op === 'list' || op === 'read') throw new TransientError(`lease store unavailable (injected, ${op})`, { statusCode: 503 });
        throw new LeaseConflictError(key ?? '', 'changed');
      case 'timeout':
        await env.delay(rule.ms ?? 1_000);
        throw new TransientError(`lease store request timed out (injected, ${op})`, { statusCode: 408 });
      case 'hang':
        return hang();
      case 'slow':
        await env.delay(rule.ms ?? 1_000);
        return work();
      case 'lostReply':
        await work();
        throw new TransientError(`lease store reply lost (injected, ${op})`, { statusCode: 408 });
    }
  };
  return {
    list: (prefix: string): Promise<LeaseListing> => call('list', undefined, () => store.list(prefix)),
    read: (id: string): Promise<Lease | undefined> => call('read', id, () => store.read(id)),
    createIfAbsent: (lease: NewLease): Promise<Lease | undefined> => call('createIfAbsent', lease.id, () => store.createIfAbsent(lease)),
    replace: (lease: Lease): Promise<Lease> => call('replace', lease.id, () => store.replace(lease)),
    delete: (lease: Lease): Promise<void> => call('delete', lease.id, () => store.delete(lease)),
    // A delete that leaves a tombstone meets the faults of a delete.
    ...(store.tombstone ? { tombstone: (lease: Lease): Promise<void> => call('delete', lease.id, () => store.tombstone!(lease)) } : {}),
  };
}
