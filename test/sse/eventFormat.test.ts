import { describe, expect, it } from 'vitest';
import { formatSseComment, formatSseMessage } from '../../src/sse/eventFormat.js';
import { formatEventId, parseEventId } from '../../src/sse/eventId.js';
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
  it('round-trip the stream and the LSN reached per partition (base 36, tokens URI-encoded)', () => {
    const positions = new Map([['0', 42], ['a,b:c', 7], ['12', 0]]);
    const id = formatEventId('Ab_-9', positions);
    expect(id).toBe('Ab_-9.0:16,a%2Cb%3Ac:7,12:0');
    expect(parseEventId(id)).toEqual({ stream: 'Ab_-9', positions });
    expect(parseEventId('s.')).toEqual({ stream: 's', positions: new Map() });
    expect(parseEventId(formatEventId('s', new Map([['0', Number.MAX_SAFE_INTEGER]])))!.positions.get('0')).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('reject what is not an event id', () => {
    for (const bad of [undefined, '', '42', '.0:1', 's.0', 's.0:', 's.:1', 's.0:-1', 's.0:1,0:2', 's.0:A', 's.%E0%A4%A:1', 's.0:zzzzzzzzzzz']) {
      expect(parseEventId(bad), String(bad)).toBeUndefined();
    }
  });
});
