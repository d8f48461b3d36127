import type { FeedMode, Partition, StartFrom } from '../../src/core/Partition.js';
import { MemorySource } from '../../src/index.js';
import type { Sim } from './context.js';
import type { SdkWorld } from './sdkWorld.js';

/** A simulated document: `v` grows with every write anywhere, so a newer version always has a higher `v`. */
export interface Doc {
  readonly id: string;
  readonly v: number;
  /** A change no handler can process (the `poison` fault set): it must be dead-lettered or halt its partition. */
  readonly poison?: true;
}

/** Reads an LSN out of a `mem:<lsn>` position, or a Cosmos DB etag (`"42"`) in the SDK mode (-1 for none). */
export function lsnOf(position: string | null | undefined): number {
  if (position === null || position === undefined) return -1;
  const n = Number(position.replace(/^mem:/, '').replace(/"/g, ''));
  return Number.isFinite(n) ? n : -1;
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
  /** The partition each change was written to, by `id@lsn`. */
  readonly writtenTo = new Map<string, string>();
  /** Partitions whose processing halted on a poison change (their later changes may never arrive). */
  readonly halted = new Set<string>();
  /** Changes written before the processor started (under a start other than `'beginning'`: not required). */
  readonly beforeStart = new Set<string>();
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
    this.memory = new MemorySource<Doc>({ partitions: this.partitionCount, mode: this.mode, now: () => sim.clock.now(), scheduler: sim.clock });
    this.#poison = sim.faults.has('poison') ? sim.randomFor('poison') : undefined;
    sdk?.setup(this.partitionCount, this.mode);
    if (sdk && this.mode === 'allVersionsAndDeletes') this.startFrom = 'now';
  }

  /** The live partitions of the data the hosts read. */
  partitions(): readonly { readonly id: string }[] {
    return (this.sdk ?? this.memory).partitions();
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

  /** Whether a lease of `partition` or of an ancestor exists (the SDK mode's "now" is pinned by then). */
  #pinned(partition: string): boolean {
    return this.sdk!.leaseSnapshot().some((l) => l.leaseToken === partition || this.isAncestor(l.leaseToken, partition));
  }

  /** Splits a random live partition (up to 12 live partitions). */
  split(): void {
    const live = this.partitions();
    if (live.length >= 12) return;
    const parent = live[this.sim.int(live.length)]!;
    for (const child of (this.sdk ?? this.memory).split(parent.id)) this.parentsOf.set(child.id, [parent.id]);
    this.sim.tally('source.split');
  }

  /** Whether `ancestor` is a parent, grandparent, ... of `partition` (its range holds some of `partition`'s). */
  isAncestor(ancestor: string, partition: string): boolean {
    const parents = this.parentsOf.get(partition) ?? [];
    return parents.includes(ancestor) || parents.some((p) => this.isAncestor(ancestor, p));
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
    return must.filter((k) => !this.delivered.has(k) && !this.poisoned.has(k) && !this.excused(k) && !this.beforeStart.has(k));
  }

  /** Whether a change may never arrive because its partition (or a child of it) halted on a poison change. */
  excused(key: string): boolean {
    const partition = this.writtenTo.get(key);
    if (partition === undefined || this.halted.size === 0) return false;
    return [...this.halted].some((h) => h === partition || this.isAncestor(partition, h));
  }
}
