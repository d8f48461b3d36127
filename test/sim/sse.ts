import { firstValueFrom, type MonoTypeOperatorFunction, pipe, tap, timer } from 'rxjs';
import type { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { FeedRange } from '../../src/core/Partition.js';
import type { ViewStore } from '../../src/sinks/ViewStore.js';
import { parseEventId } from '../../src/sse/eventId.js';
import { createSseHub, type SseHub, type SseResponse } from '../../src/sse/index.js';
import { markOf } from '../../src/sse/lineage.js';
import type { HostClock } from '../support/faults/index.js';
import { EPOCH_MS } from './config.js';
import type { Sim } from './context.js';
import type { SimHost } from './hosts.js';
import type { Doc, World } from './world.js';

/**
 * Where `positions` (an event id's) stand in `token`'s partition along lineage: its own mark, or, where further, the
 * one inherited from the other tokens over its range (an id may hold the EPK-range lease a snapshot's positions
 * named at 187 and the partition's own token, read again over that range, at 155: it stands at 187).
 */
function standsAt(token: string, positions: ReadonlyMap<string, number>, ranges: ReadonlyMap<string, FeedRange>): number | undefined {
  const own = positions.get(token);
  const others = new Map(positions);
  others.delete(token);
  const inherited = markOf(token, others, ranges);
  return own === undefined ? inherited : Math.max(own, inherited ?? -1);
}

function overlaps(a: FeedRange, b: FeedRange | undefined): boolean {
  return b !== undefined && a.minInclusive < b.maxExclusive && b.minInclusive < a.maxExclusive;
}

/** One host incarnation's hub, and what its pipeline handed to it (`broadcast()`'s input), by token and LSN. */
interface SimHub {
  readonly hub: SseHub<Doc, unknown>;
  readonly host: () => SimHost | undefined;
  /** Per token, the LSNs read, each with the index in `inputs` of its first reading. */
  readonly read: Map<string, Map<number, number>>;
  /** Lowest LSN read per token. */
  readonly first: Map<string, number>;
  /** Every change handed to the hub, in order. */
  readonly inputs: { readonly token: string; readonly id: string; readonly lsn: number }[];
  /** Highest LSN handed to the hub per token (changes and empty reads). */
  readonly handed: Map<string, number>;
  /** Per token, the re-read it is in: see {@link Reread}. */
  readonly rereads: Map<string, Reread>;
  /** Every re-read, open or over. */
  readonly rereadLog: Reread[];
  closed: boolean;
  dead: boolean;
}

/**
 * A token's reading handed to a hub that went back below what the hub was handed over its range under other
 * tokens (an admin reset or rewind, a child reading from its parent's checkpoint): the hub may not publish it up
 * to there (`end`), and may refuse ids from before the reading gets there. `live`: the virtual-ms spans in which
 * it could still get there on this host (its reading went on, under an ownership that had not ended).
 */
interface Reread {
  end: number;
  readonly live: { readonly from: number; to: number | undefined }[];
  signal: AbortSignal | undefined;
}

/** Where the browser's last event id came from: the hub whose frame carried it, when, and what it had evicted then. */
interface IdFrom {
  readonly hub: SimHub;
  readonly atMs: number;
  readonly evicted: number;
}

/** Changes a hub has pushed out of its replay buffer. */
const evictedBy = (hub: SseHub<Doc, unknown>): number => hub.stats().head - hub.stats().replayable;

/** A browser's view of one connection: what it read, in order, and the last event id it holds. */
interface Chain {
  readonly id: number;
  readonly received: Set<string>;
  /** Newest LSN per document (changes and snapshot rows). */
  readonly newest: Map<string, number>;
  /** Where each document's newest LSN came from (for the reports). */
  readonly newestFrom: Map<string, { readonly what: string; readonly token: string | undefined; readonly stream: string }>;
  /** Highest LSN received per partition (lease token). */
  readonly reached: Map<string, number>;
  /** Snapshot rows: document → LSN of the row (a row stands for every change of its document up to it). */
  readonly rows: Map<string, number>;
  /** A resume from another hub's id that the hub served from its buffer: it vouched for these positions. */
  vouched: { readonly hub: SimHub; readonly positions: ReadonlyMap<string, number>; readonly first: ReadonlyMap<string, number> } | undefined;
}

type Kind = 'fast' | 'slow' | 'stalling' | 'flaky';

/** Virtual ms browsers get at quiescence to come back and catch up (reconnect 1–1.5 s, a snapshot, heartbeats). */
const SETTLE_MS = 8_000;

/** Unsent bytes a response may hold past `maxBufferedBytes` (or one larger event): id-only position frames, heartbeats, `dropped`. */
const SLACK_BYTES = 4_096;

/**
 * A response on the virtual clock whose reader the simulation drives: bytes written wait unsent
 * (`writableLength`) until the client reads them, a budget per tick; a chunk's `flushed` callback runs once it
 * is read whole. `end()` closes it once drained; `destroy()` and a client going away close it at once (the
 * unread bytes are lost, the pending callbacks get an error, as Node's do).
 */
class SimResponse implements SseResponse {
  #pending: { chunk: string; read: number; flushed: ((error?: Error | null) => void) | undefined; stamp: IdFrom }[] = [];
  #unsent = 0;
  #listeners: (() => void)[] = [];
  ended = false;
  closed = false;

  /** Largest chunk written. */
  #largest = 0;

  /** What the hub wrote first after the `retry:` frame, until {@link SimResponse.decided}. */
  firstWrite: string | undefined;
  #deciding = true;

  constructor(
    /** Called with text as the client reads it, and when, with what evicted, the hub wrote it. */
    private readonly onText: (text: string, stamp: IdFrom) => void,
    /** `maxBufferedBytes` of the hub, and what to call when unsent bytes pass it by more than one chunk and slack. */
    private readonly bound: { readonly bytes: number; readonly exceeded: (unsent: number, largest: number) => void },
    /** When, and with what evicted, a chunk is written now. */
    private readonly stamp: () => IdFrom,
  ) {}

  /** The hub has decided where the client starts: later writes are not its answer to the `Last-Event-ID`. */
  decided(): void {
    this.#deciding = false;
  }

  write(chunk: string, flushed?: (error?: Error | null) => void): boolean {
    if (this.closed || this.ended) return false;
    if (this.#deciding && this.firstWrite === undefined && !chunk.startsWith('retry:')) this.firstWrite = chunk;
    this.#pending.push({ chunk, read: 0, flushed, stamp: this.stamp() });
    this.#unsent += chunk.length;
    this.#largest = Math.max(this.#largest, chunk.length);
    // The bound, or one event larger than it, plus control frames (positions, heartbeats, a farewell).
    if (this.#unsent > Math.max(this.bound.bytes, this.#largest) + SLACK_BYTES) this.bound.exceeded(this.#unsent, this.#largest);
    return this.#unsent < 16_384;
  }

  get writableLength(): number {
    return this.#unsent;
  }

  end(): void {
    this.ended = true;
    if (this.#unsent === 0) this.close();
  }

  destroy(): void {
    this.close();
  }

  once(_event: 'close', listener: () => void): void {
    this.#listeners.push(listener);
  }

  /** The client reads up to `budget` bytes (callbacks run as chunks are read whole, and may write more). */
  read(budget: number): void {
    while (!this.closed && budget > 0 && this.#pending.length > 0) {
      const head = this.#pending[0]!;
      const take = Math.min(budget, head.chunk.length - head.read);
      const text = head.chunk.slice(head.read, head.read + take);
      head.read += take;
      this.#unsent -= take;
      budget -= take;
      if (head.read === head.chunk.length) this.#pending.shift();
      this.onText(text, head.stamp);
      if (head.read === head.chunk.length) head.flushed?.();
    }
    if (this.ended && this.#unsent === 0) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const pending = this.#pending;
    this.#pending = [];
    this.#unsent = 0;
    for (const p of pending) p.flushed?.(new Error('connection closed'));
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const l of listeners) l();
  }
}

/**
 * The `--sse on` variant: each host incarnation's Rx pipeline passes its batches through its own hub's
 * `broadcast()` (after the views: in snapshot mode the hub serves the host's view), and simulated browsers
 * connect, read fast or slowly, stall, go away and come back with their `Last-Event-ID`, to the same hub or,
 * when its host crashed, stopped or froze, to another host's. Draws only from its own PRNG (`sse.run`).
 *
 * A chain is what one browser sees from a connection with no position, a `reset` or a `snapshot-begin` on,
 * through every resume the hubs served from their buffers. Invariants, per chain:
 * - `sse-duplicate`: one change (`id@lsn`), or a change and the snapshot row at its LSN, received twice;
 * - `sse-order`: a document's changes (and rows) out of LSN order (a parent's change from one hub after its
 *   child's newer change from another is counted as `sse.lineageFills`: see {@link SimClient}); also a change
 *   older than a version of its document the hub was handed before, under a token where the browser stands at
 *   or past that version (its start: a `reset`'s or an `up-to-date`'s position, the id it resumed with, or the
 *   last id it got): it never received the newer one, but was told it has it (seed 1611);
 * - `sse-snapshot-behind` (at each `up-to-date`): a row older than its document's newest change at or below
 *   the positions `up-to-date` carries, or no row for it when that change is not a delete (nor followed by one) (in `latestVersion` mode, a version with a newer one written is passed
 *   over here and in `sse-gap`: the feed skips it);
 * - `sse-client-behind` (at quiescence, browsers calm, see {@link SimSse.settle});
 * - `sse-unbounded` (per connection): more unsent bytes than `maxBufferedBytes` (or one larger event) plus 4 KiB
 *   of control frames, as the hub promises a client never holds more of the server's memory;
 * - `sse-own-id-refused` (per resume, and once more per browser at quiescence: {@link SimClient.probeResume}): a
 *   running hub refuses an id its own frame carried, having evicted nothing since and with no re-read of its live
 *   at or after that frame (see {@link SimSse.checkOwnIdRefused});
 * - `sse-gap`: a change of partition P at LSN L received after the chain's last event id had P (along the
 *   lineage) at a position below L, while a change written to P between the two was not received, and the
 *   serving hub had read it before it published that change (it had it and did not send it), or the hub served a resume from another hub's id for
 *   P although it read P only from after that change (it vouched for a position it could not serve; in snapshot mode
 *   too, whatever the view held when the hub started).
 *   A hub promises what it read: a change its host never read, between two it did (the lease moved to another
 *   host and came back), is a hole in its own reading, counted as `sse.hostHoles`; one its host never read
 *   at all, under a position that came from its own view (snapshot mode: other hosts wrote it), is counted as
 *   `sse.unread`. A change the hub was handed under another lease token too, which the id holds at or past it
 *   (an EPK-range lease over part of a merged partition, then the partition's own lease re-reading it), is not
 *   owed: the hub published it once, where the browser stands past it (`sse.readUnderOther`). A zombie's hub (a
 *   host paused past its lease, then resumed) may send old changes, late: they still arrive in order and once
 *   per chain, and are checked as any other.
 */
export class SimSse {
  readonly #random: () => number;
  readonly #hubs: SimHub[] = [];
  readonly #clients: SimClient[] = [];
  readonly #ranges = new Map<string, FeedRange>();
  readonly #written = new Map<string, Map<number, string>>();
  /** Snapshots without a row of a document their positions hold (not a delete): judged at quiescence. */
  readonly #rowless: { readonly detail: string; readonly once: string; readonly id: string; readonly key: string }[] = [];
  #indexed = 0;
  readonly #settings: { readonly snapshot: boolean; readonly replayLimit: number; readonly maxBufferedBytes: number };
  #incarnation = 0;
  #chains = 0;
  readonly counts = new Map<string, number>();

  constructor(
    private readonly sim: Sim,
    private readonly world: World,
  ) {
    // Not `sse`: its first draw decides whether `--faults all` runs this variant at all (`drawVariant`).
    this.#random = sim.randomFor('sse.run');
    const r = this.#random;
    this.#settings = {
      snapshot: r() < 0.5,
      replayLimit: [20, 100, 1000][Math.floor(r() * 3)]!,
      maxBufferedBytes: [1_024, 4_096, 65_536][Math.floor(r() * 3)]!,
    };
    const n = 3 + Math.floor(r() * 4);
    const kinds: Kind[] = ['fast', 'slow', 'stalling', 'flaky'];
    for (let i = 0; i < n; i++) {
      const kind = kinds[i < kinds.length ? i : Math.floor(r() * kinds.length)]!;
      this.#clients.push(new SimClient(this, i, kind, sim.clock.now() + Math.floor(r() * 3_000)));
    }
  }

  count(name: string, n = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + n);
  }

  get random(): () => number {
    return this.#random;
  }

  get maxBufferedBytes(): number {
    return this.#settings.maxBufferedBytes;
  }

  get snapshotMode(): boolean {
    return this.#settings.snapshot;
  }

  /**
   * The hub's answer to a connection with `lastEventId`, once decided: at once (changes only) or once its start
   * positions are loaded (a reaction queued in `connect`, which runs before this one). A `snapshot-begin` or `reset`
   * first, with no resume counted, is a refusal (a restart after a replay counts the resume): checked when the id is
   * one of the hub's own (`own`).
   */
  async answered(client: SimClient, hub: SimHub, res: SimResponse, lastEventId: string, own: IdFrom | undefined): Promise<void> {
    if (this.snapshotMode) await Promise.resolve();
    res.decided();
    const resumed = this.resumedSince(hub);
    const first = res.firstWrite;
    if (resumed || !own || first === undefined || !/^event: (snapshot-begin|reset)$/m.test(first)) return;
    const reason = /"reason":"([a-z-]+)"/.exec(first)?.[1] ?? 'none';
    this.checkOwnIdRefused(client, hub, own, lastEventId, reason);
  }

  /** Whether `hub` served a resume from its buffer since the last call for it. */
  resumedSince(hub: SimHub): boolean {
    const now = hub.hub.stats().resumed;
    const before = this.#resumedMark.get(hub) ?? 0;
    this.#resumedMark.set(hub, now);
    return now > before;
  }

  readonly #resumedMark = new Map<SimHub, number>();

  get now(): number {
    return this.sim.clock.now();
  }

  newChain(): Chain {
    return { id: ++this.#chains, received: new Set(), newest: new Map(), newestFrom: new Map(), reached: new Map(), rows: new Map(), vouched: undefined };
  }

  /**
   * The hub step of one host incarnation's Rx pipeline (after the views, before `checkpointEvery`): records what
   * the host hands to the hub, then `broadcast()`.
   */
  operator(name: string, hostClock: HostClock, view: ViewStore<unknown>, host: () => SimHost | undefined): MonoTypeOperatorFunction<ChangeBatch<Doc>> {
    const { snapshot, replayLimit, maxBufferedBytes } = this.#settings;
    const hub = createSseHub<Doc, unknown>({
      streamId: `${name}-${++this.#incarnation}`,
      scheduler: hostClock,
      replayLimit,
      maxBufferedBytes,
      heartbeatMs: 1_000,
      closeGraceMs: 500,
      snapshotChunkRows: 20,
      ...(snapshot ? { view: this.#slowReads(view, hostClock) } : {}),
    });
    const entry: SimHub = { hub, host, read: new Map(), first: new Map(), inputs: [], handed: new Map(), rereads: new Map(), rereadLog: [], closed: false, dead: false };
    this.#hubs.push(entry);
    return pipe(
      tap((batch: ChangeBatch<Doc>) => {
        if (batch.range) this.#ranges.set(batch.partition, batch.range);
        this.#trackReread(entry, batch);
        let read = entry.read.get(batch.partition);
        if (!read) entry.read.set(batch.partition, (read = new Map()));
        for (const c of batch.changes) {
          if (!read.has(c.lsn)) read.set(c.lsn, entry.inputs.length);
          entry.first.set(batch.partition, Math.min(entry.first.get(batch.partition) ?? Infinity, c.lsn));
          entry.inputs.push({ token: batch.partition, id: c.id, lsn: c.lsn });
        }
      }),
      hub.broadcast(),
    );
  }

  /**
   * Keeps {@link SimHub.rereads}: a batch below what the hub was handed over its token's range under other tokens
   * opens one (or extends it); one that reaches its end closes it; its ownership ending here stops it being live
   * until a batch of a later ownership comes.
   */
  #trackReread(entry: SimHub, batch: ChangeBatch<Doc>): void {
    const token = batch.partition;
    const now = this.sim.clock.now();
    const reached = Math.max(batch.readLsn ?? -1, batch.lastLsn ?? -1);
    const range = this.#ranges.get(token);
    let over = -1;
    for (const [other, lsn] of entry.handed) if (other !== token && range !== undefined && overlaps(range, this.#ranges.get(other))) over = Math.max(over, lsn);
    let reread = entry.rereads.get(token);
    if (reread && reached >= reread.end) {
      const last = reread.live.at(-1);
      if (last && last.to === undefined) last.to = now;
      entry.rereads.delete(token);
      reread = undefined;
    }
    const first = batch.changes[0]?.lsn;
    if (first !== undefined && first <= over) {
      if (!reread) {
        entry.rereads.set(token, (reread = { end: over, live: [], signal: undefined }));
        entry.rereadLog.push(reread);
      }
      reread.end = Math.max(reread.end, over);
      this.count('sse.rereads');
    }
    if (reread) {
      const signal = batch.origin?.tracker.signal;
      const last = reread.live.at(-1);
      if (signal && !signal.aborted && signal !== reread.signal) {
        reread.signal = signal;
        if (!last || last.to !== undefined) reread.live.push({ from: now, to: undefined });
        const ended = reread;
        signal.addEventListener(
          'abort',
          () => {
            const open = ended.live.at(-1);
            if (ended.signal === signal && open && open.to === undefined) open.to = this.sim.clock.now();
          },
          { once: true },
        );
      } else if (!signal && !last) {
        reread.live.push({ from: now, to: undefined });
      }
    }
    entry.handed.set(token, Math.max(reached, entry.handed.get(token) ?? -1));
  }

  /**
   * `sse-own-id-refused`: a running hub refused a resume from an id one of its own frames carried, having pushed
   * nothing out of its buffer since, and no re-read of its could still reach its end on this host in between (one
   * that reached it, or was read on, may have skipped what the id lacks): everything after the id is in its buffer.
   */
  checkOwnIdRefused(client: SimClient, hub: SimHub, from: IdFrom, lastEventId: string, reason: string): void {
    this.count('sse.ownIdRefused');
    const now = this.sim.clock.now();
    if (evictedBy(hub.hub) !== from.evicted) return this.count('sse.ownIdRefused.evicted');
    if (hub.rereadLog.some((r) => r.live.some((l) => l.to === undefined || l.to >= from.atMs))) return this.count('sse.ownIdRefused.rereading');
    const held = [...hub.rereads].map(([token, r]) => `${token} up to ${r.end}`).join(', ') || 'none';
    this.sim.violations.report(
      'sse-own-id-refused',
      `client ${client.name} resumed at ${hub.hub.streamId} with ${lastEventId}, which it sent ${now - from.atMs} ms before, and was refused (${reason}) with nothing evicted since (re-reads open: ${held})`,
      `ownid:${hub.hub.streamId}`,
    );
  }

  /**
   * The view as the hub reads it for snapshots: positions and rows take a while (0–100 ms, 0–400 ms: a large
   * view), so that writes land between the two reads and the rows run ahead of the positions.
   */
  #slowReads(view: ViewStore<unknown>, hostClock: HostClock): ViewStore<unknown> {
    const wait = (ms: number) => firstValueFrom(timer(Math.floor(this.#random() * ms), hostClock));
    return {
      ...view,
      description: view.description,
      positions: async () => {
        await wait(100);
        return view.positions();
      },
      rows: async () => {
        await wait(400);
        return view.rows();
      },
    };
  }

  /** Hubs whose host runs (not paused, crashed or stopping). */
  liveHubs(): SimHub[] {
    return this.#hubs.filter((h) => {
      const host = h.host();
      return !h.closed && !h.dead && host !== undefined && host.clock.state === 'running' && host.stopCalledAt === undefined;
    });
  }

  /** One tick: hubs of crashed hosts lose their connections, stopped hosts close theirs; clients act. */
  tick(): void {
    for (const h of this.#hubs) {
      const host = h.host();
      if (!h.dead && host?.clock.state === 'dead') {
        h.dead = true;
        this.count('sse.hostCrashes');
        for (const c of this.#clients) if (c.hub === h) c.cut();
      } else if (!h.closed && !h.dead && host?.stopped) {
        h.closed = true;
        h.hub.close();
      }
    }
    for (const c of this.#clients) c.tick();
  }

  /**
   * At quiescence, before the hosts stop: browsers turn calm (they read everything, stay connected) and come
   * back; after a while every browser connected to a running host's hub must hold every change that hub was
   * handed since it connected, past the position it started from (`sse-client-behind`).
   */
  async settle(advance: (ms: number) => Promise<void>): Promise<void> {
    this.calm = true;
    await advance(SETTLE_MS);
    for (const r of this.#rowless) {
      const { key } = r;
      if (this.world.leftOut(key) || this.world.excused(key) || this.world.isBeforeStart(key) || this.#superseded(key) || this.#deletedAfter(r.id, key)) continue;
      this.sim.violations.report('sse-snapshot-behind', r.detail, r.once);
    }
    const live = new Set(this.liveHubs());
    for (const c of this.#clients) c.checkCaughtUp(live);
    for (const c of this.#clients) await c.probeResume(live);
  }

  /** Set at quiescence: no disconnects, stalls or slow reads any more. */
  calm = false;

  get ranges(): ReadonlyMap<string, FeedRange> {
    return this.#ranges;
  }

  /** The gap check of one change event (see the class's doc). */
  checkGap(client: SimClient, chain: Chain, hub: SimHub, token: string, lsn: number, before: string): void {
    const positions = parseEventId(before)?.positions;
    if (!positions) return;
    const from = standsAt(token, positions, this.#ranges);
    if (from === undefined || lsn - from <= 1) return;
    this.#index();
    const written = this.#written.get(token);
    if (!written) return;
    const vouched = chain.vouched?.hub === hub ? markOf(token, chain.vouched.positions, this.#ranges) : undefined;
    // What the hub had read of the partition when it took the resume: it started after the position, it must reset.
    const readAtResume = chain.vouched?.hub === hub ? chain.vouched.first.get(token) : undefined;
    for (let l = from + 1; l < lsn; l++) {
      const key = written.get(l);
      if (key === undefined || chain.received.has(key)) continue;
      const id = key.slice(0, key.lastIndexOf('@'));
      if ((chain.rows.get(id) ?? -1) >= l) continue;
      if (this.world.leftOut(key) || this.world.excused(key) || this.world.isBeforeStart(key) || this.#superseded(key)) continue;
      // The chain holds a newer version of the document (received before, under another token: a range read again
      // after an admin reset brings back versions older than the one the hub published), or stands past one the
      // hub was handed before under a token the id holds at or past it (a `reset` at the hub's position after
      // the hub published it; seeds 1713, 1539, 1507): the hub keeps each document in order, and does not send
      // the older one after it.
      const readAtLsn = hub.read.get(token)?.get(lsn) ?? Infinity;
      if ((chain.newest.get(id) ?? -1) > l || this.#newerStoodPast(hub, id, l, readAtLsn, positions)) {
        this.count('sse.olderVersion');
        continue;
      }
      // The hub was handed this change under another lease token too (an EPK-range lease over part of a merged
      // partition, then the partition's own lease re-reading it), and the id holds that token at or past it: the
      // browser stands past the change where the hub published it (it received it there, or started after it at
      // the hub's position); the hub does not send it again for the re-read (it still holds it).
      if (this.#publishedUnderOther(hub, token, key, l, positions)) {
        this.count('sse.readUnderOther');
        continue;
      }
      // Read before the hub published the change received (a change read only after it, as a re-read below the
      // hub's position after an admin reset, is a hole in the reading when the change went out).
      const readAt = hub.read.get(token)?.get(l);
      const read = readAt !== undefined && readAt < (hub.read.get(token)?.get(lsn) ?? Infinity);
      // The hub read this partition, or one of its lineage (a range over it), below the change: a hole in its reading.
      const range = this.#ranges.get(token);
      const readBelow = [...hub.first].some(([u, first]) => first < l && (u === token || (range !== undefined && overlaps(range, this.#ranges.get(u)))));
      if (read) {
        this.sim.violations.report('sse-gap', `client ${client.name} (chain ${chain.id}) got ${token}@${lsn} from ${hub.hub.streamId} after position ${from} without ${key}, which that hub read`, `gap:${client.name}:${chain.id}:${token}`);
      } else if (readBelow) {
        this.count('sse.hostHoles');
        // In snapshot mode too: the view's positions when the hub started do not say where its reading of a partition
        // began (seeds 6030, 6146: it first read the partition well past them; another process's id in between was replayed).
      } else if (vouched !== undefined && vouched < l && readAtResume !== undefined && readAtResume > l) {
        this.sim.violations.report('sse-gap', `client ${client.name} (chain ${chain.id}) resumed at ${hub.hub.streamId} from another hub's position ${token}:${vouched} and got ${token}@${lsn} without ${key}: that hub had read ${token} only from ${readAtResume}`, `gap:${client.name}:${chain.id}:${token}`);
      } else {
        this.count('sse.unread');
      }
      return;
    }
  }

  /**
   * Whether `hub` was handed a version of document `id` newer than `lsn`, before its input numbered `before`, under a
   * token where `positions` stand at or past that version (along lineage, as {@link standsAt} reads them).
   */
  #newerStoodPast(hub: SimHub, id: string, lsn: number, before: number, positions: ReadonlyMap<string, number>): boolean {
    return hub.inputs.some((c, i) => i < before && c.id === id && c.lsn > lsn && (standsAt(c.token, positions, this.#ranges) ?? -1) >= c.lsn);
  }

  /** Whether `hub` was handed `key` (at `lsn`) under a token other than `token` that `positions` hold at or past `lsn`. */
  #publishedUnderOther(hub: SimHub, token: string, key: string, lsn: number, positions: ReadonlyMap<string, number>): boolean {
    return hub.inputs.some((c) => c.lsn === lsn && c.token !== token && `${c.id}@${c.lsn}` === key && (markOf(c.token, positions, this.#ranges) ?? -1) >= lsn);
  }

  /**
   * `sse-snapshot-behind`: a row of the snapshot a chain just got is older than its document's newest change at
   * or below the `up-to-date` positions (in the partition the change was written to): the rows must reflect at
   * least the positions, or the changes between are never sent. A newest change that is poison (never in the
   * view), behind a halted partition or written before the start is passed over (under `'now'`, an admin reset
   * pins the new leases at a later "now": the view's positions jump over what was written before, owed to no one).
   */
  checkSnapshot(client: SimClient, chain: Chain, hub: SimHub, positions: ReadonlyMap<string, number>): void {
    this.#index();
    for (const [token, upTo] of positions) {
      const newest = new Map<string, number>();
      for (const [lsn, key] of this.#written.get(token) ?? []) {
        if (lsn > upTo) continue;
        const id = key.slice(0, key.lastIndexOf('@'));
        if (lsn > (newest.get(id) ?? -1)) newest.set(id, lsn);
      }
      for (const [id, lsn] of newest) {
        const row = chain.rows.get(id);
        const key = `${id}@${lsn}`;
        if ((row ?? -1) >= lsn || this.world.leftOut(key) || this.world.excused(key) || this.world.isBeforeStart(key) || this.#superseded(key)) continue;
        // No row: right for a delete, or when a later delete of the document removed it (rows may run ahead of
        // the positions); otherwise the view lacks a document the positions say it holds. Judged at quiescence,
        // when what is owed is known (a later version, a lease pinned at a later "now", a halt).
        if (row === undefined) {
          if (!this.world.deletes.has(key)) this.#rowless.push({ detail: `client ${client.name} (chain ${chain.id}): the snapshot of ${hub.hub.streamId} has no row of ${id} under up-to-date ${token}:${upTo}, which holds ${key}`, once: `snapbehind:${client.name}:${chain.id}`, id, key });
          continue;
        }
        this.sim.violations.report('sse-snapshot-behind', `client ${client.name} (chain ${chain.id}): the snapshot of ${hub.hub.streamId} has ${id}@${row} under up-to-date ${token}:${upTo}, which holds ${key}`, `snapbehind:${client.name}:${chain.id}`);
        return;
      }
    }
  }

  /**
   * Whether document `id` was deleted after its change `key` (in any partition: a document's LSNs grow along its
   * partitions' lineage; writes before the start share one instant).
   */
  #deletedAfter(id: string, key: string): boolean {
    const lsn = Number(key.slice(key.lastIndexOf('@') + 1));
    for (const d of this.world.deletes) if (d.startsWith(`${id}@`) && Number(d.slice(d.lastIndexOf('@') + 1)) > lsn) return true;
    return false;
  }

  /** In `latestVersion` mode, a version with a newer one written may never be read: the feed skips it. */
  #superseded(key: string): boolean {
    return this.world.mode === 'latestVersion' && this.world.latestKey.get(key.slice(0, key.lastIndexOf('@'))) !== key;
  }

  #index(): void {
    if (this.world.writtenTo.size === this.#indexed) return;
    let i = 0;
    for (const [key, partition] of this.world.writtenTo) {
      if (i++ < this.#indexed) continue;
      let m = this.#written.get(partition);
      if (!m) this.#written.set(partition, (m = new Map()));
      m.set(Number(key.slice(key.lastIndexOf('@') + 1)), key);
    }
    this.#indexed = this.world.writtenTo.size;
  }

  report(invariant: string, detail: string, once: string): void {
    this.sim.violations.report(invariant, detail, once);
  }

  /** At the end: the hubs' and the clients' counters into the run's stats. */
  finish(): void {
    for (const h of this.#hubs) {
      const s = h.hub.stats();
      this.count('sse.hub.slowDrops', s.dropped['slow-client']);
      this.count('sse.hub.viewErrors', s.dropped['view-error']);
      this.count('sse.hub.resets', s.resets);
      this.count('sse.hub.resumed', s.resumed);
      this.count('sse.hub.snapshots', s.snapshots);
    }
    if (this.#settings.snapshot) this.count('sse.snapshotMode');
    for (const [name, n] of this.counts) for (let i = 0; i < n; i++) this.sim.tally(name);
  }
}

/** One simulated browser (an `EventSource`): its behaviour, connection, parser and chain. */
class SimClient {
  hub: SimHub | undefined;
  #res: SimResponse | undefined;
  #chain: Chain;
  /** The browser's last event id (kept across connections, as `EventSource` keeps it). */
  #lastEventId = '';
  /** Where {@link SimClient.#lastEventId} came from (`undefined` for an empty one). */
  #idFrom: IdFrom | undefined;
  #buffer = '';
  #reconnectAt: number;
  #stalledUntil = 0;
  readonly #budget: number;
  readonly name: string;
  /** The hub's input count when this connection began, the position the browser started from, and when. */
  #since = { input: 0, atMs: 0 };
  #baseline: ReadonlyMap<string, number> = new Map();

  constructor(
    private readonly sse: SimSse,
    index: number,
    private readonly kind: Kind,
    firstAt: number,
  ) {
    this.name = `c${index}:${kind}`;
    this.#reconnectAt = firstAt;
    this.#chain = sse.newChain();
    this.#budget = kind === 'slow' ? 200 + Math.floor(sse.random() * 1_500) : Infinity;
  }

  tick(): void {
    const { sse } = this;
    const r = sse.random;
    if (!this.#res) {
      if (sse.now >= this.#reconnectAt) this.#connect();
      return;
    }
    if (sse.calm) {
      this.#res.read(Infinity);
      return;
    }
    const host = this.hub?.host();
    // A frozen server: the browser gives up on the connection after a while and tries another server.
    if (host?.clock.state === 'paused' && r() < 0.05) {
      sse.count('sse.abandoned');
      this.cut();
      return;
    }
    if (this.kind === 'flaky' && r() < 0.02) {
      sse.count('sse.disconnects');
      this.cut();
      return;
    }
    if (this.kind === 'stalling' && sse.now >= this.#stalledUntil && r() < 0.02) {
      this.#stalledUntil = sse.now + 1_000 + Math.floor(r() * 4_000);
      sse.count('sse.stalls');
    }
    if (sse.now < this.#stalledUntil) return;
    this.#res.read(this.#budget);
  }

  /** `sse-client-behind` (see {@link SimSse.settle}): only for a connection to one of `live`. */
  checkCaughtUp(live: ReadonlySet<SimHub>): void {
    const hub = this.hub;
    if (!this.#res || !hub || !live.has(hub)) return;
    const chain = this.#chain;
    const ranges = this.sse.ranges;
    // Where the browser stands: the position it started from, the id it holds now and the changes it received
    // (ids are withheld while rows read ahead of a snapshot's positions are pending). The hub owes it what it was
    // handed past that; a re-read below it (a rewind re-reading a hole in the hub's own reading too) is not owed.
    // Along lineage as the hub reads it: the furthest of a token's own mark and what the other tokens over its range
    // hold (a snapshot's positions hold a split parent at 137, the ids sent since hold its child at the hub's
    // position, 76: the child's re-read up to 137, deletes with no row included, is in the snapshot; seed 1888).
    const at = new Map(this.#baseline);
    for (const [token, lsn] of [...(parseEventId(this.#lastEventId)?.positions ?? []), ...chain.reached]) at.set(token, Math.max(lsn, at.get(token) ?? -1));
    const stands = (token: string) => standsAt(token, at, ranges) ?? -1;
    // Passed over only by what the other tokens over its range hold, past the token's own mark (`sse.inheritedPast`).
    const pastOwn = (c: { token: string; lsn: number }) => {
      const past = c.lsn > (at.get(c.token) ?? Infinity) && c.lsn <= stands(c.token);
      if (past) this.sse.count('sse.inheritedPast');
      return past;
    };
    // A change the hub was handed under another token before, which the browser stands at or past (an EPK-range
    // lease over part of a merged partition, then the partition's own lease re-reading it after an admin reset), is
    // not owed again: the hub published it once, under the first token (as in `sse-gap`, `sse.readUnderOther`).
    const underOther = (c: { token: string; id: string; lsn: number }, index: number) => {
      const other = hub.inputs.some((o, i) => i < index && o.lsn === c.lsn && o.id === c.id && o.token !== c.token && stands(o.token) >= c.lsn);
      if (other) this.sse.count('sse.readUnderOther');
      return other;
    };
    // An older version of a document the browser stands past a newer version of, handed to the hub before under a
    // token the browser stands at or past (a `reset` at the hub's position after it published it), is not owed: the
    // hub never sends a document's older version after a newer one it holds (as in `sse-gap`, `sse.olderVersion`).
    const newerPast = (c: { id: string; lsn: number }, index: number) => {
      const newer = hub.inputs.some((o, i) => i < index && o.id === c.id && o.lsn > c.lsn && stands(o.token) >= o.lsn);
      if (newer) this.sse.count('sse.olderVersion');
      return newer;
    };
    const behind = hub.inputs
      .map((c, index) => ({ c, index }))
      .slice(this.#since.input)
      .filter(({ c, index }) => !chain.received.has(`${c.id}@${c.lsn}`) && (chain.newest.get(c.id) ?? -1) < c.lsn && !pastOwn(c) && c.lsn > stands(c.token) && !underOther(c, index) && !newerPast(c, index))
      .map(({ c }) => c);
    if (behind.length > 0) {
      const e = behind.slice(0, 3).map((c) => `${c.id}@${c.lsn} (${c.token})`).join(', ');
      this.sse.report('sse-client-behind', `client ${this.name} connected to ${hub.hub.streamId} since ${this.#since.atMs - EPOCH_MS} ms lacks ${behind.length} changes the hub was handed since, e.g. ${e}`, `behind:${this.name}`);
    }
  }

  /** The connection ends from the client's side (or the server's process is gone): unread bytes are lost. */
  cut(): void {
    this.#res?.close();
  }

  #connect(): void {
    const { sse } = this;
    const live = sse.liveHubs();
    if (live.length === 0) {
      this.#reconnectAt = sse.now + 500;
      return;
    }
    const target = this.hub && live.includes(this.hub) ? this.hub : live[Math.floor(sse.random() * live.length)]!;
    if (this.hub && target !== this.hub) sse.count('sse.failovers');
    const res = new SimResponse(
      (text, stamp) => this.#onText(target, text, stamp),
      {
        bytes: sse.maxBufferedBytes,
        exceeded: (unsent, largest) =>
          sse.report('sse-unbounded', `client ${this.name} at ${target.hub.streamId}: ${unsent} bytes unsent, bound ${sse.maxBufferedBytes} (largest event ${largest})`, `unbounded:${this.name}:${target.hub.streamId}`),
      },
      () => ({ hub: target, atMs: sse.now, evicted: evictedBy(target.hub) }),
    );
    this.#res = res;
    this.hub = target;
    this.#buffer = '';
    res.once('close', () => {
      if (this.#res !== res) return;
      this.#res = undefined;
      // `retry:` 1000 ms, as the hub tells browsers, plus some jitter of the network.
      this.#reconnectAt = sse.now + 1_000 + Math.floor(sse.random() * 500);
    });
    const lastEventId = this.#lastEventId;
    this.#since = { input: target.inputs.length, atMs: sse.now };
    // Where it starts: its own id, or (a first connection without a view) the hub's position now.
    this.#baseline = parseEventId(lastEventId === '' ? target.hub.lastEventId : lastEventId)?.positions ?? new Map();
    if (lastEventId === '') {
      sse.count('sse.connects');
      this.#chain = sse.newChain();
    } else {
      sse.count('sse.resumes');
      const position = parseEventId(lastEventId);
      if (position && position.stream !== target.hub.streamId) this.#chain.vouched = { hub: target, positions: position.positions, first: new Map(target.first) };
    }
    // An id one of this hub's own frames carried (`sse-own-id-refused`).
    const own = lastEventId !== '' && this.#idFrom?.hub === target && parseEventId(lastEventId)?.stream === target.hub.streamId ? this.#idFrom : undefined;
    sse.resumedSince(target);
    try {
      target.hub.connect(res, lastEventId === '' ? {} : { lastEventId });
    } catch {
      // A hub closed meanwhile refuses: try again later.
      this.#res = undefined;
      this.#reconnectAt = sse.now + 500;
      return;
    }
    void sse.answered(this, target, res, lastEventId, own);
  }

  /**
   * At quiescence, a browser connected to a running hub comes back once more with its id, in another tab (its chain
   * and connection go on): the hub must resume it, unless it lost something since (`sse-own-id-refused`).
   */
  async probeResume(live: ReadonlySet<SimHub>): Promise<void> {
    const { sse } = this;
    const hub = this.hub;
    const id = this.#lastEventId;
    const own = this.#idFrom;
    if (!this.#res || !hub || !live.has(hub) || id === '' || own?.hub !== hub || parseEventId(id)?.stream !== hub.hub.streamId) return;
    sse.count('sse.probes');
    const res = new SimResponse(() => undefined, { bytes: Infinity, exceeded: () => undefined }, () => ({ hub, atMs: sse.now, evicted: evictedBy(hub.hub) }));
    sse.resumedSince(hub);
    hub.hub.connect(res, { lastEventId: id });
    await sse.answered(this, hub, res, id, own);
    res.close();
  }

  /** Parses what was read, frame by frame, as `EventSource` does (`stamp`: when the hub wrote the text). */
  #onText(hub: SimHub, text: string, stamp: IdFrom): void {
    this.#buffer += text;
    let end: number;
    while ((end = this.#buffer.indexOf('\n\n')) >= 0) {
      const frame = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      let type = 'message';
      let id: string | undefined;
      const data: string[] = [];
      for (const line of frame.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') type = value;
        else if (field === 'id') id = value;
        else if (field === 'data') data.push(value);
      }
      const before = this.#lastEventId;
      if (id !== undefined) {
        this.#lastEventId = id;
        this.#idFrom = id === '' ? undefined : stamp;
      }
      if (data.length > 0) this.#event(hub, type, data.join('\n'), before);
    }
  }

  #event(hub: SimHub, type: string, data: string, before: string): void {
    const { sse } = this;
    if (type === 'snapshot-begin' || type === 'reset') {
      this.#chain = sse.newChain();
      // A reset starts the browser at the hub's position (its id); a snapshot at its up-to-date's positions.
      this.#baseline = parseEventId(type === 'reset' ? this.#lastEventId : '')?.positions ?? new Map();
      sse.count(type === 'reset' ? 'sse.resets' : 'sse.snapshots');
      return;
    }
    if (type === 'dropped') {
      const { reason } = JSON.parse(data) as { reason: string };
      sse.count(reason === 'slow-client' ? 'sse.slowDrops' : `sse.dropped.${reason}`);
      return;
    }
    if (type === 'snapshot') {
      for (const row of JSON.parse(data) as { id: string; lsn: number }[]) this.#receive(`row ${row.id}`, row.id, row.lsn, undefined, hub.hub.streamId);
      return;
    }
    if (type === 'up-to-date') {
      const { positions } = JSON.parse(data) as { positions: Record<string, number> };
      this.#baseline = new Map(Object.entries(positions));
      sse.checkSnapshot(this, this.#chain, hub, this.#baseline);
      return;
    }
    if (type !== 'message') return;
    const change = JSON.parse(data) as { id: string; lsn: number; partition: string };
    sse.count('sse.changes');
    sse.checkGap(this, this.#chain, hub, change.partition, change.lsn, before);
    this.#checkStoodPast(hub, change, before);
    this.#receive(`${change.partition}@${change.lsn} from ${hub.hub.streamId}${hub.host()?.everPaused ? ', a zombie' : ''}`, change.id, change.lsn, change.partition, hub.hub.streamId);
  }

  /**
   * `sse-order` for a change the chain has no newer version of: the hub was handed a newer version before it read
   * this one, under a token where the browser stands at or past it (the position it started from, or the id it held
   * before the event, read along lineage as the hub does): the browser is told it has the newer version, then
   * sent an older one (seed 1611: a `reset` at the hub's position past d29@67, then merged 8's re-read of d29@15).
   */
  #checkStoodPast(hub: SimHub, change: { id: string; lsn: number; partition: string }, before: string): void {
    const at = new Map(this.#baseline);
    for (const [token, lsn] of parseEventId(before)?.positions ?? []) at.set(token, Math.max(lsn, at.get(token) ?? -1));
    const readAt = hub.read.get(change.partition)?.get(change.lsn) ?? Infinity;
    const ranges = this.sse.ranges;
    const newer = hub.inputs.find((o, i) => i < readAt && o.id === change.id && o.lsn > change.lsn && (standsAt(o.token, at, ranges) ?? -1) >= o.lsn);
    if (!newer || (this.#chain.newest.get(change.id) ?? -1) > change.lsn) return;
    this.sse.report(
      'sse-order',
      `client ${this.name} (chain ${this.#chain.id}) received ${change.id}@${change.lsn} (${change.partition} from ${hub.hub.streamId}) standing past ${newer.id}@${newer.lsn} (${newer.token}), which that hub was handed before`,
      `order:${this.name}:${change.id}`,
    );
  }

  /** Records a change (`token`) or a snapshot row (no token) of document `id` at `lsn`, from hub `stream`. */
  #receive(what: string, id: string, lsn: number, token: string | undefined, stream: string): void {
    const chain = this.#chain;
    const key = `${id}@${lsn}`;
    const newest = chain.newest.get(id);
    const from = chain.newestFrom.get(id);
    if (chain.received.has(key) || newest === lsn) {
      this.sse.report('sse-duplicate', `client ${this.name} (chain ${chain.id}) received ${key} twice (${what}; newest before: ${from?.what})`, `dup:${this.name}:${key}`);
    } else if (newest !== undefined && lsn < newest) {
      // A parent's change from one hub after its child's newer change from another: the first hub's reading
      // jumped over part of the parent (its host read the child from a checkpoint another host moved), and the
      // second hub fills that in from the client's parent position. Counted; disorder within one partition, or
      // from one hub, is not.
      if (token !== undefined && from?.token !== undefined && from.token !== token && from.stream !== stream) this.sse.count('sse.lineageFills');
      else this.sse.report('sse-order', `client ${this.name} (chain ${chain.id}) received ${key} (${what}) after ${id}@${newest} (${from?.what})`, `order:${this.name}:${id}`);
    }
    chain.received.add(key);
    if (lsn > (newest ?? -1)) {
      chain.newest.set(id, lsn);
      chain.newestFrom.set(id, { what, token, stream });
    }
    if (token === undefined) chain.rows.set(id, lsn);
    else chain.reached.set(token, Math.max(lsn, chain.reached.get(token) ?? -1));
  }

}
