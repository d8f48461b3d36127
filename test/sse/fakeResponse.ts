import type { SseResponse } from '../../src/sse/index.js';
import { SseParser } from '../support/sseParser.js';

/**
 * A response a test controls: a reading client parses what it gets at once; a stalled one keeps every byte
 * unsent, as a socket whose reader stopped does (`writableLength` grows).
 */
export class FakeResponse implements SseResponse {
  readonly parser = new SseParser();
  stalled = false;
  unsent = 0;
  ended = false;
  destroyed = false;
  #onClose: (() => void)[] = [];

  write(chunk: string): boolean {
    if (this.stalled) this.unsent += Buffer.byteLength(chunk);
    else this.parser.push(chunk);
    return !this.stalled;
  }

  get writableLength(): number {
    return this.unsent;
  }

  end(): void {
    this.ended = true;
    if (!this.stalled) this.#close();
  }

  destroy(): void {
    this.destroyed = true;
    this.unsent = 0;
    this.#close();
  }

  once(_event: 'close', listener: () => void): void {
    this.#onClose.push(listener);
  }

  /** The browser went away. */
  disconnect(): void {
    this.#close();
  }

  get events() {
    return this.parser.events;
  }

  /** The `data` of the change events received, parsed. */
  changes<D = unknown>(): { id: string; data?: D; eventId: string }[] {
    return this.events.filter((e) => e.type === 'message').map((e) => ({ ...(JSON.parse(e.data) as { id: string; data?: D }), eventId: e.lastEventId }));
  }

  #close(): void {
    const listeners = this.#onClose;
    this.#onClose = [];
    for (const l of listeners) l();
  }
}
