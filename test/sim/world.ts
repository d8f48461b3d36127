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

/** A lease token's key range and place in the lineage (see {@link World.isAncestor}). */
interface Lineage {
  readonly range: FeedRange;
  /** Order of birth (a partition's split or merge, an EPK lease's first create). */
  readonly born: number;
  /** When it stopped being readable as one partition (split, merged, or an EPK range cut), if it did. */
  goneAt?: number;
  /** An EPK-range lease's token (see {@link World.registerToken}), not a partition of the source. */
  readonly epk?: true;
  /** An EPK token's last cut: when its range last stopped being held whole by one live partition. */
  cutAt?: number;
  /** An EPK token whose lease was replaced (marked so, or deleted): gone for good once it was cut. */
  ended?: true;
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
  readonly #lineage = new Map<string, Lineage>();
  #generation = 0;
  /** When each change was written (virtual ms), by `id@lsn`. */
  readonly writtenAt = new Map<string, number>();
  /**
   * Partitions whose lease a bootstrap created under a `'now'` start, to when the run that created it
   * started (virtual ms): "now" is that run's start, so what was written to them before it is not required.
   */
  readonly startedNowAt = new Map<string, number>();
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
    for (const p of initial) this.#lineage.set(p.id, { range: p.range, born: 0 });
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
    let result;
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
    this.writtenAt.set(key, this.sim.clock.now());
    if (this.sdk && this.mode === 'allVersionsAndDeletes' && !this.#pinned(result.partition)) this.beforeStart.add(key);
    this.latestKey.set(id, key);
    this.writtenTo.set(key, result.partition);
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
   * first hosts may stop or fail before they create them; a later one's "now" is its own start). A lease's
   * partition counts for the changes of its ancestors and descendants.
   */
  isBeforeStart(key: string): boolean {
    if (this.beforeStart.has(key)) return true;
    const at = this.writtenAt.get(key);
    const partition = this.writtenTo.get(key);
    if (at === undefined || partition === undefined) return false;
    for (const [leased, startedAt] of this.startedNowAt) {
      if (at >= startedAt) continue;
      if (leased === partition || this.isAncestor(partition, leased) || this.isAncestor(leased, partition)) return true;
    }
    return false;
  }

  /**
   * An operator moved lease `token`'s checkpoint forward, from LSN `from` to `to` (a rewind to a time after
   * it): the changes in between of the keys in its range that had not reached the sink are skipped on request
   * and need not arrive (counted with those before the start). LSNs only grow, so every change the move skips is
   * written already. By key, not by partition: every partition that ever held a key (its parents, a merged
   * partition an EPK-range lease reads part of, that partition's parents) hands its log on to the next with its
   * LSNs, so the lease reads every change of its keys above its checkpoint, whichever partition it was written
   * to, and no other key's (in the SDK mode, with no key, its partition, ancestors and descendants).
   */
  skippedByOperator(token: string, from: number, to: number): void {
    if (to <= from) return;
    const range = this.#lineage.get(token)?.range;
    let skipped = 0;
    for (const key of this.written) {
      if (this.delivered.has(key) || this.beforeStart.has(key)) continue;
      const lsn = Number(key.slice(key.lastIndexOf('@') + 1));
      const partition = this.writtenTo.get(key);
      if (lsn <= from || lsn > to || partition === undefined) continue;
      const point = range ? this.keyOf(key.slice(0, key.lastIndexOf('@'))) : undefined;
      if (point !== undefined ? inRange(point, range!) : partition === token || this.isAncestor(partition, token) || this.isAncestor(token, partition)) {
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
    for (const child of children) this.#lineage.set(child.id, { range: child.range, born: generation });
    // An EPK lease's range is gone once no one live partition holds it whole. A cut that a merge heals before the
    // lease is replaced leaves it whole again: its lease reads the merged partition on (the source reads an EPK
    // range in whichever one live partition holds it), so it is no one's parent. Once replaced, it stays gone.
    const live = this.partitions();
    for (const l of this.#lineage.values()) {
      const whole = live.some((p) => p.range.minInclusive <= l.range.minInclusive && l.range.maxExclusive <= p.range.maxExclusive);
      if (l.goneAt === undefined && !whole) {
        l.goneAt = generation;
        if (l.epk) l.cutAt = generation;
      } else if (l.epk && !l.ended && l.goneAt !== undefined && whole) {
        l.goneAt = undefined;
      }
    }
    const now = this.sim.clock.now();
    this.#history.push({ atMs: now, partitions: live });
    this.#latestChange = { atMs: now, children };
  }

  /**
   * Registers a lease token the source never listed: an EPK-range lease (the part of a merged partition an
   * older lease covered). Its parent is the youngest gone token whose range holds its range.
   */
  registerToken(token: string, range: FeedRange | undefined): boolean {
    if (this.#lineage.has(token) || !range) return false;
    const born = this.#generation + 0.5;
    let parent: [string, Lineage] | undefined;
    for (const entry of this.#lineage) {
      const l = entry[1];
      if (l.goneAt !== undefined && l.range.minInclusive <= range.minInclusive && range.maxExclusive <= l.range.maxExclusive && (!parent || l.born > parent[1].born)) parent = entry;
    }
    this.#lineage.set(token, { range, born, epk: true });
    if (parent) this.parentsOf.set(token, [parent[0]]);
    return true;
  }

  /**
   * Lease `token` was replaced (marked replaced or deleted): an EPK token cut before is gone from its last cut on,
   * healed or not (its children, made while it was cut, descend from it). A partition's own token is unchanged.
   */
  leaseEnded(token: string): void {
    const l = this.#lineage.get(token);
    if (!l?.epk || l.ended) return;
    l.ended = true;
    if (l.goneAt === undefined && l.cutAt !== undefined) l.goneAt = l.cutAt;
  }

  /** The point of the key space a document's key hashes to (hex), or `undefined` in the SDK mode. */
  keyOf(id: string): string | undefined {
    return this.sdk ? undefined : this.memory.effectivePartitionKey(id);
  }

  /**
   * Whether `ancestor` is a parent, grandparent, ... of `partition`: its range overlaps `partition`'s, it was
   * born before it, and it was gone (split, merged, cut) by the time `partition` was born. Works across
   * splits, merges and EPK-range leases alike.
   */
  isAncestor(ancestor: string, partition: string): boolean {
    const a = this.#lineage.get(ancestor);
    const p = this.#lineage.get(partition);
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
   * written to the parent before or after the poison, must arrive. The key is its point in the key space (the
   * live partition it routes to now would be wider after a merge, and excuse the keys of a lease that did not
   * halt); in the SDK mode the emulator routes keys, and the key test is left out.
   */
  excused(key: string): boolean {
    const partition = this.writtenTo.get(key);
    if (partition === undefined || this.halted.size === 0) return false;
    const point = this.keyOf(key.slice(0, key.lastIndexOf('@')));
    return [...this.halted].some((h) => {
      const range = this.#lineage.get(h)?.range;
      return this.#behind(partition, h) && (point === undefined || range === undefined || inRange(point, range));
    });
  }
}

/** Whether a key's point (see {@link World.keyOf}) lies in `range`. */
function inRange(point: string, range: FeedRange): boolean {
  return range.minInclusive <= point && point < range.maxExclusive;
}
