/** One dispatched Server-Sent Event, as a browser's EventSource would see it. */
export interface ParsedSseEvent {
  readonly type: string;
  readonly data: string;
  /** The last event id after this event (what the browser would send back as `Last-Event-ID`). */
  readonly lastEventId: string;
}

/**
 * An incremental `text/event-stream` parser following the HTML spec's rules: fields accumulate until a blank
 * line; `id` updates the last event id even when nothing is dispatched; comments are counted.
 */
export class SseParser {
  readonly events: ParsedSseEvent[] = [];
  comments = 0;
  lastEventId = '';
  retry: number | undefined;
  #pending = '';
  #data: string[] = [];
  #type = '';
  #idBuffer = '';

  push(chunk: string): ParsedSseEvent[] {
    const before = this.events.length;
    this.#pending += chunk;
    let nl: number;
    while ((nl = this.#pending.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.#pending.slice(0, nl);
      const width = this.#pending.startsWith('\r\n', nl) ? 2 : 1;
      this.#pending = this.#pending.slice(nl + width);
      this.#line(line);
    }
    return this.events.slice(before);
  }

  #line(line: string): void {
    if (line === '') {
      this.lastEventId = this.#idBuffer;
      if (this.#data.length > 0) this.events.push({ type: this.#type || 'message', data: this.#data.join('\n'), lastEventId: this.lastEventId });
      this.#data = [];
      this.#type = '';
      return;
    }
    if (line.startsWith(':')) {
      this.comments++;
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#type = value;
    else if (field === 'id' && !value.includes('\0')) this.#idBuffer = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value);
  }
}
