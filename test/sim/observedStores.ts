import { MemoryDeadLetterStore, MemoryLeaseStore, MemoryViewStore } from '../../src/index.js';
import type { DeadLetterSink } from '../../src/deadletter/DeadLetterSink.js';
import type { Lease, NewLease } from '../../src/leases/Lease.js';
import { infoId } from '../../src/leases/protocol/documents.js';
import type { LeaseStore } from '../../src/leases/LeaseStore.js';
import type { ViewStore, ViewWrite } from '../../src/sinks/ViewStore.js';
import { PARENT_LEASE } from '../../src/leases/protocol/signals.js';
import { HANDED_OVER_LEASES } from '../../src/leases/coordinator/bootstrapLock.js';
import { laggingLeaseStore } from '../support/faults/index.js';
import { leaseNaming, TIMINGS } from './config.js';
import type { Sim } from './context.js';
import { type Doc, lsnOf, type World } from './world.js';

/** Most lease-store calls one host may make within one virtual millisecond (see `lease-request-spin`). */
export const SPIN_CALLS = 200;

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
  /** A second view whose rows are keyed by a group of documents, so several partitions write one key. */
  readonly groupMemory = new MemoryViewStore<Row>();
  /** Where poison changes go (it fences by key range, as every dead-letter store does). */
  readonly deadLetterMemory = new MemoryDeadLetterStore<Doc>();
  readonly deadLetters: DeadLetterSink<Doc>;
  /** The lease store as host `name` sees it (under the `late` fault set, reads lag other hosts' writes). */
  readonly leasesFor: (name: string) => LeaseStore;
  readonly leases: LeaseStore;
  readonly view: ViewStore<Row>;
  readonly groupView: ViewStore<Row>;
  readonly #lastContinuation = new Map<string, number>();
  /**
   * Lease tokens a reset deleted, until the token's lease is created again: that create, when it records no
   * creator (a bootstrap's or a gap repair's, not a replacement's child), starts over from `startFrom`.
   */
  readonly #resetTokens = new Set<string>();
  readonly #deposedWrites = new WeakMap<ViewWrite<unknown>, string>();

  /** Which host incarnation issued a lease write (see {@link ObservedStores.tagWrites}). */
  readonly #issuedBy = new WeakMap<object, { readonly name: string; readonly stopped: boolean }>();
  /** When the run that issued a lease write started (virtual ms), as it was when it sent it. */
  readonly #issuedByRunOf = new WeakMap<object, number>();

  readonly #leaseId: (token: string) => string;
  /** Lease writes and deletes issued by an admin operation (see {@link ObservedStores.admin}). */
  readonly #adminWrites = new WeakSet<object>();
  /** Epochs an admin operation fenced, per lease token, and when. */
  readonly #adminFences = new Map<string, { readonly epoch: number; readonly atMs: number }[]>();
  /** The highest epoch ever stored per lease document (deletes included), for `epoch-went-back`. */
  readonly #maxEpoch = new Map<string, number>();
  /**
   * `leaseScheme: 'dotnet'`: lease ids a create brought back below an epoch they had (it landed late, after a
   * plain delete), with that epoch. No host may own such a lease at or below it (`epoch-went-back`).
   */
  readonly #buried = new Map<string, number>();
  /** The lease store as admin operations see it (the current one: no lag, no faults). */
  readonly admin: LeaseStore;
  readonly #sim: Sim;
  readonly #world: World;

  constructor(sim: Sim, world: World) {
    this.#leaseId = leaseNaming(sim.config).id;
    this.#sim = sim;
    this.#world = world;
    world.storedLease = (token) => this.leaseOf(token);
    const violate = sim.violations.report.bind(sim.violations);
    this.leases = this.observeLeases(this.leaseMemory);
    if (sim.faults.has('late') && !world.sdk) {
      const lagMs = 50 + Math.floor(sim.randomFor('late')() * 350);
      const lagging = laggingLeaseStore(this.leases, sim.clock, lagMs);
      this.leasesFor = (name) => lagging.session(name);
      // One lag per run: counted, with its total and (across seeds, in the run's summary) its largest.
      sim.tally('lease.readLag');
      sim.tally('lease.readLagMs.total', lagMs);
      sim.tally('lease.readLagMs.max', lagMs);
    } else {
      this.leasesFor = () => this.leases;
    }
    const mark = <L extends object>(lease: L): L => {
      this.#adminWrites.add(lease);
      return lease;
    };
    // The operator is a session of its own: under `late`, hosts see its writes once replicated, and it reads the
    // hosts' writes late while the faults are on. (The SDK mode runs no admin operations: see the README's "SDK
    // mode".) Once they are off (`AdminOps.finish` runs a failed reset again, as quiescence would), its reads are
    // current: read ~240 ms late, a live lease renewed every 300 ms is stale at almost every instant, so each
    // forced delete met a conflict, re-read the same stale version and failed again, and the reset never
    // completed (seed 186: the leases it had deleted left their ranges unread, a change lost).
    const operator = this.leasesFor('admin');
    const reader = (): LeaseStore => (sim.env.enabled ? operator : this.leases);
    this.admin = {
      list: (prefix) => reader().list(prefix),
      read: (id) => reader().read(id),
      createIfAbsent: (lease) => operator.createIfAbsent(lease),
      replace: (lease) => operator.replace(mark(lease)),
      delete: (lease) => operator.delete(mark(lease)),
      tombstone: (lease) => (operator.tombstone ? operator.tombstone(mark(lease)) : operator.delete(mark(lease))),
    };

    this.view = this.#observeView(this.viewMemory, 'view', sim, world);
    this.deadLetters = {
      description: this.deadLetterMemory.description,
      write: async (letters, writer) => {
        await this.deadLetterMemory.write(letters, writer);
        // A poison change takes its LSN group with it: the good changes of its LSN in the same write.
        const poisonGroups = new Set(letters.filter((l) => world.poisoned.has(`${l.documentId}@${l.lsn}`)).map((l) => `${l.leaseToken}@${l.lsn}`));
        for (const letter of letters) {
          const key = `${letter.documentId}@${letter.lsn}`;
          if (!world.poisoned.has(key) && poisonGroups.has(`${letter.leaseToken}@${letter.lsn}`)) world.takenWithPoison.add(key);
          else if (!world.poisoned.has(key)) {
            violate('good-change-dead-lettered', `${key} (partition ${letter.leaseToken}, epoch ${writer.epoch}) dead-lettered after ${letter.attempts} attempts: ${letter.error.name}: ${letter.error.message}`, `letter:${key}`);
          }
        }
      },
    };
    this.groupView = this.#observeView(this.groupMemory, 'group view', sim, world);
  }

  /**
   * Wraps a lease store (innermost: the observer sees only what the store accepted) with the lease invariants:
   * `write-after-stop`, `deposed-lease-write-accepted`, `checkpoint-moved-backwards`. The shared
   * `MemoryLeaseStore`, or in the SDK mode each host's `CosmosLeaseStore`.
   */
  observeLeases(inner: LeaseStore): LeaseStore {
    const sim = this.#sim;
    const world = this.#world;
    const violate = sim.violations.report.bind(sim.violations);
    const leaseMemory = inner;
    const lastContinuation = this.#lastContinuation;
    const deleted = (lease: Lease): void => {
      if (this.#adminWrites.has(lease)) {
        // A reset: positions start over, so later leases (of any token, split children of gone parents too)
        // start from the configured start.
        this.#fenced(lease.leaseToken, lease.epoch, sim.clock.now());
        lastContinuation.clear();
        this.#resetTokens.add(lease.leaseToken);
      }
    };
    return {
      list: (prefix) => leaseMemory.list(prefix),
      read: (id) => leaseMemory.read(id),
      createIfAbsent: async (lease) => {
        const created = await leaseMemory.createIfAbsent(lease);
        if (created) this.#checkStopped(lease, created, 'created', violate);
        // Refused though no lease has the id: a tombstone kept an epoch above this create's (it landed late).
        if (!created && this.lease(lease.id) === undefined) sim.tally('lease.createRefused');
        if (created && created.feedRange && world.registerToken(created.leaseToken, created.feedRange, created.epoch, created.properties[PARENT_LEASE])) sim.tally('lease.epkCreated');
        if (created?.feedRange !== undefined) {
          const highest = this.#maxEpoch.get(created.id);
          if (highest !== undefined && created.epoch < highest) {
            // In the .NET scheme a delete is plain and a late create cannot be refused: what is promised there
            // is that no host owns the lease at or below an epoch it had (checked at each write below). In the
            // rxfeed scheme a tombstone refuses the create itself.
            if (sim.config.leaseScheme === 'dotnet') {
              this.#buried.set(created.id, highest);
              sim.tally('lease.lateCreate');
            } else {
              violate('epoch-went-back', `lease ${created.id} created at epoch ${created.epoch}, below ${highest}, the highest it had before (stores that fence by epoch would refuse its writes)`);
            }
          } else {
            this.#buried.delete(created.id);
          }
          this.#maxEpoch.set(created.id, Math.max(highest ?? 0, created.epoch));
        }
        if (created) {
          // A split child continues its parent's LSNs; a merged child starts at the lowest of its parents'. A lease
          // a reset deleted, created again by a bootstrap or a gap repair (no creator recorded) once no parent's
          // lease is left, starts over from `startFrom` as the reset promises, whatever checkpoint a parent wrote
          // since: a reset that failed part way deleted a child, and the parent's owner finished replacing the
          // parent after the reset (its checkpoint recorded again) and deleted it (seed 1645). A parent still
          // stored keeps the check: its range is read, and a lease created beside it from the start is a bug.
          const parentsOf = world.parentsOf.get(created.leaseToken) ?? [];
          const startsOver =
            this.#resetTokens.delete(created.leaseToken) &&
            created.properties[PARENT_LEASE] === undefined &&
            parentsOf.every((p) => this.leaseOf(p) === undefined);
          const parents = startsOver ? [] : parentsOf;
          const known = parents.filter((p) => lastContinuation.has(p));
          const parentLsn = known.length === parents.length && parents.length > 0 ? Math.min(...known.map((p) => lastContinuation.get(p)!)) : undefined;
          if (parentLsn !== undefined && lsnOf(created.continuation) < parentLsn) {
            violate('checkpoint-moved-backwards', `child lease ${created.leaseToken} created at ${created.continuation} below parent ${parents.join('+')}'s checkpoint lsn ${parentLsn}`);
          }
          // No parent had a lease: a bootstrap made it, pinned at the start of the run that sent it.
          const runStartedAt = this.#issuedByRunOf.get(lease);
          if (known.length === 0 && runStartedAt !== undefined && world.startsNow(created.leaseToken)) {
            world.startedNowAt.set(created.leaseToken, { atMs: runStartedAt, range: created.feedRange });
          }
          lastContinuation.set(created.leaseToken, lsnOf(created.continuation));
        }
        return created;
      },
      replace: async (lease) => {
        const before = this.lease(lease.id);
        const after = await leaseMemory.replace(lease);
        this.#maxEpoch.set(after.id, Math.max(this.#maxEpoch.get(after.id) ?? 0, after.epoch));
        // A failed bootstrap's lock handed over at a stop, and taken over by the next host to bootstrap
        // (docs/lease-protocol.md, Bootstrap): the invariants that judge it are those of the leases it creates.
        if (after.properties[HANDED_OVER_LEASES] !== undefined) sim.tally('bootstrap.lockHandedOver');
        else if (before?.properties[HANDED_OVER_LEASES] !== undefined && after.owner !== null) sim.tally('bootstrap.lockTakenOver');
        if (this.#adminWrites.has(lease)) {
          // A rewind moves the checkpoint where it was told to (back, to re-deliver); a release keeps it.
          if (before) this.#fenced(before.leaseToken, before.epoch, sim.clock.now());
          // A rewind to a time past a lagging lease's checkpoint moves it forward, as `rewindLeases` documents
          // (the lease's new checkpoint is that time's position): the operator skipped what lay in between.
          if (before) world.skippedByOperator(before.leaseToken, before.feedRange, lsnOf(before.continuation), lsnOf(after.continuation));
          lastContinuation.set(after.leaseToken, lsnOf(after.continuation));
          return after;
        }
        this.#checkStopped(lease, after, 'written', violate);
        const buried = this.#buried.get(after.id);
        if (buried !== undefined && after.owner !== null && after.epoch <= buried) {
          violate('epoch-went-back', `lease ${after.id} owned by ${after.owner} at epoch ${after.epoch}, at or below ${buried}, an epoch it had before it was deleted (a create landed late): two ownerships of its range share an epoch`);
        }
        if (before && after.epoch < before.epoch) {
          violate('deposed-lease-write-accepted', `lease ${after.leaseToken}: epoch ${after.epoch} written over ${before.epoch} by ${after.owner}`);
        }
        if (before && lsnOf(after.continuation) < lsnOf(before.continuation)) {
          violate('checkpoint-moved-backwards', `lease ${after.leaseToken}: ${before.continuation} → ${after.continuation} (owner ${after.owner}, epoch ${after.epoch})`);
        }
        lastContinuation.set(after.leaseToken, Math.max(lastContinuation.get(after.leaseToken) ?? -1, lsnOf(after.continuation)));
        return after;
      },
      tombstone: async (lease) => {
        await (leaseMemory.tombstone ? leaseMemory.tombstone(lease) : leaseMemory.delete(lease));
        deleted(lease);
      },
      delete: async (lease) => {
        await leaseMemory.delete(lease);
        deleted(lease);
      },
    };
  }

  /** Whether a document `id` is stored, markers too (the SDK mode's {@link leaseSnapshot} leaves out documents without a token). */
  hasLeaseDocument(id: string): boolean {
    return this.#world.sdk ? this.#world.sdk.leaseDocumentIds().includes(id) : this.leaseMemory.snapshot().some((l) => l.id === id);
  }

  /** The stored leases, read synchronously (in the SDK mode, from the emulator's lease container). */
  leaseSnapshot(): readonly Lease[] {
    return this.#world.sdk ? this.#world.sdk.leaseSnapshot() : this.leaseMemory.snapshot();
  }

  /**
   * Wraps a view store with the fence invariants, checked on every write it accepted:
   * `deposed-view-write-accepted` (a partition's write at an epoch below one it wrote before, or a write of a
   * split or merge parent after one of its children wrote: the parent's range is fenced by its children's)
   * and `write-after-takeover-accepted` (see {@link ObservedStores.markDeposed}).
   */
  #observeView<R>(inner: ViewStore<R>, name: string, sim: Sim, world: World): ViewStore<R> {
    const violate = sim.violations.report.bind(sim.violations);
    const epochs = new Map<string, number>();
    // The highest epoch each incarnation of a token wrote at (a reused EPK token: see `World.registerToken`).
    const incarnations = new Map<string, { readonly token: string; readonly epoch: number }>();
    return {
      description: inner.description,
      write: async (w) => {
        const result = await inner.write(w);
        for (const commit of w.partitions) {
          const highest = epochs.get(commit.partition) ?? 0;
          if (commit.epoch < highest) {
            violate('deposed-view-write-accepted', `${name}, partition ${commit.partition}: write at epoch ${commit.epoch} accepted after epoch ${highest}`);
          }
          for (const { token: other, epoch } of incarnations.values()) {
            if (world.isAncestor(commit.partition, other, { ancestor: commit.epoch, partition: epoch })) {
              violate('deposed-view-write-accepted', `${name}: parent ${commit.partition}'s write at epoch ${commit.epoch} accepted after its child ${other} wrote at epoch ${epoch}`, `range:${name}:${commit.partition}:${other}`);
            }
          }
          epochs.set(commit.partition, Math.max(highest, commit.epoch));
          const incarnation = `${commit.partition}@${world.incarnation(commit.partition, commit.epoch)}`;
          incarnations.set(incarnation, { token: commit.partition, epoch: Math.max(incarnations.get(incarnation)?.epoch ?? 0, commit.epoch) });
        }
        const deposed = this.#deposedWrites.get(w as ViewWrite<unknown>);
        if (deposed) violate('write-after-takeover-accepted', `${name}: ${deposed}`);
        return result;
      },
      get: (key) => inner.get(key),
      rows: () => inner.rows(),
      positions: () => inner.positions(),
      pruneTombstones: (before) => inner.pruneTombstones(before),
      clearPositions: () => inner.clearPositions(),
      close: () => inner.close(),
    };
  }

  /**
   * Wraps one host's lease store (outside the faults) so that the observer knows which host issued a write,
   * and checks `lease-request-spin`: more than {@link SPIN_CALLS} lease-store calls from one host within one
   * virtual millisecond is a loop without a delay (virtual time would never move again: the simulation
   * reports it, then makes each further call of that instant wait 1 ms so the run can go on). Tallies the
   * bootstrap marker's creates that failed (`bootstrap.infoFailed`) and a host's own `.info` create that landed
   * after one of its own failed (`bootstrap.infoRetried`: the host tried again itself, docs/lease-protocol.md,
   * *Bootstrap*); `info-never-written` (quiescence) judges that `.info` is there in the end.
   */
  tagWrites(store: LeaseStore, host: () => { readonly name: string; readonly stopped: boolean; readonly runStartedAt: number }, sim: Sim): LeaseStore {
    const tag = <L extends object>(lease: L): L => {
      const writer = host();
      this.#issuedBy.set(lease, writer);
      this.#issuedByRunOf.set(lease, writer.runStartedAt);
      return lease;
    };
    let instant = Number.NaN;
    let calls = 0;
    let limit = SPIN_CALLS;
    const info = infoId(leaseNaming(sim.config).prefix);
    let infoFailed = false;
    const markInfo = async (lease: NewLease): Promise<Lease | undefined> => {
      try {
        const created = await store.createIfAbsent(tag(lease));
        if (created && infoFailed) sim.tally('bootstrap.infoRetried');
        return created;
      } catch (error) {
        infoFailed = true;
        sim.tally('bootstrap.infoFailed');
        throw error;
      }
    };
    const paced = async <R>(op: string, call: () => Promise<R>): Promise<R> => {
      const now = sim.clock.now();
      if (now !== instant) [instant, calls] = [now, 0];
      if (++calls > limit) {
        sim.violations.report('lease-request-spin', `${host().name} made more than ${SPIN_CALLS} lease-store calls (last: ${op}) within 1 virtual ms`, `spin:${host().name}`);
        limit = 10; // once it spun, pace it hard (50 ms) so that the run stays cheap
        await sim.env.delay(50);
      }
      return call();
    };
    return {
      list: (prefix) => paced('list', () => store.list(prefix)),
      read: (id) => paced('read', () => store.read(id)),
      createIfAbsent: (lease) => paced('createIfAbsent', () => (lease.id === info ? markInfo(lease) : store.createIfAbsent(tag(lease)))),
      replace: (lease) => paced('replace', () => store.replace(tag(lease))),
      delete: (lease) => paced('delete', () => store.delete(lease)),
      ...(store.tombstone ? { tombstone: (lease: Lease) => paced('tombstone', () => store.tombstone!(lease)) } : {}),
    };
  }

  #fenced(token: string, epoch: number, atMs: number): void {
    const fences = this.#adminFences.get(token) ?? [];
    fences.push({ epoch, atMs });
    this.#adminFences.set(token, fences);
  }

  /**
   * Whether a forced admin operation (release, rewind, reset) deposed `token`'s owner at `epoch` less than
   * one lease expiration ago: the deposed owner learns it at its next lease write and stops by its own
   * deadline at the latest, so until then it may still emit (and its view writes be accepted while the next
   * owner has written nothing yet). After that, the usual invariants hold again.
   */
  fencedByAdmin(token: string, epoch: number, now: number): boolean {
    return (this.#adminFences.get(token) ?? []).some((f) => f.epoch >= epoch && now - f.atMs <= TIMINGS.leaseExpirationMs);
  }

  /** `write-after-stop`: a lease document owned by the host that wrote it landed after its `stop()` resolved. */
  #checkStopped(written: object, lease: Lease, how: string, violate: (invariant: string, detail: string, once?: string) => void): void {
    const writer = this.#issuedBy.get(written);
    if (writer?.stopped && lease.owner === writer.name) {
      violate('write-after-stop', `${lease.id} ${how} owned by ${lease.owner} (epoch ${lease.epoch}) after its stop() resolved`, `stop:${lease.id}:${lease.owner}`);
    }
  }

  /** The stored lease of a lease token, read synchronously. */
  leaseOf(token: string): Lease | undefined {
    return this.lease(this.#leaseId(token));
  }

  /** The stored lease with this id, read synchronously. */
  lease(id: string): Lease | undefined {
    return this.leaseSnapshot().find((l) => l.id === id);
  }

  /**
   * Wraps one host's view (outside the faults): marks a write issued by a never-paused host after another host
   * took the lease at a higher epoch, so that the observer reports it if the view accepts it.
   */
  markDeposed<R>(view: ViewStore<R>, writer: () => Writer, sim: Sim): ViewStore<R> {
    return {
      ...view,
      description: view.description,
      write: (w) => {
        const h = writer();
        if (!h.everPaused) {
          for (const commit of w.partitions) {
            const lease = this.leaseOf(commit.partition);
            if (lease && lease.epoch > commit.epoch && lease.owner !== h.name && !this.fencedByAdmin(commit.partition, commit.epoch, sim.clock.now())) {
              this.#deposedWrites.set(w as ViewWrite<unknown>, `${h.name} wrote partition ${commit.partition} at epoch ${commit.epoch} after ${lease.owner} took it at epoch ${lease.epoch}`);
            }
          }
        }
        return view.write(w);
      },
    };
  }

  /**
   * `poison-not-contained`: a poison change that had to be processed is neither dead-lettered nor behind a
   * halted partition (it was skipped, or its partition is stuck without saying so).
   */
  async uncontainedPoison(world: World): Promise<string[]> {
    const letters = new Set((await this.deadLetterMemory.list({ limit: 1_000_000 })).map((l) => `${l.documentId}@${l.lsn}`));
    const must = world.mode === 'allVersionsAndDeletes' ? [...world.poisoned] : [...world.latestKey.values()].filter((k) => world.poisoned.has(k));
    return must.filter((k) => !letters.has(k) && !world.excused(k) && !world.isBeforeStart(k));
  }

  /** The view's first difference from the source's latest documents, if any. */
  async viewDiffers(world: World): Promise<string | undefined> {
    const rows = new Map((await this.viewMemory.rows()).map((r) => [r.key, r.row.v]));
    for (const [id, doc] of world.latest) {
      const key = world.latestKey.get(id)!;
      // Left out by design: dead-lettered, halted, or written before the processor started (not 'beginning').
      if (world.leftOut(key) || world.excused(key) || world.isBeforeStart(key)) continue;
      const row = rows.get(id);
      if (doc === undefined ? row !== undefined : row !== doc.v) return `${id}: view has ${String(row)}, source has ${doc === undefined ? 'deleted' : doc.v}`;
    }
    for (const key of rows.keys()) if (!world.latest.has(key)) return `${key}: in the view, never written`;
    return undefined;
  }
}
