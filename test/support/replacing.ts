import type { Lease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';

/**
 * `store` with its `replace` going through `replace` (given the lease and the store's own replace), every
 * other call passed straight on: for tests that race, slow down or fail lease writes.
 */
export function withReplace(store: LeaseStore, replace: (lease: Lease, inner: (lease: Lease) => Promise<Lease>) => Promise<Lease>): LeaseStore {
  const inner = (lease: Lease) => store.replace(lease);
  return {
    list: (prefix) => store.list(prefix),
    read: (id) => store.read(id),
    createIfAbsent: (lease) => store.createIfAbsent(lease),
    delete: (lease) => store.delete(lease),
    ...(store.tombstone ? { tombstone: (lease: Lease) => store.tombstone!(lease) } : {}),
    replace: (lease) => replace(lease, inner),
  };
}
