import type { Lease } from '../../../src/leases/Lease.js';
import type { LeaseStore } from '../../../src/leases/LeaseStore.js';
import type { ViewStore } from '../../../src/sinks/ViewStore.js';
import type { Source } from '../../../src/sources/Source.js';
import type { HostClock } from './clock.js';
import { forwardSource } from './forwardSource.js';

/**
 * The lease store as one host sees it: calls go out and replies come back only while the host runs
 * (see {@link HostClock.gate}); a dead host's calls hang for good.
 *
 * @example
 * ```ts
 * createChangeFeed({ ...options, scheduler: host, leases: gateLeaseStore(store, host) });
 * ```
 */
export function gateLeaseStore(store: LeaseStore, host: HostClock): LeaseStore {
  return {
    list: (prefix) => host.gate(() => store.list(prefix)),
    read: (id) => host.gate(() => store.read(id)),
    createIfAbsent: (lease) => host.gate(() => store.createIfAbsent(lease)),
    replace: (lease) => host.gate(() => store.replace(lease)),
    delete: (lease) => host.gate(() => store.delete(lease)),
    ...(store.tombstone ? { tombstone: (lease: Lease) => host.gate(() => store.tombstone!(lease)) } : {}),
  };
}

/** The source as one host sees it (see {@link gateLeaseStore}). */
export function gateSource<T>(source: Source<T>, host: HostClock): Source<T> {
  return forwardSource(source, {
    positionAt: (positionAt) => (p, at, signal) => host.gate(() => positionAt(p, at, signal)),
    currentTime: (currentTime) => (signal) => host.gate(() => currentTime(signal)),
    checkReachable: (checkReachable) => (signal) => host.gate(() => checkReachable(signal)),
    listPartitions: (listPartitions) => (signal) => host.gate(() => listPartitions(signal)),
    read: (read) => (request) => host.gate(() => read(request)),
  });
}

/** The view store as one host sees it (see {@link gateLeaseStore}). */
export function gateViewStore<R>(view: ViewStore<R>, host: HostClock): ViewStore<R> {
  return {
    get description() {
      return view.description;
    },
    write: (write) => host.gate(() => view.write(write)),
    get: (key) => host.gate(() => view.get(key)),
    rows: () => host.gate(() => view.rows()),
    positions: () => host.gate(() => view.positions()),
    pruneTombstones: (before) => host.gate(() => view.pruneTombstones(before)),
    clearPositions: () => host.gate(() => view.clearPositions()),
    close: () => host.gate(() => view.close()),
  };
}
