import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import type { Change } from '../../src/core/Change.js';
import type { FeedRange } from '../../src/core/Partition.js';
import { MemoryViewStore } from '../../src/sinks/MemoryViewStore.js';
import type { ViewStore } from '../../src/sinks/ViewStore.js';
import { LiveView, type EventSourceLike } from '../../src/sse/client/index.js';
import type { SseHub } from '../../src/sse/index.js';
import type { FakeResponse } from './fakeResponse.js';

export interface Row {
  v: number;
}

interface Partition {
  readonly token: string;
  readonly range: FeedRange;
  readonly epoch: number;
  lsn: number;
  readonly log: Change<Row>[];
}

const hex = (n: number) => n.toString(16).toUpperCase().padStart(2, '0');

/** Where a key lives: a stable two-hex-digit hash, as an effective partition key. */
function epkOf(key: string): string {
  let h = 7;
  for (const ch of key) h = (h * 31 + ch.charCodeAt(0)) % 255;
  return hex(h);
}

/**
 * A change feed pipeline in miniature, run by hand: partitions with key ranges and LSNs that continue along
 * splits, each batch written to a real view store (guarded) and then published to the hub, as
 * `materializeToView(view)` followed by `hub.broadcast()` does. A split child re-reads the end of its parent's
 * log, as a child started at its parent's checkpoint does.
 */
export class MiniFeed {
  readonly view = new MemoryViewStore<Row>();
  hub: SseHub<Row, Row> | undefined;
  readonly partitions = new Map<string, Partition>();
  #nextToken = 1;
  #clock = 0;

  constructor() {
    this.partitions.set('0', { token: '0', range: { minInclusive: '', maxExclusive: 'FF' }, epoch: 1, lsn: 0, log: [] });
  }

  partitionOf(key: string): Partition {
    const epk = epkOf(key);
    for (const p of this.partitions.values()) if (p.range.minInclusive <= epk && epk < p.range.maxExclusive) return p;
    throw new Error(`no partition for ${key}`);
  }

  /** Writes (or deletes, with `undefined`) a document; the pipeline delivers it. */
  async write(key: string, row: Row | undefined): Promise<void> {
    const p = this.partitionOf(key);
    const change: Change<Row> = { id: key, operation: row ? 'upsert' : 'delete', document: row, lsn: ++p.lsn, timestampMs: ++this.#clock };
    p.log.push(change);
    await this.deliver(p, [change]);
  }

  async deliver(p: Partition, changes: readonly Change<Row>[]): Promise<void> {
    const lsn = changes.at(-1)?.lsn ?? p.lsn;
    await this.view.write({
      mode: 'guarded',
      changes: changes.map((c) => ({ key: c.id, row: c.document, lsn: c.lsn, timestampMs: c.timestampMs, partition: p.token })),
      partitions: [{ partition: p.token, epoch: p.epoch, position: `p${lsn}`, lsn, range: p.range }],
    });
    this.hub?.publish(new ChangeBatch({ partition: p.token, changes, position: `p${lsn}`, range: p.range, epoch: p.epoch }));
  }

  /** Splits a partition; each child re-reads the parent's last `reread` changes in its range. */
  async split(token: string, reread = 3): Promise<[Partition, Partition]> {
    const parent = this.partitions.get(token)!;
    const { minInclusive: min, maxExclusive: max } = parent.range;
    const lo = min === '' ? 0 : parseInt(min, 16);
    const hi = parseInt(max, 16);
    if (hi - lo < 2) return [parent, parent];
    const mid = hex(Math.floor((lo + hi) / 2));
    this.partitions.delete(token);
    const children = [
      { minInclusive: min, maxExclusive: mid },
      { minInclusive: mid, maxExclusive: max },
    ].map((range): Partition => {
      const inRange = (c: Change<Row>) => range.minInclusive <= epkOf(c.id) && epkOf(c.id) < range.maxExclusive;
      const child = { token: String(this.#nextToken++), range, epoch: parent.epoch + 1, lsn: parent.lsn, log: parent.log.filter(inRange) };
      this.partitions.set(child.token, child);
      return child;
    }) as [Partition, Partition];
    const from = parent.log.at(-reread)?.lsn ?? 0;
    for (const child of children) await this.deliver(child, child.log.filter((c) => c.lsn >= from));
    return children;
  }
}

/** A view whose `rows()` first lets `meanwhile` run: writes that land between the snapshot's two reads. */
export function withWritesDuringRead<R>(view: ViewStore<R>, meanwhile: () => Promise<void>): ViewStore<R> {
  let once = false;
  return {
    get description() {
      return view.description;
    },
    write: (w) => view.write(w),
    get: (key) => view.get(key),
    rows: async () => {
      if (!once) {
        once = true;
        await meanwhile();
      }
      return view.rows();
    },
    positions: () => view.positions(),
    pruneTombstones: (before) => view.pruneTombstones(before),
    clearPositions: () => view.clearPositions(),
    close: () => view.close(),
  };
}

/** A {@link LiveView} fed, on each `sync()`, with what a fake response has received since. */
export function liveViewOf<D>(res: FakeResponse): { view: LiveView<D>; sync: () => LiveView<D> } {
  const listeners = new Map<string, ((event: { data: string; lastEventId: string }) => void)[]>();
  const source: EventSourceLike = {
    addEventListener: (type, listener) => listeners.set(type, [...(listeners.get(type) ?? []), listener]),
    close: () => undefined,
  };
  const view = new LiveView<D>(source);
  let seen = 0;
  return {
    view,
    sync: () => {
      for (; seen < res.events.length; seen++) {
        const event = res.events[seen]!;
        for (const listener of listeners.get(event.type) ?? []) listener(event);
      }
      return view;
    },
  };
}

/** Lets pending promise callbacks and one event-loop turn run (no timers). */
export async function settle(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}
