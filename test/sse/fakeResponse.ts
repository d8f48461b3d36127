import type { SseResponse } from '../../src/sse/index.js';
import { SseParser } from '../support/sseParser.js';

/**
 * A response a test controls: a reading client parses what it gets at once; a stalled one keeps every byte
 * unsent, as a socket whose reader stopped does (`writableLength` grows) until `resume()` reads it (then each
 * write's callback runs).
 */
export class FakeResponse implements SseResponse {
  /** A browser that reconnects keeps its parser (its last event id survives the connection). */
  constructor(readonly parser = new SseParser()) {}

  stalled = false;
  unsent = 0;
  /** Most bytes ever unsent at once. */
  peakUnsent = 0;
  ended = false;
  destroyed = false;
  #pending: { chunk: string; flushed: (() => void) | undefined }[] = [];
  #listeners: { event: 'close'; listener: () => void }[] = [];

  write(chunk: string, flushed?: () => void): boolean {
    if (this.destroyed) return false;
    if (!this.stalled) {
      this.parser.push(chunk);
      flushed?.();
      return true;
    }
    this.#pending.push({ chunk, flushed });
    this.unsent += Buffer.byteLength(chunk);
    this.peakUnsent = Math.max(this.peakUnsent, this.unsent);
    return false;
  }

  get writableLength(): number {
    return this.unsent;
  }

  /** The reader catches up: everything unsent is read, and the response drains. */
  resume(): void {
    this.stalled = false;
    const pending = this.#pending;
    this.#pending = [];
    this.unsent = 0;
    for (const { chunk } of pending) this.parser.push(chunk);
    for (const { flushed } of pending) flushed?.();
    if (this.ended) this.#emit('close');
  }

  end(): void {
    this.ended = true;
    if (!this.stalled) this.#emit('close');
  }

  destroy(): void {
    this.destroyed = true;
    this.unsent = 0;
    this.#pending = [];
    this.#emit('close');
  }

  once(event: 'close', listener: () => void): void {
    this.#listeners.push({ event, listener });
  }

  /** The browser went away. */
  disconnect(): void {
    this.#emit('close');
  }

  get events() {
    return this.parser.events;
  }

  /** The `data` of the change events received, parsed. */
  changes<D = unknown>(): { id: string; lsn: number; partition: string; data?: D; eventId: string }[] {
    return this.events
      .filter((e) => e.type === 'message')
      .map((e) => ({ ...(JSON.parse(e.data) as { id: string; lsn: number; partition: string; data?: D }), eventId: e.lastEventId }));
  }

  #emit(event: 'close'): void {
    const now = this.#listeners.filter((l) => l.event === event);
    this.#listeners = event === 'close' ? [] : this.#listeners.filter((l) => l.event !== event);
    for (const l of now) l.listener();
  }
}
