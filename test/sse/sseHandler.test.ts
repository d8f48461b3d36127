import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChangeBatch } from '../../src/core/ChangeBatch.js';
import { createSseHub, sseHandler } from '../../src/sse/index.js';
import { SseParser } from '../support/sseParser.js';

interface Doc {
  id: string;
  color: string;
}

const hub = createSseHub<Doc>({ streamId: 'H', project: (c) => c.document?.color });
let server: Server;
let port = 0;
let lsn = 0;
const publish = (...colors: string[]) =>
  hub.publish(
    new ChangeBatch<Doc>({
      partition: '0',
      position: String(lsn),
      changes: colors.map((color) => ({ id: `d${++lsn}`, operation: 'upsert' as const, document: { id: `d${lsn}`, color }, lsn, timestampMs: 0 })),
    }),
  );

beforeAll(async () => {
  const events = sseHandler(hub, {
    allowOrigin: '*',
    client: (req) => {
      const color = new URL(req.url!, 'http://x').searchParams.get('color');
      if (color === 'invalid') throw new Error('color must be red or blue');
      return color ? { filter: (c) => c.document?.color === color } : {};
    },
  });
  server = createServer(events);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  hub.close();
  await new Promise((resolve) => server.close(resolve));
});

/** Opens a stream and resolves once `count` change events arrived (then disconnects). */
function open(path: string, headers: Record<string, string>, count: number, onOpen?: () => void) {
  return new Promise<{ res: IncomingMessage; parser: SseParser }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      const parser = new SseParser();
      res.setEncoding('utf8');
      const check = () => {
        if (parser.events.length >= count) {
          req.destroy();
          resolve({ res, parser });
        }
      };
      res.on('data', (chunk: string) => (parser.push(chunk), check()));
      res.on('end', () => resolve({ res, parser }));
      onOpen?.();
      check();
    });
    req.on('error', (e) => (e.message === 'socket hang up' ? undefined : reject(e)));
    req.end();
  });
}

describe('sseHandler over node:http', () => {
  it('streams text/event-stream with no-cache headers, and resumes from the Last-Event-ID header', async () => {
    publish('red', 'blue');
    const first = await open('/events', {}, 2, () => publish('red', 'blue'));
    expect(first.res.statusCode).toBe(200);
    expect(first.res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(first.res.headers['cache-control']).toBe('no-cache, no-transform');
    expect(first.res.headers['access-control-allow-origin']).toBe('*');
    expect(first.parser.events.map((e) => e.lastEventId)).toEqual(['H.0:3', 'H.0:4']);
    publish('red');
    const second = await open('/events', { 'Last-Event-ID': 'H.0:3' }, 2);
    expect(second.parser.events.map((e) => [e.lastEventId, JSON.parse(e.data).data])).toEqual([
      ['H.0:4', 'blue'],
      ['H.0:5', 'red'],
    ]);
  });

  it('takes ?lastEventId= when there is no header, and a per-request filter from the query', async () => {
    const res = await open('/events?color=red&lastEventId=H.', {}, 3);
    expect(res.parser.events.map((e) => e.lastEventId)).toEqual(['H.0:1', 'H.0:3', 'H.0:5']);
  });

  it('answers 405 to anything but GET and 400 with the message when the client options throw', async () => {
    const status = (method: string, path: string) =>
      new Promise<[number, string]>((resolve) => {
        const req = request({ host: '127.0.0.1', port, path, method }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve([res.statusCode!, body]));
        });
        req.end();
      });
    expect(await status('POST', '/events')).toEqual([405, 'Server-Sent Events are served to GET only\n']);
    expect(await status('GET', '/events?color=invalid')).toEqual([400, 'color must be red or blue\n']);
  });
});
