/** One Server-Sent Events message, before it is framed as `text/event-stream` lines. * @internal Wire format of `rxfeed/sse`, not exported from it.
 */
export interface SseMessage {
  /** The `id:` field: the browser sends it back as `Last-Event-ID` when it reconnects. No line breaks or NUL. */
  readonly id?: string;
  /** The `event:` field (the type a browser listens for); omitted means `message`. No line breaks. */
  readonly event?: string;
  /** The `data:` payload; line breaks are split into several `data:` lines and joined again by the browser. */
  readonly data?: string;
  /** The `retry:` field: how long a browser waits before reconnecting, in ms (a non-negative integer). */
  readonly retry?: number;
}

const LINE_BREAK = /\r\n|\r|\n/;

function checkField(name: string, value: string): void {
  if (/[\r\n]/.test(value) || (name === 'id' && value.includes('\0'))) {
    throw new TypeError(
      `SSE ${name} ${JSON.stringify(value)} must not contain line breaks${name === 'id' ? ' or NUL' : ''}: the browser would split or ignore it`,
    );
  }
}

/**
 * Frames one message as `text/event-stream` text, ending with the blank line that makes the browser dispatch it.
 *
 * In short: `data` may hold line breaks (each line becomes its own `data:` line); `id` and `event` may not.
 * A message with an `id` but no `data` moves the browser's last event id without dispatching anything.
 *
 * @example
 * ```ts
 * import { formatSseMessage } from './eventFormat.js';
 * res.write(formatSseMessage({ id: 'a1.7', data: JSON.stringify({ id: 'o1' }) })); // "id: a1.7\ndata: {...}\n\n"
 * ```
 * @throws TypeError when `id` or `event` holds a line break, `id` a NUL, or `retry` is not a non-negative integer.
 * @internal Wire format of `rxfeed/sse`, not exported from it.
 */
export function formatSseMessage(message: SseMessage): string {
  let out = '';
  if (message.retry !== undefined) {
    if (!Number.isInteger(message.retry) || message.retry < 0) {
      throw new TypeError(`SSE retry must be a non-negative integer of milliseconds, got ${String(message.retry)}`);
    }
    out += `retry: ${message.retry}\n`;
  }
  if (message.event !== undefined) {
    checkField('event', message.event);
    out += `event: ${message.event}\n`;
  }
  if (message.id !== undefined) {
    checkField('id', message.id);
    out += `id: ${message.id}\n`;
  }
  if (message.data !== undefined) {
    for (const line of message.data.split(LINE_BREAK)) out += `data: ${line}\n`;
  }
  return out + '\n';
}

/**
 * Frames a comment line (`: text`), which browsers ignore: used as a heartbeat so proxies keep the connection.
 *
 * @example
 * ```ts
 * import { formatSseComment } from './eventFormat.js';
 * res.write(formatSseComment('heartbeat')); // ": heartbeat\n"
 * ```
 * @internal Wire format of `rxfeed/sse`, not exported from it.
 */
export function formatSseComment(text: string): string {
  return text
    .split(LINE_BREAK)
    .map((line) => `: ${line}\n`)
    .join('');
}
