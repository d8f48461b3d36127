import { describe, expect, it } from 'vitest';
import { formatEventId, formatSseComment, formatSseMessage, parseEventId } from '../../src/sse/index.js';
import { SseParser } from '../support/sseParser.js';

describe('formatSseMessage', () => {
  it('frames fields in the order retry, event, id, data and ends with a blank line', () => {
    expect(formatSseMessage({ retry: 500, event: 'reset', id: 's.3', data: '{"a":1}' })).toBe('retry: 500\nevent: reset\nid: s.3\ndata: {"a":1}\n\n');
  });

  it('splits data on every kind of line break, and a browser-style parser joins it back with \\n', () => {
    const framed = formatSseMessage({ data: 'one\ntwo\r\nthree\rfour' });
    expect(framed).toBe('data: one\ndata: two\ndata: three\ndata: four\n\n');
    const parser = new SseParser();
    expect(parser.push(framed)).toEqual([{ type: 'message', data: 'one\ntwo\nthree\nfour', lastEventId: '' }]);
  });

  it('keeps an empty data field (an event with empty data is still dispatched)', () => {
    expect(formatSseMessage({ data: '' })).toBe('data: \n\n');
  });

  it('an id-only message moves the last event id without dispatching an event', () => {
    const parser = new SseParser();
    expect(parser.push(formatSseMessage({ id: 's.9' }))).toEqual([]);
    expect(parser.lastEventId).toBe('s.9');
  });

  it('refuses ids and event names with line breaks or NUL, and bad retry values, saying what is wrong', () => {
    expect(() => formatSseMessage({ id: 'a\nb' })).toThrow(/SSE id "a\\nb" must not contain line breaks or NUL/);
    expect(() => formatSseMessage({ id: 'a\0b' })).toThrow(/NUL/);
    expect(() => formatSseMessage({ event: 'x\ry' })).toThrow(/SSE event .* must not contain line breaks/);
    expect(() => formatSseMessage({ retry: -1 })).toThrow(/retry must be a non-negative integer/);
    expect(() => formatSseMessage({ retry: 1.5 })).toThrow(/retry/);
  });
});

describe('formatSseComment', () => {
  it('prefixes every line with a colon, which parsers ignore', () => {
    expect(formatSseComment('heartbeat')).toBe(': heartbeat\n');
    expect(formatSseComment('a\nb')).toBe(': a\n: b\n');
    const parser = new SseParser();
    expect(parser.push(formatSseComment('x') + formatSseMessage({ data: 'y' }))).toEqual([{ type: 'message', data: 'y', lastEventId: '' }]);
    expect(parser.comments).toBe(1);
  });
});

describe('event ids', () => {
  it('round-trip stream and sequence number', () => {
    expect(formatEventId('Ab_-9', 42)).toBe('Ab_-9.42');
    expect(parseEventId('Ab_-9.42')).toEqual({ stream: 'Ab_-9', seq: 42 });
    expect(parseEventId('s.0')).toEqual({ stream: 's', seq: 0 });
  });

  it('reject what is not an event id', () => {
    for (const bad of [undefined, '', '42', '.42', 's.', 's.-1', 's.1e3', 's.4.2x', 's.99999999999999999']) {
      expect(parseEventId(bad), String(bad)).toBeUndefined();
    }
  });
});
