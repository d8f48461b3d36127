import type { SchedulerLike } from 'rxjs';
import type { Lease } from '../../../src/leases/Lease.js';
import type { LeaseListing, LeaseStore } from '../../../src/leases/LeaseStore.js';

interface Version {
  readonly atMs: number;
  readonly lease: Lease | undefined;
  /** Who wrote it: a session reads its own writes at once (Cosmos DB's default, session consistency). */
  readonly writer: string;
}

/**
 * A lease store whose listings and reads lag other sessions' writes by `lagMs` (session consistency: a
 * session reads its own writes at once, others' once replicated): `list` and `read` of session `s` answer as
 * the store stood `lagMs` ago plus `s`'s own later writes; writes are checked against the current state, as
 * at the primary (a write based on a stale read fails with a conflict, as in Cosmos DB). `session(name)`
 * gives one host's view.
 *
 * @example
 * ```ts
 * const lagging = laggingLeaseStore(new MemoryLeaseStore(), clock, 200);
 * const forHostA = lagging.session('a');
 * ```
 */
export function laggingLeaseStore(store: LeaseStore, clock: SchedulerLike, lagMs: number): { session(name: string): LeaseStore } {
  const history = new Map<string, Version[]>();
  const record = (id: string, lease: Lease | undefined, writer: string) => {
    const now = clock.now();
    const versions = history.get(id) ?? [];
    versions.push({ atMs: now, lease, writer });
    // Keep the newest version older than the lag (what a lagging read sees) and every later one.
    const cutoff = now - lagMs;
    let firstVisible = 0;
    for (let i = 0; i < versions.length; i++) if (versions[i]!.atMs <= cutoff) firstVisible = i;
    history.set(id, versions.slice(firstVisible));
  };
  const asOf = (id: string, reader: string): Lease | undefined => {
    const cutoff = clock.now() - lagMs;
    let seen: Lease | undefined;
    for (const v of history.get(id) ?? []) if (v.atMs <= cutoff || v.writer === reader) seen = v.lease;
    return seen;
  };
  const session = (name: string): LeaseStore => ({
    async list(prefix: string): Promise<LeaseListing> {
      const current = await store.list(prefix); // the current listing, for its corrupt documents
      const leases = [...history.keys()].filter((id) => id.startsWith(prefix)).map((id) => asOf(id, name)).filter((l): l is Lease => l !== undefined);
      leases.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      return { ...current, leases };
    },
    read: async (id) => asOf(id, name),
    async createIfAbsent(lease) {
      const created = await store.createIfAbsent(lease);
      if (created) record(created.id, created, name);
      return created;
    },
    async replace(lease) {
      const replaced = await store.replace(lease);
      record(replaced.id, replaced, name);
      return replaced;
    },
    async delete(lease) {
      await store.delete(lease);
      record(lease.id, undefined, name);
    },
    ...(store.tombstone
      ? {
          async tombstone(lease: Lease) {
            await store.tombstone!(lease);
            record(lease.id, undefined, name);
          },
        }
      : {}),
  });
  return { session };
}
