import { MemoryLeaseStore, MemoryViewStore } from '../../src/index.js';
import type { Lease } from '../../src/leases/Lease.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { ViewStore, ViewWrite } from '../../src/sinks/ViewStore.js';
import { PREFIX } from './config.js';
import type { Sim } from './context.js';
import { lsnOf, type World } from './world.js';

/** The row a simulated view keeps per document. */
export interface Row {
  readonly v: number;
}

/** Who issues a view write, as {@link ObservedStores.markDeposed} needs to know. */
export interface Writer {
  readonly name: string;
  /** A host that was ever paused may write late by design (the fence, not the host, must stop it). */
  readonly everPaused: boolean;
}

/**
 * The shared lease and view stores, wrapped innermost (they see only what the store accepted) by observers
 * that check the store invariants: `deposed-lease-write-accepted`, `checkpoint-moved-backwards`,
 * `deposed-view-write-accepted`, `write-after-takeover-accepted`.
 */
export class ObservedStores {
  readonly leaseMemory = new MemoryLeaseStore();
  readonly viewMemory = new MemoryViewStore<Row>();
  readonly leases: LeaseStore;
  readonly view: ViewStore<Row>;
  readonly #lastContinuation = new Map<string, number>();
  readonly #viewEpochs = new Map<string, number>();
  readonly #deposedWrites = new WeakMap<ViewWrite<unknown>, string>();

  constructor(sim: Sim, world: World) {
    const violate = sim.violations.report.bind(sim.violations);
    const leaseMemory = this.leaseMemory;
    const lastContinuation = this.#lastContinuation;
    this.leases = {
      list: (prefix) => leaseMemory.list(prefix),
      read: (id) => leaseMemory.read(id),
      createIfAbsent: async (lease) => {
        const created = await leaseMemory.createIfAbsent(lease);
        if (created) {
          const parent = world.parentOf.get(created.leaseToken);
          const parentLsn = parent !== undefined ? lastContinuation.get(parent) : undefined;
          if (parentLsn !== undefined && lsnOf(created.continuation) < parentLsn) {
            violate('checkpoint-moved-backwards', `child lease ${created.leaseToken} created at ${created.continuation} below parent ${parent}'s checkpoint lsn ${parentLsn}`);
          }
          lastContinuation.set(created.leaseToken, lsnOf(created.continuation));
        }
        return created;
      },
      replace: async (lease) => {
        const before = this.lease(lease.id);
        const after = await leaseMemory.replace(lease);
        if (before && after.epoch < before.epoch) {
          violate('deposed-lease-write-accepted', `lease ${after.leaseToken}: epoch ${after.epoch} written over ${before.epoch} by ${after.owner}`);
        }
        if (before && lsnOf(after.continuation) < lsnOf(before.continuation)) {
          violate('checkpoint-moved-backwards', `lease ${after.leaseToken}: ${before.continuation} → ${after.continuation} (owner ${after.owner}, epoch ${after.epoch})`);
        }
        lastContinuation.set(after.leaseToken, Math.max(lastContinuation.get(after.leaseToken) ?? -1, lsnOf(after.continuation)));
        return after;
      },
      delete: (lease) => leaseMemory.delete(lease),
    };

    const viewMemory = this.viewMemory;
    const viewEpochs = this.#viewEpochs;
    this.view = {
      description: viewMemory.description,
      write: async (w) => {
        const result = await viewMemory.write(w);
        for (const commit of w.partitions) {
          const highest = viewEpochs.get(commit.partition) ?? 0;
          if (commit.epoch < highest) {
            violate('deposed-view-write-accepted', `partition ${commit.partition}: write at epoch ${commit.epoch} accepted after epoch ${highest}`);
          }
          viewEpochs.set(commit.partition, Math.max(highest, commit.epoch));
        }
        const deposed = this.#deposedWrites.get(w as ViewWrite<unknown>);
        if (deposed) violate('write-after-takeover-accepted', deposed);
        return result;
      },
      get: (key) => viewMemory.get(key),
      rows: () => viewMemory.rows(),
      positions: () => viewMemory.positions(),
      pruneTombstones: (before) => viewMemory.pruneTombstones(before),
      clearPositions: () => viewMemory.clearPositions(),
      close: () => viewMemory.close(),
    };
  }

  /** The stored lease with this id, read synchronously. */
  lease(id: string): Lease | undefined {
    return this.leaseMemory.snapshot().find((l) => l.id === id);
  }

  /**
   * Wraps one host's view (outside the faults): marks a write issued by a never-paused host after another host
   * took the lease at a higher epoch, so that the observer reports it if the view accepts it.
   */
  markDeposed(view: ViewStore<Row>, writer: () => Writer): ViewStore<Row> {
    return {
      ...view,
      description: view.description,
      write: (w) => {
        const h = writer();
        if (!h.everPaused) {
          for (const commit of w.partitions) {
            const lease = this.lease(PREFIX + commit.partition);
            if (lease && lease.epoch > commit.epoch && lease.owner !== h.name) {
              this.#deposedWrites.set(w as ViewWrite<unknown>, `${h.name} wrote partition ${commit.partition} at epoch ${commit.epoch} after ${lease.owner} took it at epoch ${lease.epoch}`);
            }
          }
        }
        return view.write(w);
      },
    };
  }

  /** The view's first difference from the source's latest documents, if any. */
  async viewDiffers(world: World): Promise<string | undefined> {
    const rows = new Map((await this.viewMemory.rows()).map((r) => [r.key, r.row.v]));
    for (const [id, doc] of world.latest) {
      const row = rows.get(id);
      if (doc === undefined ? row !== undefined : row !== doc.v) return `${id}: view has ${String(row)}, source has ${doc === undefined ? 'deleted' : doc.v}`;
    }
    for (const key of rows.keys()) if (!world.latest.has(key)) return `${key}: in the view, never written`;
    return undefined;
  }
}
