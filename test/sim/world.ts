import { type FeedMode, type FeedRange, type Partition, rangesOverlap, type StartFrom } from '../../src/core/Partition.js';
import { MemorySource } from '../../src/index.js';
import type { Source } from '../../src/sources/Source.js';
import { type ListingHistory, opaquePositions, withOpaquePositions } from '../support/faults/index.js';
import type { Sim } from './context.js';
import type { SdkWorld } from './sdkWorld.js';

/** A simulated document: `v` grows with every write anywhere, so a newer version always has a higher `v`. */
export interface Doc {
  readonly id: string;
  readonly v: number;
  /** A change no handler can process (the `poison` fault set): it must be dead-lettered or halt its partition. */
  readonly poison?: true;
}

/**
 * Reads an LSN out of a `mem:<lsn>` position, an opaque one (the `--positions opaque` variant), or a Cosmos DB
 * etag (`"42"`) in the SDK mode; -1 for none.
 */
export function lsnOf(position: string | null | undefined): number {
  if (position === null || position === undefined) return -1;
  const plain = position.startsWith('mem:') ? position : safeDecode(position);
  const n = Number(plain.replace(/^mem:/, '').replace(/"/g, ''));
  return Number.isFinite(n) ? n : -1;
}

function safeDecode(position: string): string {
  try {
    return opaquePositions.decode(position);
  } catch {
    return position;
  }
}

/** The LSN of a change written as `id@lsn`. */
function lsnOfKey(key: string): number {
  return Number(key.slice(key.lastIndexOf('@') + 1));
}

/** Whether an effective partition key (hex) lies in a feed range. */
function inRange(epk: string, range: FeedRange): boolean {
  return range.minInclusive <= epk && epk < range.maxExclusive;
}

/** A lease token's key range and place in the lineage (see {@link World.isAncestor}). */
interface Lineage {
  readonly range: FeedRange;
  /** Order of birth (a partition's split or merge, an EPK lease's first create). */
  readonly born: number;
  /** When it stopped being readable as one partition (split, merged, or an EPK range cut), if it did. */
  goneAt?: number;
  /**
   * The lowest epoch of this incarnation of its token (0: the first). An EPK lease's token names its range, so
   * the same token comes back when a range cut earlier is held whole again and a descendant's replacement
   * creates a lease for it (seed 1404 of `--faults all`): a new lineage, born after that descendant, whose
   * epochs start above the descendant's (children are created one above their parent), so above every epoch
   * of the earlier incarnation.
   */
  readonly fromEpoch: number;
}

/**
 * The data the hosts process: a shared `MemorySource` and the writers that keep writing to it (upserts of new
 * and existing documents, deletes in `allVersionsAndDeletes` mode, splits), with a record of what was written
 * and what reached the sink, for the quiescence checks.
 */
export class World {
  readonly mode: FeedMode;
  readonly partitionCount: number;
  readonly memory: MemorySource<Doc>;
  /** Latest document per id (undefined when deleted). */
  readonly latest = new Map<string, Doc | undefined>();
  /** Latest write per id, as `id@lsn`. */
  readonly latestKey = new Map<string, string>();
  /** Every write as `id@lsn`. */
  readonly written = new Set<string>();
  /** The deletes among {@link World.written}. */
  readonly deletes = new Set<string>();
  /** Every change that reached the sink, as `id@lsn`. */
  readonly delivered = new Set<string>();
  deliveries = 0;
  /** Split (and merge) children to their parents. */
  readonly parentsOf = new Map<string, readonly string[]>();
  /** Poison changes, as `id@lsn`. */
  readonly poisoned = new Set<string>();
  /**
   * Good changes dead-lettered with a poison change of their LSN group (same partition, same LSN, same
   * dead-letter write: a merged partition read whole holds both parents' changes with equal LSNs, and a
   * poison change takes its LSN group with it), as `id@lsn`. Left out of the view by design, like poison.
   */
  readonly takenWithPoison = new Set<string>();
  /** The partition each change was written to, by `id@lsn`. */
  readonly writtenTo = new Map<string, string>();
  /**
   * The effective partition key of each change (hex, as feed ranges are written), by `id@lsn`: the ranges,
   * hence the leases, it belongs to. The memory source's; none in the SDK mode (the emulator routes keys).
   */
  readonly keyOf = new Map<string, string>();
  /**
   * The lease of a token as stored now, if any (set by the observed stores): whether a lease that halted is
   * still there, at which checkpoint, over which range (see {@link World.excused}).
   */
  storedLease: (token: string) => { readonly feedRange?: FeedRange | undefined; readonly continuation: string | null } | undefined = () => undefined;
  /** Partitions whose processing halted on a poison change (their later changes may never arrive). */
  readonly halted = new Set<string>();
  /** Changes written before the processor started (under a start other than `'beginning'`: not required). */
  readonly beforeStart = new Set<string>();
  /** The source as every host and admin operation sees it (positions opaque under `--positions opaque`). */
  readonly source: Source<Doc>;
  /** Every listing the source gave, for listings that lag (the `topology` fault set). */
  readonly listings: ListingHistory;
  readonly #history: { atMs: number; partitions: readonly Partition[] }[] = [];
  #latestChange: { atMs: number; children: readonly Partition[] } | undefined;
  /** The latest incarnation of each token. */
  readonly #lineage = new Map<string, Lineage>();
  /** The earlier incarnations of a reused EPK token, oldest first (see {@link Lineage.fromEpoch}). */
  readonly #earlier = new Map<string, Lineage[]>();
  #generation = 0;
  /** When each change was written (virtual ms), by `id@lsn`. */
  readonly writtenAt = new Map<string, number>();
  /**
   * Leases a bootstrap or a gap repair created under a `'now'` start, by token, with when the run that created
   * it started (virtual ms) and its range: "now" is that run's start, so what was written to them before it is
   * not required.
   */
  readonly startedNowAt = new Map<string, { readonly atMs: number; readonly range: FeedRange | undefined }>();
  /** The `startFrom` option of every host (undefined: the default, `'beginning'`). */
  startFrom: StartFrom | ((partition: Partition) => StartFrom) | undefined;
  #version = 0;
  readonly #poison: (() => number) | undefined;

  /**
   * @param sdk - the SDK mode's emulator: writes and splits go there, and `memory` is left unused. Cosmos DB
   *   starts AllVersionsAndDeletes reads only from "now" or a position: in that mode every host starts from
   *   'now', pinned when a partition's lease is created, so a write made before its partition (or an
   *   ancestor) had a lease need not be delivered.
   */
  constructor(
    private readonly sim: Sim,
    readonly sdk?: SdkWorld,
  ) {
    this.mode = sim.random() < 0.5 ? 'latestVersion' : 'allVersionsAndDeletes';
    this.partitionCount = 1 + sim.int(4);
    // Under `topology`, a split or merged partition still answers what it held until it is read to the end.
    this.memory = new MemorySource<Doc>({ partitions: this.partitionCount, mode: this.mode, now: () => sim.clock.now(), scheduler: sim.clock, ...(sim.faults.has('topology') ? { drainGone: true } : {}) });
    this.source = sim.config.positions === 'opaque' ? withOpaquePositions(this.memory) : this.memory;
    this.#poison = sim.faults.has('poison') ? sim.randomFor('poison') : undefined;
    sdk?.setup(this.partitionCount, this.mode);
    if (sdk && this.mode === 'allVersionsAndDeletes') this.startFrom = 'now';
    const initial = this.partitions();
    for (const p of initial) this.#lineage.set(p.id, { range: p.range, born: 0, fromEpoch: 0 });
    this.#history.push({ atMs: sim.clock.now(), partitions: initial });
    const history = this.#history;
    const latest = () => this.#latestChange;
    this.listings = {
      at(atMs) {
        let found = history[0]!.partitions;
        for (const h of history) if (h.atMs <= atMs) found = h.partitions;
        return found;
      },
      get latestChange() {
        return latest();
      },
    };
  }

  /** The live partitions of the data the hosts read, with their key ranges (the emulator's in the SDK mode). */
  partitions(): readonly Partition[] {
    return (this.sdk ?? this.memory).partitions();
  }

  /** The position a handler stores with its view commit for `lsn`, in the source's format. */
  positionOf(lsn: number): string {
    return this.sim.config.positions === 'opaque' ? opaquePositions.encode(`mem:${lsn}`) : `mem:${lsn}`;
  }

  /** One write: a delete (10% in `allVersionsAndDeletes` mode), an update of an existing id (40%) or a new id. */
  write(): void {
    const { random, int } = this.sim;
    const ids = [...this.latest.keys()];
    const existing = ids.filter((id) => this.latest.get(id) !== undefined);
    const r = random();
    let result: { readonly partition: string; readonly lsn: number; readonly effectivePartitionKey?: string };
    let id: string;
    if (this.mode === 'allVersionsAndDeletes' && existing.length > 0 && r < 0.1) {
      id = existing[int(existing.length)]!;
      result = (this.sdk ?? this.memory).delete(id);
      this.latest.set(id, undefined);
    } else {
      id = ids.length > 0 && r < 0.4 ? ids[int(ids.length)]! : `d${ids.length}`;
      const doc: Doc = this.#poison && this.#poison() < 0.02 ? { id, v: ++this.#version, poison: true } : { id, v: ++this.#version };
      result = (this.sdk ?? this.memory).upsert(doc);
      this.latest.set(id, doc);
    }
    const key = `${id}@${result.lsn}`;
    this.written.add(key);
    if (this.latest.get(id) === undefined) this.deletes.add(key);
    this.writtenAt.set(key, this.sim.clock.now());
    if (this.sdk && this.mode === 'allVersionsAndDeletes' && !this.#pinned(result.partition)) this.beforeStart.add(key);
    this.latestKey.set(id, key);
    this.writtenTo.set(key, result.partition);
    if (result.effectivePartitionKey !== undefined) this.keyOf.set(key, result.effectivePartitionKey);
    if (this.latest.get(id)?.poison) {
      this.poisoned.add(key);
      this.sim.tally('poison.change');
    }
  }

  /**
   * Under a start other than `'beginning'`: writes made before the first host starts, then a second of
   * quiet; sets {@link World.startFrom} to the config's start (a time between those writes and the start).
   */
  async writeBeforeStart(advance: (ms: number) => Promise<void>): Promise<void> {
    const start = this.sim.config.start;
    if (start === undefined || start === 'beginning') return;
    // The SDK mode in AllVersionsAndDeletes mode starts from 'now' whatever the config says (see the constructor).
    if (this.sdk && this.mode === 'allVersionsAndDeletes') return;
    for (let n = 20 + this.sim.int(40); n > 0; n--) this.write();
    for (const key of this.written) this.beforeStart.add(key);
    const at = new Date(this.sim.clock.now() + 500);
    await advance(1_000);
    this.startFrom = start === 'now' ? 'now' : start === 'time' ? at : (p: Partition) => (Number(p.id) % 2 === 0 ? 'now' : at);
  }

  /** Whether `partition` starts from `'now'` (its lease was pinned at the start of the run that created it). */
  startsNow(partition: string): boolean {
    const start = typeof this.startFrom === 'function' ? this.startFrom({ id: partition, range: { minInclusive: '', maxExclusive: 'FF' } }) : this.startFrom;
    return start === 'now';
  }

  /**
   * Whether a change was written before the processor started, so it is not required: before the first host
   * started, or, under a `'now'` start, before the run that created its partition's lease started (the
   * first hosts may stop or fail before they create them; a later one's "now" is its own start). A lease
   * counts for the changes of the keys in its range (an EPK lease a gap repair created for part of a
   * partition has no lineage: seed 1038 of `--faults lease,topology,late,host,admin,bootstrap,clock --start now
   * --chaos-ms 6000`); without a key (the SDK mode) or a range, its partition counts for the changes of its
   * ancestors and descendants.
   */
  isBeforeStart(key: string): boolean {
    if (this.beforeStart.has(key)) return true;
    const at = this.writtenAt.get(key);
    const partition = this.writtenTo.get(key);
    if (at === undefined || partition === undefined) return false;
    const epk = this.keyOf.get(key);
    for (const [leased, { atMs, range }] of this.startedNowAt) {
      if (at >= atMs) continue;
      if (epk !== undefined && range) {
        if (inRange(epk, range)) return true;
      } else if (leased === partition || this.isAncestor(partition, leased) || this.isAncestor(leased, partition)) return true;
    }
    return false;
  }

  /**
   * An operator moved lease `token`'s checkpoint forward, from LSN `from` to `to` (a rewind to a time after
   * it): the changes in between that had not reached the sink are skipped on request and need not arrive
   * (counted with those before the start). Which changes a lease reads is told by key: those whose effective
   * partition key lies in its `range`, in whichever partition they were written to. By lineage it would miss
   * an EPK-range lease read as part of a partition born after it (a merged parent's part, read from the merge's
   * split child, seeds 594 and 1495), and take in a wider ancestor's changes of keys outside the lease. LSNs
   * only grow along a key's partitions (a split child continues its parent's, a merged child holds both logs
   * and goes on above both), and the lease reads every LSN above its checkpoint in its range, so the move
   * skips exactly the changes of its keys with an LSN in `(from, to]`; every one is written already. Without
   * a key (the SDK mode) or a range, by lineage: the partition, its ancestors and its descendants.
   */
  skippedByOperator(token: string, range: FeedRange | undefined, from: number, to: number): void {
    if (to <= from) return;
    const keyRange = range ?? this.#lineage.get(token)?.range;
    let skipped = 0;
    for (const key of this.written) {
      if (this.delivered.has(key) || this.beforeStart.has(key)) continue;
      const lsn = lsnOfKey(key);
      const partition = this.writtenTo.get(key);
      if (lsn <= from || lsn > to || partition === undefined) continue;
      const epk = this.keyOf.get(key);
      const reads = epk !== undefined && keyRange ? inRange(epk, keyRange) : partition === token || this.isAncestor(partition, token) || this.isAncestor(token, partition);
      if (reads) {
        this.beforeStart.add(key);
        skipped++;
      }
    }
    if (skipped > 0) this.sim.tally('admin.rewind.skipped', skipped);
  }

  /** Whether a lease of `partition` or of an ancestor exists (the SDK mode's "now" is pinned by then). */
  #pinned(partition: string): boolean {
    return this.sdk!.leaseSnapshot().some((l) => l.leaseToken === partition || this.isAncestor(l.leaseToken, partition));
  }

  /**
   * Splits a random live partition (up to 12 live partitions), drawing from `random` (default: the run's); in
   * the SDK mode, a range of the emulator.
   */
  split(random: () => number = this.sim.random): void {
    const live = this.partitions();
    if (live.length >= 12) return;
    const parent = live[Math.floor(random() * live.length)]!;
    const children = (this.sdk ?? this.memory).split(parent.id);
    for (const child of children) this.parentsOf.set(child.id, [parent.id]);
    this.#changed([parent.id], children);
    this.sim.tally('source.split');
  }

  /**
   * Merges two adjacent live partitions, drawn from `random` (the `topology` fault set). Not in the SDK mode
   * (see the README's "SDK mode"): `CosmosSource` reads a merged range through EPK-range leases the SDK path
   * of the simulation does not model, so the SDK mode's topology is splits only.
   */
  merge(random: () => number): void {
    if (this.sdk) return;
    const live = this.memory.partitions();
    if (live.length < 2) return;
    const left = live[Math.floor(random() * (live.length - 1))]!;
    const right = live[live.indexOf(left) + 1]!;
    const child = this.memory.merge(left.id, right.id);
    this.parentsOf.set(child.id, [left.id, right.id]);
    this.#changed([left.id, right.id], [child]);
    this.sim.tally('source.merge');
  }

  #changed(gone: readonly string[], children: readonly Partition[]): void {
    const generation = ++this.#generation;
    for (const id of gone) this.#lineage.get(id)!.goneAt = generation;
    for (const child of children) this.#lineage.set(child.id, { range: child.range, born: generation, fromEpoch: 0 });
    // An EPK lease's range is gone once no one live partition holds it whole.
    const live = this.partitions();
    for (const l of this.#lineage.values()) {
      if (l.goneAt === undefined && !live.some((p) => p.range.minInclusive <= l.range.minInclusive && l.range.maxExclusive <= p.range.maxExclusive)) l.goneAt = generation;
    }
    const now = this.sim.clock.now();
    this.#history.push({ atMs: now, partitions: live });
    this.#latestChange = { atMs: now, children };
  }

  /**
   * Registers a lease token the source never listed: an EPK-range lease (the part of a merged partition an
   * older lease covered), created at `epoch` by the replacement of `creator` (its `rxfeed.parentLease`, if any).
   * Its parent is the youngest gone token whose range holds its range. A token registered before starts a new
   * incarnation only when its earlier one is gone and `creator` is a descendant of it, gone too (the range was
   * cut, then merged whole again, and that descendant's replacement made a lease for it): a lease of the same
   * token created again by anyone else (an ancestor's late replacement, a bootstrap on a stale listing) stays
   * the earlier incarnation, whose fences hold (and `epoch-went-back` sees it).
   */
  registerToken(token: string, range: FeedRange | undefined, epoch = 0, creator?: string): boolean {
    if (!range) return false;
    const current = this.#lineage.get(token);
    if (current) {
      const creatorGone = creator !== undefined && this.#lineage.get(creator)?.goneAt !== undefined;
      if (current.goneAt === undefined || !creatorGone || !this.isAncestor(token, creator) || epoch <= current.fromEpoch) return false;
      this.#earlier.set(token, [...(this.#earlier.get(token) ?? []), current]);
      this.#lineage.delete(token);
    }
    const born = this.#generation + 0.5;
    let parent: [string, Lineage] | undefined;
    for (const entry of this.#lineage) {
      const l = entry[1];
      if (l.goneAt !== undefined && l.range.minInclusive <= range.minInclusive && range.maxExclusive <= l.range.maxExclusive && (!parent || l.born > parent[1].born)) parent = entry;
    }
    this.#lineage.set(token, { range, born, fromEpoch: current ? epoch : 0 });
    if (parent) this.parentsOf.set(token, [parent[0]]);
    return true;
  }

  /** Which incarnation of `token` wrote at `epoch`, named by its {@link Lineage.fromEpoch} (0: the first). */
  incarnation(token: string, epoch: number): number {
    return this.#lineageAt(token, epoch)?.fromEpoch ?? 0;
  }

  /** The incarnation of `token` that wrote at `epoch` (the latest one when `epoch` is not given). */
  #lineageAt(token: string, epoch?: number): Lineage | undefined {
    const latest = this.#lineage.get(token);
    if (epoch === undefined || !latest || epoch >= latest.fromEpoch) return latest;
    return [...(this.#earlier.get(token) ?? [])].reverse().find((l) => epoch >= l.fromEpoch);
  }

  /**
   * Whether `ancestor` is a parent, grandparent, ... of `partition`: its range overlaps `partition`'s, it was
   * born before it, and it was gone (split, merged, cut) by the time `partition` was born. Works across
   * splits, merges and EPK-range leases alike. With `epochs`, each token is taken in the incarnation that
   * wrote at that epoch (see {@link Lineage.fromEpoch}); without, in its latest.
   */
  isAncestor(ancestor: string, partition: string, epochs?: { readonly ancestor: number; readonly partition: number }): boolean {
    const a = this.#lineageAt(ancestor, epochs?.ancestor);
    const p = this.#lineageAt(partition, epochs?.partition);
    if (!a || !p || ancestor === partition) return false;
    return a.born < p.born && a.goneAt !== undefined && a.goneAt <= p.born && rangesOverlap(a.range, p.range);
  }

  /** Whether a change written to `partition` may be held up behind `halted` (the same range, or a later one over it). */
  #behind(partition: string, halted: string): boolean {
    if (partition === halted || this.isAncestor(partition, halted)) return true;
    const a = this.#lineage.get(partition);
    const h = this.#lineage.get(halted);
    return !!a && !!h && rangesOverlap(a.range, h.range) && !this.isAncestor(halted, partition);
  }

  /** Records a change that reached the sink. */
  deliver(id: string, lsn: number): void {
    this.delivered.add(`${id}@${lsn}`);
    this.deliveries++;
  }

  /**
   * Changes that must have reached the sink and did not: every write, or each id's latest in `latestVersion`
   * mode; neither poison changes (see {@link World.excused}) nor changes of a partition that halted.
   */
  missing(): string[] {
    const must = this.mode === 'allVersionsAndDeletes' ? [...this.written] : [...this.latestKey.values()];
    return must.filter((k) => !this.delivered.has(k) && !this.leftOut(k) && !this.excused(k) && !this.isBeforeStart(k));
  }

  /** Whether a change is left out by design: poison, or dead-lettered with a poison change of its LSN group. */
  leftOut(key: string): boolean {
    return this.poisoned.has(key) || this.takenWithPoison.has(key);
  }

  /**
   * Whether a change may never arrive because it is behind a partition that halted on a poison change: the
   * halted lease covers the change's partition (or a later one over it) and the change's key. By key too: a
   * halted partition that split or merged is handed to its children from its checkpoint, and only the child
   * holding the poison change halts (its own halt is recorded then), so the changes of the other child's keys,
   * written to the parent before or after the poison, must arrive. A key's range is the live partition it
   * routes to now (splits only narrow it; a merge widens it, which excuses more, never less); in the SDK mode
   * the emulator routes keys, and the key test is left out.
   */
  excused(key: string): boolean {
    const partition = this.writtenTo.get(key);
    if (partition === undefined || this.halted.size === 0) return false;
    const keyRange = this.sdk ? undefined : this.#lineage.get(this.memory.partitionFor(key.slice(0, key.lastIndexOf('@'))))?.range;
    return [...this.halted].some((h) => (this.#behind(partition, h) && (!keyRange || rangesOverlap(keyRange, this.#lineage.get(h)?.range ?? keyRange))) || this.#heldByHalt(key, h));
  }

  /**
   * Whether a change is held up by halted lease `halted` that is still stored, still stuck, and reads the
   * change's key: by key, whatever the partitions beneath it did. An EPK-range lease is read as part of
   * whichever live partition holds its range whole, and is handed to children only when a read answers
   * "gone"; the lineage counts it gone once no one partition held it, which a split followed by a merge of the
   * two halves undoes (seed 864: lease [AA000000, FF) halted on d2@34, its partition split and merged back
   * while it waited out its halt backoff, and it went on halting over the merged one, holding up every later
   * change of its range). Stuck: a poison change its reads still meet lies in its range above its checkpoint
   * (in `latestVersion` mode, a poison version no later write passed over), so it halts again at each try.
   * Held up: a change of its keys at or past the first such poison change's LSN (the halt stops before the
   * poison change's LSN group; what lies before it must have arrived).
   */
  #heldByHalt(key: string, halted: string): boolean {
    const epk = this.keyOf.get(key);
    const lease = this.storedLease(halted);
    const range = lease?.feedRange ?? this.#lineage.get(halted)?.range;
    if (epk === undefined || !lease || !range || !inRange(epk, range)) return false;
    const checkpoint = lsnOf(lease.continuation);
    const stuckAt = (p: string): number[] => {
      const pk = this.keyOf.get(p);
      const live = this.mode === 'allVersionsAndDeletes' || this.latestKey.get(p.slice(0, p.lastIndexOf('@'))) === p;
      return pk !== undefined && inRange(pk, range) && lsnOfKey(p) > checkpoint && live ? [lsnOfKey(p)] : [];
    };
    const first = Math.min(...[...this.poisoned].flatMap(stuckAt));
    return lsnOfKey(key) >= first;
  }
}
