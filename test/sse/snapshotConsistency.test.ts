import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { LiveView, type EventSourceLike } from '../../src/sse/client/index.js';
import { createSseHub, type SseHub } from '../../src/sse/index.js';
import { SseParser } from '../support/sseParser.js';
import { FakeResponse } from './fakeResponse.js';
import { MiniFeed, settle, type Row } from './snapshotFeed.js';

/** mulberry32 */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A page with one LiveView across reconnections: its EventSource keeps the last event id, as browsers do. */
class Browser {
  readonly parser = new SseParser();
  readonly view: LiveView<Row>;
  res: FakeResponse | undefined;
  #listeners = new Map<string, ((event: { data: string; lastEventId: string }) => void)[]>();
  #seen = 0;

  constructor() {
    const source: EventSourceLike = {
      addEventListener: (type, listener) => this.#listeners.set(type, [...(this.#listeners.get(type) ?? []), listener]),
      close: () => undefined,
    };
    this.view = new LiveView<Row>(source);
  }

  connect(hub: SseHub<Row, Row>): void {
    this.res = new FakeResponse(this.parser);
    hub.connect(this.res, { lastEventId: this.parser.lastEventId || undefined });
  }

  sync(): void {
    for (; this.#seen < this.parser.events.length; this.#seen++) {
      const event = this.parser.events[this.#seen]!;
      for (const listener of this.#listeners.get(event.type) ?? []) listener(event);
    }
    // A dropped stream is reconnected by the EventSource.
    if (this.res && (this.res.ended || this.res.destroyed) && !this.res.stalled) this.res = undefined;
  }
}

describe('snapshot mode under random writes, splits, cuts, stalls and server restarts', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`seed ${seed}: every page ends equal to the view, and no change is applied twice`, async () => {
      const random = seeded(seed);
      const feed = new MiniFeed();
      const newHub = (n: number) => {
        const hub = createSseHub<Row, Row>({ streamId: `run${n}`, scheduler: new VirtualTimeScheduler(), view: feed.view, project: (c) => c.document, replayLimit: 40, maxBufferedBytes: 2_000, snapshotChunkRows: 7 });
        feed.hub = hub;
        return hub;
      };
      let restarts = 0;
      let hub = newHub(restarts);
      const browsers = Array.from({ length: 6 }, () => new Browser());
      const keys = Array.from({ length: 60 }, (_, i) => `k${i}`);
      const pick = <X>(list: readonly X[]) => list[Math.floor(random() * list.length)]!;
      for (let step = 0; step < 600; step++) {
        const r = random();
        if (r < 0.6) await feed.write(pick(keys), { v: step });
        else if (r < 0.7) await feed.write(pick(keys), undefined);
        else if (r < 0.8) {
          const b = pick(browsers);
          if (!b.res) b.connect(hub);
          else if (random() < 0.5) {
            b.res.disconnect(); // the network cut it; the EventSource reconnects later
            b.res = undefined;
          }
          else if (b.res.stalled) b.res.resume();
          else b.res.stalled = true;
        } else if (r < 0.83) {
          await feed.split(pick([...feed.partitions.keys()]), 1 + Math.floor(random() * 6));
        } else if (r < 0.84) {
          // A server restart: every connection is cut; the feed re-reads a little from its checkpoints.
          hub.close();
          hub = newHub(++restarts);
          for (const p of feed.partitions.values()) await feed.deliver(p, p.log.slice(-1 - Math.floor(random() * 4)));
        } else {
          await settle(1);
        }
        for (const b of browsers) b.sync();
      }
      // Every page reads again (and reconnects if it was cut), until all are quiet.
      for (let i = 0; i < 20; i++) {
        for (const b of browsers) {
          if (b.res?.stalled) b.res.resume();
          b.sync();
          if (!b.res) b.connect(hub);
        }
        await settle(2);
      }
      for (const b of browsers) b.sync();
      const expected = Object.fromEntries((await feed.view.rows()).map((row) => [row.key, row.row]));
      for (const b of browsers) {
        expect(b.view.stats.stale).toBe(0);
        expect(Object.fromEntries(b.view.rows)).toEqual(expected);
      }
    });
  }
});
