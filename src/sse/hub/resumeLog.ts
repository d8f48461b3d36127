import type { Change } from '../../core/Change.js';
import { asBatches, type BatchOrBatches } from '../../core/ChangeBatch.js';
import { type FeedRange, rangesOverlap } from '../../core/Partition.js';
import { logger } from '../../internal/log.js';
import type { ViewStore } from '../../sinks/ViewStore.js';
import { formatEventId, parseEventId } from '../eventId.js';
import { markOf } from '../lineage.js';
import { ReplayBuffer, type SseEntry } from '../ReplayBuffer.js';
import { Reread } from './reread.js';
import type { SseResetReason } from './types.js';

const log = logger('sse');

/** @internal Where a connecting client starts, by its `Last-Event-ID`. */
export type Resume =
  /** No id: at the head. */
  | { readonly kind: 'live' }
  /** From the oldest entry held, skipping what the client's marks (`after`) say it has. */
  | { readonly kind: 'replay'; readonly after: Map<string, number> }
  /** The buffer cannot serve it: a snapshot (snapshot mode) or a `reset`. */
  | { readonly kind: 'reset'; readonly reason: SseResetReason };

/**
 * @internal What a hub published and can replay: the changes numbered in order in a bounded {@link ReplayBuffer},
 * the hub's position (highest LSN per lease token) and what it needs to vouch for a client's `Last-Event-ID`.
 * Positions are compared along lineage (a split child against its parent's mark).
 */
export class ResumeLog<T> {
  readonly #replay: ReplayBuffer<T>;
  /** Highest LSN published per lease token: the hub's position, and what a re-read (along lineage) is checked against. */
  readonly #marks = new Map<string, number>();
  /** Key range per lease token, from batches and view positions: what lineage is worked out from. */
  readonly #ranges = new Map<string, FeedRange>();
  /** Highest LSN per token pushed out of the replay buffer: a client must have reached it to be replayed to. */
  readonly #evicted = new Map<string, number>();
  /**
   * What a client of another hub (a previous server process) must have reached per token to be replayed to: the
   * view's positions when this hub started (snapshot mode), or, where further, the first change this hub published
   * for a partition whose lineage it does not know (see {@link ResumeLog.#startAt}).
   */
  readonly #starts = new Map<string, number>();
  /** Tokens whose positions the hub's snapshots handed out (its own ids may hold them). */
  readonly #snapshotTokens = new Set<string>();
  /** Per token, the highest LSN up to which the hub knows it published nothing (clients had it from elsewhere). */
  readonly #unpublished = new Map<string, number>();
  /**
   * The changes in the buffer by document id and LSN → seq: a re-read that lineage cannot rule out (a batch without
   * a key range; a merged range, whose mark is its least advanced parent's) is not sent twice while it is held.
   */
  readonly #held = new Map<string, number>();
  /**
   * The newest version in the buffer of each document: an older version read after it over the same range (a split
   * parent's batch that reaches the hub after its child's, a range read again after an admin reset or rewind) is
   * not sent after it, so each client keeps a document's changes in LSN order.
   */
  readonly #newest = new Map<string, { readonly lsn: number; readonly seq: number; readonly token: string }>();
  /**
   * Per lease token whose reading went back (a range read before under other tokens, at different positions, as an
   * admin reset or rewind makes, re-read from below the furthest of them), the hub's marks over its range then: an
   * id at or below all of them is from before, and may hold changes the hub publishes again.
   */
  readonly #rewinds = new Map<string, Map<string, number>>();
  /**
   * Per lease token whose reading went back (see {@link ResumeLog.#rewinds}), its re-reads the hub does not publish:
   * the one still open (nothing of it is published up to its end) and how far the hub's position passed them.
   */
  readonly #rereads = new Map<string, Reread>();
  /**
   * Snapshot mode: a re-read's skipped part enters the hub's position only once the re-read has passed it, and
   * clients start over from the view after each batch of it (the view holds it; in changes-only mode, at once
   * past all of it: a `reset` reloads the state).
   */
  holdRereads = false;
  /** How many times clients were started over past a re-read: a snapshot read across one is read again. */
  startsOver = 0;
  /**
   * Called when the hub's position moves past a re-read it does not publish (see `holdRereads`): clients must
   * start over.
   */
  onRewind: ((token: string) => void) | undefined;
  #eventId: string;
  #head = 0;

  constructor(
    readonly streamId: string,
    replayLimit: number,
  ) {
    this.#replay = new ReplayBuffer<T>(replayLimit, (entry) => this.#evict(entry));
    this.#eventId = formatEventId(streamId, this.#marks);
  }

  /** Event id of the newest change: the positions of everything published. */
  get eventId(): string {
    return this.#eventId;
  }

  /** Sequence number of the newest change (0 before the first). */
  get head(): number {
    return this.#head;
  }

  /** Changes held for replay. */
  get replayable(): number {
    return this.#replay.size;
  }

  /** Sequence number of the oldest change held, or `undefined` when none is. */
  get oldestSeq(): number | undefined {
    return this.#replay.oldestSeq;
  }

  /** The change numbered `seq`, while it is held. */
  entry(seq: number): SseEntry<T> | undefined {
    return this.#replay.get(seq);
  }

  /** Numbers and holds the changes of a batch (or batches) not published before; returns them, in order. */
  append(value: BatchOrBatches<T>): SseEntry<T>[] {
    const fresh: SseEntry<T>[] = [];
    for (const batch of asBatches(value)) {
      const token = batch.partition;
      if (batch.range) this.#ranges.set(token, batch.range);
      const end = this.#rereads.get(token)?.end;
      if (end !== undefined && Math.max(batch.readLsn ?? -1, batch.lastLsn ?? -1) >= end) {
        // The re-read passed what it could not publish (and the view, before the hub in the pipeline, holds it).
        this.#rereads.get(token)!.close();
        if (this.holdRereads) this.#passReread(token, end);
      }
      if (batch.isEmpty) continue;
      const skipping = this.#rereading(token);
      // Along lineage: a split child's first batch is checked against its parent's mark.
      const seen = markOf(token, this.#marks, this.#ranges);
      const floor = seen ?? -1;
      for (const change of batch.changes) {
        // Changes of one transaction share an LSN, so compare with what earlier batches published.
        if (change.lsn <= floor || change.lsn <= (this.#rereads.get(token)?.end ?? -1)) continue;
        const identity = `${change.id}\u0000${change.lsn}`;
        if (this.#held.has(identity) || this.#superseded(token, change)) continue;
        // A range read before under other tokens (all of it, or a part: then it inherits no mark) read from below.
        if (this.#mayHave(token, floor, change.lsn)) {
          // The change may be one published under another token over the range, no longer held (or an older
          // version of a document published newer there): whoever has the hub's ids may have it, or stand past
          // it. Nothing of the range is published up to the furthest the hub had published over it; clients
          // start over past that instead (from here on the range is this token's own: later ids name it).
          const range = this.#ranges.get(token)!;
          const then = new Map([...this.#marks].filter(([t]) => t === token || this.#overlaps(t, range)));
          this.#rewinds.set(token, then);
          const to = Math.max(...then.values());
          this.#reread(token).openTo(to);
          log('%s re-read from %d below what was published over its range (up to %d): not published, clients start over', token, floor, to);
          if (!this.holdRereads) this.#passReread(token, to);
          continue;
        }
        if (seen === undefined && !this.#marks.has(token)) this.#startAt(token, change.lsn);
        this.#marks.set(token, Math.max(this.#marks.get(token) ?? -1, change.lsn));
        this.#eventId = formatEventId(this.streamId, this.#marks);
        const entry: SseEntry<T> = { seq: ++this.#head, partition: token, change, eventId: this.#eventId };
        this.#held.set(identity, entry.seq);
        this.#newest.set(change.id, { lsn: change.lsn, seq: entry.seq, token });
        this.#replay.push(entry);
        fresh.push(entry);
      }
      if (this.#rereading(token)) this.#rereads.get(token)!.readBatch(batch);
      // Snapshot mode, a re-read not published yet: the view holds this batch of it, clients start over from there
      // (the reading may stop here: its lease moved to another process).
      if (this.holdRereads && (skipping || this.#rereading(token))) {
        this.startsOver++;
        this.onRewind?.(token);
      }
      // A child that re-read only what its parent published still takes the parent's mark as its own.
      if (seen !== undefined && !this.#marks.has(token)) this.#marks.set(token, seen);
    }
    return fresh;
  }

  /** Whether the buffer holds everything after `lastEventId`, and the marks to skip what the client has. */
  resume(lastEventId: string | undefined): Resume {
    if (lastEventId === undefined || lastEventId === '') return { kind: 'live' };
    const position = parseEventId(lastEventId);
    if (!position) return { kind: 'reset', reason: 'unknown-stream' };
    const have = position.positions;
    const ours = position.stream === this.streamId;
    // Ids may run ahead of what this hub published (a snapshot's positions, a previous process's changes that come
    // again): the client's marks skip those. But the hub must know where each partition's replay starts. Its own
    // ids may also hold the positions of the snapshots it sent (a partition it never read, whose changes the view
    // had from another process; one it re-reads and has published nothing of): a live client goes on from them,
    // and so does one resumed.
    for (const token of have.keys()) {
      if (ours && (this.#snapshotTokens.has(token) || this.#rewinds.has(token))) continue;
      if (markOf(token, this.#marks, this.#ranges) === undefined && markOf(token, this.#starts, this.#ranges) === undefined) {
        return { kind: 'reset', reason: 'unknown-stream' };
      }
    }
    for (const [token, then] of this.#rewinds) {
      const range = this.#ranges.get(token)!;
      const over = [...have].filter(([t]) => t === token || this.#overlaps(t, range));
      if (over.length > 0 && over.every(([t, lsn]) => lsn <= (then.get(t) ?? -1))) return { kind: 'reset', reason: 'too-old' };
      // From before the hub's position passed the re-read it did not publish (or, while the re-read may still reach
      // its end here, from before it does): it may lack some of it.
      if (over.length > 0 && this.#standsAt(token, have) < this.#rereadNeed(token)) return { kind: 'reset', reason: 'too-old' };
    }
    const tokens = new Set([...this.#evicted.keys(), ...(ours ? [] : this.#starts.keys())]);
    for (const token of tokens) {
      const need = Math.max(this.#evicted.get(token) ?? -1, ours ? -1 : (this.#starts.get(token) ?? -1));
      const reached = markOf(token, have, this.#ranges);
      if (reached === undefined || reached < need) return { kind: 'reset', reason: 'too-old' };
    }
    return { kind: 'replay', after: new Map(have) };
  }

  /** The LSN `marks` hold for `token`, along lineage (a child inherits its parent's), if any. */
  reached(token: string, marks: ReadonlyMap<string, number>): number | undefined {
    return markOf(token, marks, this.#ranges);
  }

  /**
   * Whether a client with its own marks `after` may hold `entry` all the same: another token over the range stands
   * at or past it (a range read before in parts at different positions, which inherits the least advanced: the
   * entry may come from a part the client has, or from one it lacks). Also when the client has a mark of the
   * entry's token below it: a snapshot's positions may hold the token (this process re-reading the range) beside a
   * part of it another process read further (seed 83: `4` at 359 beside `-7F800000` at 388, d343@361 a row).
   */
  mayHold(entry: SseEntry<T>, after: ReadonlyMap<string, number>): boolean {
    const range = this.#ranges.get(entry.partition);
    if (!range) return false;
    for (const [token, lsn] of after) {
      if (token !== entry.partition && lsn >= entry.change.lsn && this.#overlaps(token, range)) return true;
    }
    return false;
  }

  /**
   * Where a client with its own marks `after` stands in `entry`'s partition just before it, along lineage: its
   * marks with the hub's positions before the entry (every other token's, as the entry's id holds them), as the
   * ids it is sent say. The marks alone are not enough once the hub has passed some of them (they are forgotten)
   * while a range over several tokens (a merge) inherits from both. A mark of the partition's own is not the whole
   * story either: it may be the hub's position, while other tokens over the same range stand further (a snapshot's
   * positions name the EPK-range lease a range was read under, the hub reads it again under the partition's own).
   */
  reachedBefore(entry: SseEntry<T>, after: ReadonlyMap<string, number>): number | undefined {
    const own = after.get(entry.partition);
    const marks = new Map(parseEventId(entry.eventId)?.positions);
    marks.delete(entry.partition);
    for (const [token, lsn] of after) if (token !== entry.partition && lsn > (marks.get(token) ?? -1)) marks.set(token, lsn);
    const inherited = markOf(entry.partition, marks, this.#ranges);
    return own === undefined ? inherited : Math.max(own, inherited ?? -1);
  }

  /** Whether the hub has published up to `lsn` of `token` (along lineage). */
  published(token: string, lsn: number): boolean {
    return (markOf(token, this.#marks, this.#ranges) ?? -1) >= lsn;
  }

  /** A snapshot this hub sends holds `token`'s position: ids of this hub may name it. */
  snapshotHolds(token: string): void {
    this.#snapshotTokens.add(token);
  }

  /** Learns a lease token's key range (from a view's positions): what lineage is worked out from. */
  learnRange(token: string, range: FeedRange): void {
    this.#ranges.set(token, range);
  }

  /**
   * Snapshot mode: a previous process's clients are served from the buffer only from the view's positions on (and
   * from the first change the hub publishes of a partition, where that is further).
   */
  async loadStarts<R>(view: ViewStore<R>): Promise<void> {
    try {
      for (const [token, state] of await view.positions()) {
        if (state.range) this.#ranges.set(token, state.range);
        if (state.lsn !== undefined) {
          this.#starts.set(token, Math.max(state.lsn, this.#starts.get(token) ?? -1));
          this.#unpublished.set(token, Math.max(state.lsn, this.#unpublished.get(token) ?? -1));
        }
      }
    } catch (error) {
      // Without them a previous process's client cannot be vouched for: it gets a snapshot.
      log('could not read the positions of %s: %s', view.description, (error as Error).message);
      this.#starts.set('\u0000unknown', Number.MAX_SAFE_INTEGER);
    }
  }

  /**
   * The first change the hub publishes over `token`'s range (its lineage holds no mark of the hub's) is at `lsn`: the
   * hub published nothing of the token below it. With no start known, a client of another hub must have reached
   * `lsn`. With one (the view's positions when the hub started), the reading may begin well past it all the same
   * (seed 6114 of the simulation: the host froze, and took the lease only later, at a checkpoint other hosts had
   * moved on): what lies between is in the view, not in the buffer, so a client of another hub must stand past it,
   * and a re-read over the range from below it may be something the hub's snapshots handed out (see
   * {@link ResumeLog.#mayHave}).
   */
  #startAt(token: string, lsn: number): void {
    const start = this.#starts.get(token) ?? markOf(token, this.#starts, this.#ranges);
    if (start === undefined) this.#starts.set(token, lsn);
    else if (lsn - 1 > start) this.#starts.set(token, lsn - 1);
    this.#unpublished.set(token, Math.max(lsn - 1, this.#unpublished.get(token) ?? -1));
  }

  /**
   * Where an id's `have` stands over `token`'s range: its own mark of the token or, where further, the one the other
   * tokens it holds give along lineage (a split child, the parts of a merge).
   */
  #standsAt(token: string, have: ReadonlyMap<string, number>): number {
    const others = new Map(have);
    others.delete(token);
    return Math.max(have.get(token) ?? -1, markOf(token, others, this.#ranges) ?? -1);
  }

  /** What an id must stand at over `token`'s range not to lack a re-read of it the hub did not publish (see {@link Reread.need}). */
  #rereadNeed(token: string): number {
    const reread = this.#rereads.get(token);
    if (!reread) return -1;
    return reread.need(() => {
      const others = new Map(this.#marks);
      others.delete(token);
      return markOf(token, others, this.#ranges) ?? -1;
    });
  }

  /** Whether `token` has a re-read that has not reached its end yet. */
  #rereading(token: string): boolean {
    return this.#rereads.get(token)?.open === true;
  }

  /** `token`'s re-reads, recorded from here on. */
  #reread(token: string): Reread {
    let reread = this.#rereads.get(token);
    if (!reread) this.#rereads.set(token, (reread = new Reread()));
    return reread;
  }

  /** The hub's position passes `token`'s re-read up to `to` (not published): clients start over past it. */
  #passReread(token: string, to: number): void {
    this.#reread(token).pass(to);
    this.#marks.set(token, Math.max(to, this.#marks.get(token) ?? -1));
    this.#eventId = formatEventId(this.streamId, this.#marks);
    this.startsOver++;
    this.onRewind?.(token);
  }

  /**
   * Whether a change of `token` at `lsn`, above the `floor` its range inherits (-1 when it inherits none: a range
   * the hub read only part of), may have been published under another token over the range that reached `lsn`, out
   * of the buffer since (one still held is found by identity).
   */
  #mayHave(token: string, floor: number, lsn: number): boolean {
    const range = this.#ranges.get(token);
    if (!range) return false;
    const then = this.#rewinds.get(token);
    for (const [other, mark] of this.#marks) {
      // What the hub published of `other` above the floor is all held, unless some is evicted, or the hub started
      // it above the floor (clients have the rest from a snapshot or another hub).
      const unlisted = Math.max(this.#evicted.get(other) ?? -1, this.#unpublished.get(other) ?? -1);
      if (other === token || mark < lsn || unlisted <= floor) continue;
      // Clients started over when this token went back below it already.
      if (then !== undefined && mark <= (then.get(other) ?? -1)) continue;
      if (this.#overlaps(other, range)) return true;
    }
    return false;
  }

  /**
   * Whether the buffer holds a newer version of `change`'s document, published over the same range (its own token,
   * or one whose key range overlaps): LSNs only grow along a lineage, so `change` is an older version read late.
   */
  #superseded(token: string, change: Change<T>): boolean {
    const newest = this.#newest.get(change.id);
    if (!newest || newest.lsn <= change.lsn) return false;
    if (newest.token === token) return true;
    const range = this.#ranges.get(token);
    return range !== undefined && this.#overlaps(newest.token, range);
  }

  #overlaps(token: string, range: FeedRange): boolean {
    const r = this.#ranges.get(token);
    return r !== undefined && rangesOverlap(r, range);
  }

  #evict(entry: SseEntry<T>): void {
    const { partition, change, seq } = entry;
    if (change.lsn > (this.#evicted.get(partition) ?? -1)) this.#evicted.set(partition, change.lsn);
    const identity = `${change.id}\u0000${change.lsn}`;
    if (this.#held.get(identity) === seq) this.#held.delete(identity);
    if (this.#newest.get(change.id)?.seq === seq) this.#newest.delete(change.id);
  }
}
